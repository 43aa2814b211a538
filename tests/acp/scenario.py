"""The emulator's script of the acp tier's journey (tests/acp/test_journey.py, tests/acp/test_node_client.py):
a turn with todo_write, read_file and two writes that ask (answered allow_once, then reject_once: the
second's result must reach the model as the rejection, an error), a turn whose 30 s command is cancelled,
a turn on the loaded session (it must receive the synthetic result of the interrupted command), and one over
LSP."""

from __future__ import annotations

TODOS = {"todos": [{"content": "Read a.txt", "status": "in_progress"},
                   {"content": "Write the notes", "status": "pending"}]}  # fmt: skip
DONE = {
    "todos": [{"content": "Read a.txt", "status": "done"}, {"content": "Write the notes", "status": "done"}]
}
REJECTED = "The user rejected this call; it was not run."
INTERRUPTED = (
    "interrupted after the tool started; its outcome is unknown, check the workspace before retrying"
)
MARK = "30.004721"
LONG = f"echo $$ > pid.txt; exec sleep {MARK}"

TURN_1 = [
    {"reply": [{"text": "Planning."}, {"tool_use": {"name": "todo_write", "input": TODOS}}], "stop_reason": "tool_use"},
    {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}}], "stop_reason": "tool_use"},
    {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "# Notes\n"}}}],
     "stop_reason": "tool_use"},
    {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "secret.md", "content": "x\n"}}}],
     "stop_reason": "tool_use",
     "expect": {"tool_result_for": "toolu_emu_3_1", "is_error": False}},
    {"reply": [{"text": "Notes written."}, {"tool_use": {"name": "todo_write", "input": DONE}}], "stop_reason": "tool_use",
     "expect": {"tool_result_for": "toolu_emu_4_1", "is_error": True, "content": REJECTED}},
    {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
]  # fmt: skip
TURN_2 = [
    {"reply": [{"tool_use": {"name": "run_command", "input": {"command": LONG}}}], "stop_reason": "tool_use"},
]
TURN_3 = [
    {"reply": [{"text": "Carrying on."}], "stop_reason": "end_turn",
     "expect": {"tool_result_for": "toolu_emu_7_1", "is_error": True, "content": INTERRUPTED}},
]  # fmt: skip
TURN_4 = [{"reply": [{"text": "Continued over LSP."}], "stop_reason": "end_turn"}]
