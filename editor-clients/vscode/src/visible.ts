// Approval texts shown as what will run (issue 9 H20): bidi controls, invisible characters, control
// characters and look-alike spaces become escapes (`\u202e`, `\u200b`, `\x1b`, `\xa0`), with the table of
// agentd.protocol.display (generated into protocol.ts), so a command cannot look like another.
//
// The same escapes as the daemon's `agentd.text.visible`: `\xNN` below U+0100, `\uNNNN` below U+10000,
// else `\UNNNNNNNN`; CR is `\r`; tab stays; newline stays unless `oneLine` (then `\n`). A lone surrogate
// (a JS string can hold one) is escaped like any other code point of the table.

import { ESCAPED_RANGES } from "./protocol";

function escaped(cp: number): boolean {
  let lo = 0;
  let hi = ESCAPED_RANGES.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [start, end] = ESCAPED_RANGES[mid];
    if (cp < start) {
      hi = mid - 1;
    } else if (cp > end) {
      lo = mid + 1;
    } else {
      return true;
    }
  }
  return false;
}

function escape(cp: number): string {
  if (cp === 13) {
    return "\\r";
  }
  const [prefix, width] = cp < 0x100 ? ["\\x", 2] : cp < 0x10000 ? ["\\u", 4] : ["\\U", 8];
  return prefix + cp.toString(16).padStart(width, "0");
}

/** `text` with every character of the escaped ranges shown as its escape. */
export function visible(text: string, oneLine = false): string {
  let out = "";
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp === 10) {
      out += oneLine ? "\\n" : ch;
    } else {
      out += escaped(cp) ? escape(cp) : ch;
    }
  }
  return out;
}
