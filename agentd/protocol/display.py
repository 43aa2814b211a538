"""What a front end shows escaped in approval texts (issue 9 H20). LEAF: imports nothing of agentd.

Owns `ESCAPED_RANGES`: the code points that could make a command or a path look like another, shown as an
escape instead of themselves by every front end: `agentd.text.visible` (the terminal approver, the LSP
`requestPermission` params and `showMessageRequest` fallback, tool titles, operator lines) and the editor
clients, which get the same table through the generated `protocol.ts` / `protocol.lua`
(`agentd.protocol.schema`). The table holds the Unicode 14.0 characters of the categories Cc (control
characters but tab and newline), Cf (format: bidi controls, zero-width characters, tags), Cs (lone
surrogates), Zl, Zp, Zs other than U+0020 (no-break and other look-alike spaces), and the default-ignorable
code points outside those (Hangul fillers, variation selectors, U+034F, ...) plus U+2800 (a blank braille
pattern used as an invisible letter). tests/unit/test_text.py derives it again from `unicodedata`.

The escape of a code point (the same in every front end): `\\xNN` below U+0100, `\\uNNNN` below U+10000,
else `\\UNNNNNNNN` (lowercase hex); CR is `\\r`. Tab stays; newline stays in multi-line text and is `\\n`
in one-line text.
"""

from __future__ import annotations

# Inclusive, sorted, disjoint code point ranges.
ESCAPED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008), (0x000B, 0x001F), (0x007F, 0x00A0), (0x00AD, 0x00AD),
    (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160),
    (0x1680, 0x1680), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2000, 0x200F),
    (0x2028, 0x202F), (0x205F, 0x2064), (0x2066, 0x206F), (0x2800, 0x2800),
    (0x3000, 0x3000), (0x3164, 0x3164), (0xD800, 0xDFFF), (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
