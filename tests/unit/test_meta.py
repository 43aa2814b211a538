"""Rules for every test (TESTING.md §6): each test asserts; no sleeps as synchronisation."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "node_modules" not in p.parts)


def _asserts(fn: ast.AST) -> bool:
    for n in ast.walk(fn):
        if isinstance(n, ast.Assert):
            return True
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("raises", "fail") or name.startswith(("assert_", "expect_", "check")):
                return True
    return False


def test_every_test_asserts() -> None:
    silent = [
        f"{p.relative_to(TESTS)}::{n.name}"
        for p in _test_files()
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and n.name.startswith("test_")
        and not _asserts(n)
    ]
    assert silent == []


def _sleeps(tree: ast.AST) -> list[int]:
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call) or not isinstance(n.func, ast.Attribute):
            continue
        owner = n.func.value.id if isinstance(n.func.value, ast.Name) else ""
        if n.func.attr == "sleep" and owner == "time":
            out.append(n.lineno)
        if n.func.attr == "sleep" and owner == "asyncio":
            arg = n.args[0] if n.args else None
            if not (isinstance(arg, ast.Constant) and arg.value == 0):
                out.append(n.lineno)
        if n.func.attr == "wait_for_timeout":
            out.append(n.lineno)
    return out


def test_no_sleeps_as_synchronisation() -> None:
    found = [
        f"{p.relative_to(TESTS)}:{line}"
        for p in _test_files()
        if p.name != "test_meta.py"
        for line in _sleeps(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert found == []
