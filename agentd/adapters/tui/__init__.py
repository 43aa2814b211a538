"""The interactive terminal client: `agentd` (or `agentd --resume ID`) typed on a terminal (PROTOCOL.md §3.1;
docs/terminal.md).

One more front end on the core's sessions, as the LSP adapter is: it opens a `Session` through
`agentd.core.factory`, sends prompts with `Session.prompt`, shows the updates the core emits and answers the
gate's approval questions from the keyboard. A session started here continues in an editor, and the reverse.

Modules: `chat` (the session the client holds, the prompt/turn loop, Ctrl-C), `commands` (the slash
commands), `view` (what is printed: streamed Markdown, tool lines, the plan, the live status line),
`approval` (the approver: the diff or command, then a key per option the gate offers), `results` (what a
tool line says of its result), `entry` (the input line: history, multi-line, completion of slash commands
and `@path` mentions), `mentions` (`@path` as prompt blocks), `status` (the status-line text).
Only this package imports prompt_toolkit and rich (tests/unit/test_architecture.py), and only when the
client starts: an editor's `agentd` never pays for them. Must not import pygls, lsprotocol or acp.
"""
