"""The user docs name only commands and flags that exist, and every install hint names the right package
(issue 9 H16, H17)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from agentd.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(```+|~~~+).*?^\1[ \t]*$", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+(?:\n[^`\n]+)?)`")  # a code span may wrap once
_START = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/agentd|agentd|python3? -m agentd)(?=\s|$)")
_STOP = {"|", "||", "&&", ";", ">", "2>", "<"}


def command_lines(text: str) -> list[str]:
    """Every `agentd …` command line of a Markdown text: fenced lines and code spans that start with it."""
    found = []
    for block in _FENCE.finditer(text):
        joined = re.sub(r"\\\n\s*", " ", block.group(0))  # shell line continuations
        for ln in joined.splitlines():
            found += [seg.strip() for seg in re.split(r"&&|;(?!\S)", ln) if _START.match(seg.strip())]
    for span in _SPAN.findall(_FENCE.sub("", text)):
        span = " ".join(span.split())
        if _START.match(span):
            found.append(span)
    return found


def _tokens(line: str) -> list[str]:
    """The words after `agentd`, without comments, env prefixes, brackets and what follows a pipe."""
    line = line.removeprefix("$ ")
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    while words and "=" in words[0] and words[0].split("=")[0].isupper():
        words.pop(0)
    words = words[3:] if words[:2] in (["python", "-m"], ["python3", "-m"]) else words[1:]
    out = []
    for w in words:
        if w in _STOP:
            break
        w = w.strip("[](){}")
        if w and w not in ("…", "...", "|"):
            out.append(w.split("=")[0] if w.startswith("--") else w)
    return out


def _help(path: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0, path
    return out.getvalue()


def _resolve(tokens: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(subcommand path, flags, problems) for the words of one command line."""
    parser, path, flags, problems = build_parser(), [], [], []
    expect_sub = True
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        actions = parser._option_string_actions
        if tok.startswith("-"):
            flags.append(tok)
            action = actions.get(tok)
            takes = action is not None and action.nargs != 0
            if takes and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
                i += 1
        elif expect_sub and parser._subparsers is not None:
            choices = next(a for a in parser._subparsers._group_actions).choices  # type: ignore[attr-defined]
            if tok in choices:
                parser, path = choices[tok], [*path, tok]
            else:
                problems.append(f"`agentd {' '.join(path)}` has no subcommand {tok!r}")
                expect_sub = False
        i += 1
    return path, flags, problems


def test_h17_every_agentd_command_in_the_docs_exists() -> None:
    """H17: each `agentd …` command line in README.md and docs/*.md names subcommands that exist, and each
    flag it uses appears in `--help` of that command (or of `agentd`, for the global options). A flag hidden
    from `--help` counts as missing."""
    root_help = _help([])
    problems: list[str] = []
    seen = 0
    for doc in USER_DOCS:
        for line in command_lines(doc.read_text(encoding="utf-8")):
            seen += 1
            path, flags, bad = _resolve(_tokens(line))
            text = _help(path) + root_help
            bad += [f"flag {f} is not in `agentd {' '.join(path)} --help`" for f in flags if f not in text]
            problems += [f"{doc.relative_to(ROOT)}: {line!r}: {b}" for b in bad]
    assert seen > 20  # the scan finds the docs' commands at all
    assert problems == []


def test_h17_the_scan_catches_a_wrong_command() -> None:
    """The checker itself: a misspelt subcommand and unknown flags are reported."""
    text = (
        "Run `agentd sessions lst`, then\n```bash\nagentd run --promt x   # typo\n```\n"
        "or `agentd --acpx`, `agentd audit verify ID` and `agentd/session/load` (a method, not a command)."
    )
    lines = command_lines(text)
    assert lines == [
        "agentd run --promt x   # typo",
        "agentd sessions lst",
        "agentd --acpx",
        "agentd audit verify ID",
    ]
    root_help = _help([])
    verdicts = []
    for line in lines:
        path, flags, bad = _resolve(_tokens(line))
        bad += [f for f in flags if f not in _help(path) + root_help]
        verdicts.append(bad)
    assert verdicts == [["--promt"], ["`agentd sessions` has no subcommand 'lst'"], ["--acpx"], []]


def test_h16_the_distribution_name_is_not_the_unrelated_pypi_agentd() -> None:
    """H16: `agentd` on PyPI is another project. The distribution is `agentd-daemon`; the console command and
    the import name stay `agentd`; no doc or editor hint tells anyone to `pip install agentd`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert (project["name"], project["scripts"]) == ("agentd-daemon", {"agentd": "agentd.cli:main"})
    hints = [*USER_DOCS, *sorted((ROOT / "editor-clients").rglob("*.lua")),
             *sorted((ROOT / "editor-clients").rglob("*.txt")), *sorted((ROOT / "editor-clients" / "vscode" / "src").rglob("*.ts")),
             *sorted((ROOT / "editor-clients").glob("*/README.md"))]  # fmt: skip
    bad = re.compile(r"pip3? install (?:-U |--user )*agentd(?![\w.-])")
    offenders = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in hints
        for text in [p.read_text(encoding="utf-8")]
        for m in bad.finditer(text)
        if "unrelated" not in text[m.end() : m.end() + 40]  # the warning that names it is fine
    ]
    assert offenders == []
    assert "agentd-daemon" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_h16_the_readme_says_how_neovim_finds_agentd_and_how_to_uninstall() -> None:
    """H16: the README's Neovim section names PATH and `cmd`, the uninstall command and the data to remove."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Neovim") : readme.index("## Configuration")]
    for needle in (
        "PATH",
        "`cmd`",
        "pipx uninstall agentd-daemon",
        "~/.local/share/agentd",
        "~/.config/agentd",
    ):
        assert needle in section, needle
    lazy_cmds = re.findall(r'"(Agentd\w*)"', section)
    documented = set(re.findall(r"^\| `:(Agentd\w*)", (ROOT / "docs" / "neovim.md").read_text(), re.M))
    assert set(lazy_cmds) == documented and len(documented) >= 8  # H17: the spec lists every command


def test_h17_testing_md_quotes_the_ci_scripts_by_reference() -> None:
    """H17: docs/design/TESTING.md held stale copies of `.ci/run` and `.ci/tiers`. It now points at them and
    copies no script, and its tier table names every tier `.ci/tiers` runs, with its directory and marker."""
    testing = (ROOT / "docs" / "design" / "TESTING.md").read_text(encoding="utf-8")
    fenced = [b.group(0) for b in _FENCE.finditer(testing)]
    assert [b for b in fenced if "#!/usr/bin/env bash" in b or "\ntier " in b or "make test\n" in b] == []
    assert "[`.ci/run`](../../.ci/run)" in testing and "[`.ci/tiers`](../../.ci/tiers)" in testing
    tiers = re.findall(
        r"^\s*(?:if .*then )?tier (\w+)\s+(\S+)\s+-m (\w+)", (ROOT / ".ci" / "tiers").read_text(), re.M
    )
    assert len(tiers) >= 6
    for name, directory, marker in tiers:
        row = re.search(rf"^\| `{marker}`[^|]*\| `{re.escape(directory)}/` \|", testing, re.M)
        assert row, (name, directory, marker)


def test_h17_acp_is_offered_now_that_it_exists() -> None:
    """H17, issue 10: `--acp` was hidden while the ACP adapter did not exist; it is in `--help`, in the package
    description and in the docs now (tests/acp runs it)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "--acp" in _help([]) and "ACP" in project["description"]
    assert "agentd --acp" in (ROOT / "docs" / "acp.md").read_text(encoding="utf-8")
