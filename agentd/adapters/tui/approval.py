"""Approvals in the terminal client: the question inline, answered with one key (docs/terminal.md).

Owns `KeyboardApprover` (an `agentd.permissions.approver.Approver`): it pauses the live region, prints the
tool call's title and the whole change (a syntax-highlighted unified diff) or the command with its folder
and what it asks beyond the sandbox, then offers exactly the options the gate sent (PROTOCOL.md §6.10: allow
once, always, always for this command prefix, reject, always reject; a protected path offers only once and
reject), each with a key: `y` once, `a` always (whichever "always" the gate offers), `n` or Esc reject,
`r` always reject, digits by position, arrows and Enter. Ctrl-C cancels the turn. Every text shown is
escaped (`agentd.text.visible`, H20). `choose_option` is the small prompt_toolkit application that reads the
key (the approval question and the client's pickers); it never touches signal handlers (new-user H: Ctrl-C
after an approval). Imports prompt_toolkit and rich; never pygls, lsprotocol or acp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from rich.syntax import Syntax
from rich.text import Text

from agentd.adapters.tui.entry import ignore_mouse_sequences
from agentd.adapters.tui.view import View
from agentd.permissions.approver import ApprovalOutcome, ApprovalRequest, offered_options
from agentd.text import visible

KIND_KEYS = {"allow_once": "y", "allow_always": "a", "reject_once": "n", "reject_always": "r"}
CANCELLED = "cancelled"
ASK_HINT = "↑↓ Enter, or a key; Esc rejects, Ctrl-C cancels the turn"


def choice_keys(options: list[dict[str, Any]]) -> dict[str, str]:
    """key -> optionId: a digit per option by position, and the kind's letter (`KIND_KEYS`) for the first
    option of each kind; Esc means the first reject option."""
    keys = {str(i + 1): o["optionId"] for i, o in enumerate(options[:9])}
    for o in options:
        key = KIND_KEYS.get(str(o.get("kind")))
        if key is not None and key not in keys:
            keys[key] = o["optionId"]
    reject = next((o["optionId"] for o in options if o.get("kind") == "reject_once"), None)
    if reject is not None:
        keys["escape"] = reject
    return keys


async def choose_option(options: list[dict[str, Any]], question: str, hint: str = ASK_HINT) -> str:
    """Show `question`, the options (names already escaped) and `hint`, return the chosen optionId, or
    `CANCELLED` for Ctrl-C. Runs inline (not full screen) on the terminal; long lines wrap."""
    keys = choice_keys(options)
    selected = [0]

    def fragments() -> StyleAndTextTuples:
        out: StyleAndTextTuples = [("bold", question + "\n")]
        letters = {v: k for k, v in keys.items() if len(k) == 1 and not k.isdigit()}
        for i, o in enumerate(options):
            mark = "❯ " if i == selected[0] else "  "
            key = f" ({letters[o['optionId']]})" if o["optionId"] in letters else ""
            style = "reverse" if i == selected[0] else ""
            out.append((style, f"{mark}{i + 1}. {o['name']}{key}"))
            out.append(("", "\n"))
        out.append(("class:hint", "  " + hint))
        return out

    kb = ignore_mouse_sequences(KeyBindings())

    def picker(option_id: str) -> Callable[[KeyPressEvent], None]:
        return lambda event: event.app.exit(result=option_id)

    for key, option_id in keys.items():
        kb.add(key, eager=True)(picker(option_id))

    @kb.add("up")
    def _up(event: KeyPressEvent) -> None:
        selected[0] = (selected[0] - 1) % len(options)

    @kb.add("down")
    def _down(event: KeyPressEvent) -> None:
        selected[0] = (selected[0] + 1) % len(options)

    @kb.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        event.app.exit(result=options[selected[0]]["optionId"])

    @kb.add("c-c")
    @kb.add("<sigint>")  # a SIGINT the client forwards (agentd.adapters.tui.entry.send_interrupt)
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(result=CANCELLED)

    app: Application[str] = Application(
        layout=Layout(
            Window(
                FormattedTextControl(fragments, show_cursor=False), dont_extend_height=True, wrap_lines=True
            )
        ),
        key_bindings=kb,
        full_screen=False,
        erase_when_done=True,
    )
    return await app.run_async(handle_sigint=False)  # SIGINT is the client's (agentd.adapters.tui.chat)


class KeyboardApprover:
    """Asks the person at the keyboard (see the module docstring). `cancel_turn()` is called on Ctrl-C."""

    def __init__(self, view: View, cancel_turn: Callable[[], None]) -> None:
        self.view = view
        self.cancel_turn = cancel_turn

    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        options = offered_options(req)
        self.view.pause()
        try:
            self.show(req)
            answer = await choose_option(options, f"Allow {visible(req.title, one_line=True)}?")
        finally:
            self.view.resume()
        if answer == CANCELLED:
            self.view.note("[approval · cancelled the turn]", style="yellow")
            self.cancel_turn()
            return ApprovalOutcome(option="cancelled", decided_by="cancel")
        picked = next(o for o in options if o["optionId"] == answer)
        style = "green" if str(picked["kind"]).startswith("allow") else "red"
        self.view.note(f"[approval · {picked['name']}]", style=style)
        return ApprovalOutcome(option=picked["kind"], option_id=answer)

    def show(self, req: ApprovalRequest) -> None:
        """The question's body: the title, then the diff, or the command and its folder."""
        p = req.preview
        v = self.view
        v.flush()
        v.print(Text(f"⚠ {visible(req.title, one_line=True)}", style="bold yellow"))
        if req.protected is not None:
            v.print(Text(f"  a protected path ({req.protected}): asked every time", style="yellow"))
        if p.diff:
            v.print(
                Syntax(
                    visible(p.diff.rstrip("\n")),
                    "diff",
                    theme="monokai",
                    word_wrap=True,
                    background_color="default",
                )
            )
        elif p.command is not None:
            v.print(Text("$ " + visible(p.command, one_line=True), style="bold"))
            if p.cwd:
                v.print(Text(f"  in {visible(p.cwd, one_line=True)}", style="dim"))
            note = p.sandbox_note()
            if note:
                v.print(Text(f"  {visible(note, one_line=True)}", style="yellow" if p.escalation else "dim"))
        else:
            v.print(Text(visible(p.path or p.summary), style="dim"))
