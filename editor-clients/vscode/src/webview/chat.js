// The chat webview's script: renders the transcript the extension host sends and posts prompts back.
// Text is put into the DOM with textContent only (never innerHTML), so nothing the model writes can run.
// Bundled as text into the extension (chat.ts inlines it with the page's nonce).
//
// Streaming: the host sends a message once (`upsert`) and then only the text of each further chunk
// (`append`); the text is kept per message and its markdown is re-rendered at most every RENDER_MS, and at
// once when a block ends (a blank line or a code fence in the chunk) or the message is finished (another
// item arrives, the turn ends), so a long reply costs linear, not quadratic, work.
// @ts-check
(function () {
  // @ts-expect-error: provided by VS Code inside webviews
  const vscode = acquireVsCodeApi();
  const log = /** @type {HTMLElement} */ (document.getElementById("log"));
  const empty = /** @type {HTMLElement} */ (document.getElementById("empty"));
  const form = /** @type {HTMLFormElement} */ (document.getElementById("composer"));
  const prompt = /** @type {HTMLTextAreaElement} */ (document.getElementById("prompt"));
  const send = /** @type {HTMLButtonElement} */ (document.getElementById("send"));
  const cancel = /** @type {HTMLButtonElement} */ (document.getElementById("cancel"));
  const state = /** @type {HTMLElement} */ (document.getElementById("state"));
  const titleBar = /** @type {HTMLElement} */ (document.getElementById("title"));
  const approvalBox = /** @type {HTMLElement} */ (document.getElementById("approval"));
  /** The approval on screen (approvals.ts `Card`), or null. */
  let approval = null;
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let countdown;
  let stateText = "";
  /** @type {Map<string, HTMLElement>} */
  const nodes = new Map();
  /** The full text and role of each message, for `append`. @type {Map<string, {role: string, text: string}>} */
  const texts = new Map();
  /** Messages whose markdown is behind their text. @type {Set<string>} */
  const dirty = new Set();
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let lastRender = 0;
  const RENDER_MS = 100;
  let busy = false;

  const STATUS_ICON = { pending: "○", in_progress: "◐", completed: "✓", failed: "✗" };
  const KIND_LABEL = { read: "read", edit: "edit", execute: "run", think: "plan", delete: "delete", move: "move", search: "search", fetch: "fetch" };

  function el(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  /** Inline markdown: `code` and **bold**; everything else is plain text. */
  function inline(parent, text) {
    const re = /(`[^`\n]+`|\*\*[^*\n]+\*\*)/g;
    let last = 0;
    let m;
    while ((m = re.exec(text))) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      const tok = m[0];
      if (tok.startsWith("`")) parent.appendChild(el("code", "", tok.slice(1, -1)));
      else parent.appendChild(el("strong", "", tok.slice(2, -2)));
      last = m.index + tok.length;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  /** A small markdown subset: fenced code blocks, paragraphs, bullet lists, inline code and bold. */
  function markdown(text) {
    const frag = document.createDocumentFragment();
    const parts = text.split(/^```[^\n]*\n?/m);
    parts.forEach((part, i) => {
      if (i % 2 === 1) {
        const pre = el("pre");
        pre.appendChild(el("code", "", part.replace(/\n$/, "")));
        frag.appendChild(pre);
        return;
      }
      for (const block of part.split(/\n{2,}/)) {
        if (!block.trim()) continue;
        const lines = block.split("\n");
        if (lines.every((l) => /^\s*[-*] /.test(l) || !l.trim())) {
          const ul = el("ul");
          for (const l of lines) {
            if (!l.trim()) continue;
            const li = el("li");
            inline(li, l.replace(/^\s*[-*] /, ""));
            ul.appendChild(li);
          }
          frag.appendChild(ul);
        } else {
          const p = el("p");
          lines.forEach((l, j) => {
            if (j) p.appendChild(el("br"));
            inline(p, l);
          });
          frag.appendChild(p);
        }
      }
    });
    return frag;
  }

  function renderMessage(item) {
    const n = el("section", `msg ${item.role}`);
    n.setAttribute("aria-label", item.role === "user" ? "You" : item.role === "thought" ? "agentd (thinking)" : "agentd");
    n.appendChild(el("div", "who", item.role === "user" ? "You" : item.role === "thought" ? "Thinking" : "agentd"));
    const body = el("div", "body");
    if (item.role === "user") body.textContent = item.text;
    else body.appendChild(markdown(item.text));
    n.appendChild(body);
    if (item.role === "user" && item.checkpoint) {
      const links = el("div", "links checkpoint");
      const restore = el("button", "link", "Restore checkpoint");
      restore.type = "button";
      restore.title = "Put the files and the conversation back to before this message";
      restore.addEventListener("click", () => vscode.postMessage({ type: "restoreCheckpoint", checkpoint: item.checkpoint }));
      const fork = el("button", "link", "Fork from here");
      fork.type = "button";
      fork.title = "A new session with the conversation before this message";
      fork.addEventListener("click", () => vscode.postMessage({ type: "fork", checkpoint: item.checkpoint }));
      links.append(restore, fork);
      n.appendChild(links);
    }
    return n;
  }

  function renderTool(item) {
    const n = el("section", `tool status-${item.status}${item.outcome ? " outcome" : ""}`);
    const plainTitle = item.title.replace(/`/g, "");
    n.setAttribute("aria-label", `Tool call: ${plainTitle}, ${item.outcome || item.status.replace("_", " ")}`);
    const head = el("div", "head");
    head.appendChild(el("span", "icon", STATUS_ICON[item.status] || "•"));
    head.appendChild(el("span", "kind", KIND_LABEL[item.kind] || item.kind));
    const title = el("span", "title");
    inline(title, item.title);
    head.appendChild(title);
    if (item.summary) head.appendChild(el("span", "summary", item.summary));
    head.appendChild(el("span", "status", item.outcome || item.status.replace("_", " ")));
    n.appendChild(head);
    const links = el("div", "links");
    if (item.hasDiff) {
      const b = el("button", "link", "Show diff");
      b.type = "button";
      b.addEventListener("click", () => vscode.postMessage({ type: "openDiff", toolCallId: item.toolCallId }));
      links.appendChild(b);
    }
    if (item.path && item.kind !== "execute") {
      const b = el("button", "link", "Open file");
      b.type = "button";
      b.addEventListener("click", () => vscode.postMessage({ type: "openFile", path: item.path }));
      links.appendChild(b);
    }
    if (links.childElementCount) head.appendChild(links);
    if (item.output && item.kind !== "think") {
      const d = el("details");
      d.appendChild(el("summary", "", "Output"));
      d.appendChild(el("pre", "", item.output));
      n.appendChild(d);
    }
    return n;
  }

  function render(item) {
    if (item.type === "message") return renderMessage(item);
    if (item.type === "tool") return renderTool(item);
    const n = el("div", `notice ${item.level}`, item.text);
    n.setAttribute("role", item.level === "error" ? "alert" : "status");
    return n;
  }

  function upsert(item) {
    if (item.type === "message") {
      texts.set(item.id, { role: item.role, text: item.text });
      dirty.delete(item.id);
    }
    const fresh = render(item);
    fresh.dataset.id = item.id;
    const old = nodes.get(item.id);
    if (old) old.replaceWith(fresh);
    else log.appendChild(fresh);
    nodes.set(item.id, fresh);
    empty.hidden = true;
  }

  function forget(id) {
    nodes.get(id)?.remove();
    nodes.delete(id);
    texts.delete(id);
    dirty.delete(id);
  }

  /** Re-render the markdown of the messages that received text since their last render. */
  function flush() {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    lastRender = Date.now();
    for (const id of dirty) {
      const body = nodes.get(id)?.querySelector(".body");
      const entry = texts.get(id);
      if (!body || !entry) continue;
      body.replaceChildren(markdown(entry.text));
    }
    dirty.clear();
  }

  /** One streamed chunk: `{id, text}` of a message the host has already upserted. */
  function append(msg) {
    const entry = texts.get(msg.id);
    const node = nodes.get(msg.id);
    if (!entry || !node) return;
    entry.text += msg.text;
    if (entry.role === "user") {
      node.querySelector(".body")?.appendChild(document.createTextNode(msg.text));
      return;
    }
    dirty.add(msg.id);
    if (/\n\n|```/.test(msg.text) || Date.now() - lastRender >= RENDER_MS) flush();
    else if (timer === undefined) timer = setTimeout(flush, RENDER_MS - (Date.now() - lastRender));
  }

  function stickToBottom(fn) {
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    fn();
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  function setBusy(b) {
    busy = b;
    send.disabled = b;
    cancel.hidden = !b;
    if (!b) stateText = "";
    state.textContent = b ? stateText || "Working…" : "";
    document.body.classList.toggle("busy", b);
  }

  /** The pending approval: the question, its details and one button per option of the request. */
  function showApproval(card) {
    approval = card;
    if (countdown !== undefined) clearInterval(countdown);
    countdown = undefined;
    approvalBox.replaceChildren();
    approvalBox.hidden = !card;
    if (!card) return;
    approvalBox.appendChild(el("div", "question", card.question));
    if (card.description) approvalBox.appendChild(el("div", "description", card.description));
    if (card.summary) {
      const line = el("div", "summary", `${card.summary} · the proposed change is open in the diff editor `);
      const b = el("button", "link", "Show diff");
      b.type = "button";
      b.addEventListener("click", () => vscode.postMessage({ type: "showApprovalDiff" }));
      line.appendChild(b);
      approvalBox.appendChild(line);
    }
    if (card.command) approvalBox.appendChild(el("pre", "command", card.command));
    const row = el("div", "options");
    card.options.forEach((o, i) => {
      const b = el("button", `option kind-${o.kind}`);
      b.type = "button";
      b.setAttribute("aria-label", o.name);
      b.title = `${o.name}${o.rule ? ` (adds the rule ${o.rule})` : ""} — ${o.shortcut || ""}${o.shortcut ? " or " : ""}${i + 1}`;
      if (o.shortcut) b.setAttribute("aria-keyshortcuts", o.shortcut.replace("Ctrl", "Control"));
      b.appendChild(el("span", "name", o.name));
      b.appendChild(el("kbd", "", o.shortcut || String(i + 1)));
      b.addEventListener("click", () => pick(o.optionId, "button"));
      row.appendChild(b);
    });
    approvalBox.appendChild(row);
    if (card.expiresAt) {
      const left = el("div", "expires");
      const tick = () => {
        const s = Math.max(0, Math.round((card.expiresAt - Date.now()) / 1000));
        left.textContent = `Unanswered, this is denied in ${s} s.`;
      };
      tick();
      countdown = setInterval(tick, 1000);
      approvalBox.appendChild(left);
    }
  }

  function pick(optionId, via) {
    if (!approval) return;
    vscode.postMessage({ type: "approve", requestId: approval.requestId, optionId, via });
  }

  /** The first option of `kind` on the card. */
  function pickKind(kind, via) {
    const o = approval && approval.options.find((x) => x.kind === kind);
    if (o) pick(o.optionId, via);
  }

  // Keys while an approval is pending: Ctrl+Enter allows once, Ctrl+Shift+Enter always, Ctrl+Backspace
  // rejects (not while you are deleting words in a non-empty prompt), 1-9 on the card pick that option.
  document.addEventListener("keydown", (e) => {
    if (!approval) return;
    const mod = e.ctrlKey || e.metaKey;
    const typing = e.target === prompt && prompt.value !== "";
    let kind;
    if (mod && e.key === "Enter") kind = e.shiftKey ? "allow_always" : "allow_once";
    else if (mod && e.key === "Backspace" && !typing) kind = "reject_once";
    if (kind) {
      e.preventDefault();
      e.stopPropagation();
      pickKind(kind, "key");
      return;
    }
    const n = Number(e.key);
    if (!mod && !e.altKey && approvalBox.contains(/** @type {Node} */ (e.target)) && n >= 1 && n <= approval.options.length) {
      e.preventDefault();
      pick(approval.options[n - 1].optionId, "key");
    }
  }, true);

  window.addEventListener("message", (event) => {
    const msg = event.data;
    if (msg.type === "reset") {
      stickToBottom(() => {
        nodes.forEach((n) => n.remove());
        nodes.clear();
        texts.clear();
        dirty.clear();
        empty.hidden = msg.items.length > 0;
        msg.items.forEach(upsert);
      });
      log.scrollTop = log.scrollHeight;
      setBusy(msg.busy);
    } else if (msg.type === "append") {
      stickToBottom(() => append(msg));
    } else if (msg.type === "upsert") {
      stickToBottom(() => {
        if (dirty.size) flush(); // the streamed message before this item is complete
        upsert(msg.item);
      });
    } else if (msg.type === "remove") {
      for (const id of msg.ids) forget(id);
    } else if (msg.type === "busy") {
      if (!msg.busy && dirty.size) stickToBottom(flush);
      setBusy(msg.busy);
    } else if (msg.type === "focus") {
      prompt.focus();
    } else if (msg.type === "approval") {
      stickToBottom(() => showApproval(msg.card));
    } else if (msg.type === "title") {
      titleBar.textContent = msg.title;
      titleBar.hidden = !msg.title;
    } else if (msg.type === "state") {
      stateText = msg.text;
      if (busy) state.textContent = stateText || "Working…";
    }
  });

  function submit() {
    const text = prompt.value.trim();
    if (!text || busy) return;
    vscode.postMessage({ type: "prompt", text });
    prompt.value = "";
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.isComposing) {
      e.preventDefault();
      submit();
    }
  });
  cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
  vscode.postMessage({ type: "ready" });
})();
