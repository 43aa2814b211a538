"""Protected paths in the sandbox (issue 12 §3, break12): the adversarial review's reproductions, run
through `run_command` in permission mode `auto` with the sandbox (`sandbox = "required"`), so the gate lets
each command run without asking. Every protected path class the file tools protect
(`agentd.permissions.protected`) stays unwritable from inside the sandbox at any depth, also when it does
not exist yet: 0 writes land. An ordinary build that writes `src/` and `node_modules/` still works, and
no stand-in is left in the workspace afterwards.

Needs a working bubblewrap (skipped with bwrap's reason elsewhere; a failure under AGENTD_TEST_STRICT=1).
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from agentd.permissions.gate import Gate
from agentd.sandbox import SandboxStatus
from agentd.tools.base import ToolContext, ToolOutput, validate_input
from agentd.tools.shell import RunCommand
from tests.sandbox_fixtures import Box, needs_bwrap


@pytest.fixture
def bwrap_ok() -> SandboxStatus:
    return needs_bwrap()


async def auto_run(script: str, ctx: ToolContext, box: Box) -> ToolOutput:
    """`script` run as a model's run_command call in mode `auto`, hidden from the gate's command parser
    (as a repository's test script is: `npm test`): `echo <base64> | base64 -d | sh`. The gate must
    allow it without asking (it stays in the sandbox); then it runs."""
    tool = RunCommand()
    command = f"echo {base64.b64encode(script.encode()).decode()} | base64 -d | sh"
    args, err = validate_input(tool, {"command": command})
    assert err is None
    gate = Gate(mode="auto", roots=[box.ws], protected=box.protected(), line_writer=lambda _l: None)
    decision = await gate.decide("run_command", args, await tool.preview(args, ctx), "toolu_1")
    assert decision.allowed, decision
    return await tool.run(args, ctx)


def listing(root: Path) -> list[str]:
    """Every path under `root` (relative), symlinks not followed."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(str(Path(dirpath, name).relative_to(root)))
    return sorted(out)


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def quarantined(box: Box) -> list[str]:
    top = box.data / "quarantine"
    return listing(top) if top.exists() else []


async def test_git_init_and_a_hook_in_a_workspace_without_git(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12: `git init` (or `mkdir .git`) then a planted pre-commit hook, where the workspace had no
    `.git` when the command started: refused, nothing lands, and the model is told how to ask."""
    subprocess.run(["rm", "-rf", str(box.ws / ".git")], check=True)
    out = await auto_run(
        "git init -q . ; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; echo ok > f", box.ctx(), box
    )
    assert listing(box.ws) == ["f"], out.content
    assert "Read-only file system" in out.content and "protected paths stay read-only" in out.content


async def test_nested_git_hooks_and_config(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12: a nested `sub/.git/hooks/*` and `sub/.git/config` (core.fsmonitor runs on the host when
    git runs there), in a folder that existed, in folders the command made, and in an existing nested
    repository: 0 writes stay in the workspace; what was created is moved to the quarantine and named."""
    (box.ws / "sub").mkdir()
    (box.ws / "lib" / ".git" / "hooks").mkdir(parents=True)
    (box.ws / "lib" / ".git" / "config").write_text("[core]\n")
    before = listing(box.ws)
    fsmonitor = "printf '[core]\\n\\tfsmonitor = touch /tmp/pwn\\n'"
    out = await auto_run(
        "mkdir -p sub/.git/hooks && echo evil > sub/.git/hooks/pre-commit; echo ok > sub/f; "
        f"git init -q new; {fsmonitor} > new/.git/config; mkdir -p a/b/c/.git; {fsmonitor} > a/b/c/.git/config; "
        f"echo evil > lib/.git/hooks/post-checkout; {fsmonitor} >> lib/.git/config; "
        "mv sub sub2; echo evil > .git/hooks/pre-commit",
        box.ctx(),
        box,
    )
    after = listing(box.ws)
    assert [p for p in after if ".git" in Path(p).parts] == [p for p in before if ".git" in Path(p).parts]
    assert (box.ws / "lib" / ".git" / "config").read_text() == "[core]\n"
    assert (box.ws / "sub2" / "f").read_text() == "ok\n"  # the rest of the command's work stays
    assert out.is_error and out.content.count("agentd moved it") == 3, out.content
    assert {Path(p).parts[1:] for p in quarantined(box) if p.endswith("config")} >= {
        ("new", ".git", "config"),
        ("a", "b", "c", ".git", "config"),
    }


async def test_new_workspace_config(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12: `.agentd/config.toml` created in a workspace that had none, at the top and deeper."""
    out = await auto_run(
        "mkdir -p .agentd; echo 'sandbox = \"off\"' > .agentd/config.toml; "
        "mkdir -p pkg/.agentd && echo x > pkg/.agentd/config.toml; echo ok > pkg/f",
        box.ctx(),
        box,
    )
    assert [p for p in listing(box.ws) if ".agentd" in p] == [], out.content
    assert (box.ws / "pkg" / "f").exists()


async def test_shell_startup_files_and_stores_when_the_workspace_holds_home(
    bwrap_ok: SandboxStatus, box: Box
) -> None:
    """break12: with the home folder as the workspace, start-up files (existing or not), credential stores
    and agentd's config cannot be written: 0 writes land in the home folder's protected paths."""
    from agentd.sandbox import Launcher, build_policy, detect

    policy = build_policy([box.home], box.protected(), readable=box.readable)
    ctx = ToolContext(
        root=box.home,
        env={"PATH": os.environ["PATH"], "HOME": str(box.home)},
        run_timeout_s=20,
        launcher=Launcher("required", detect(), policy),
    )
    names = listing(box.home)
    before = {p: (box.home / p).read_bytes() for p in names if (box.home / p).is_file()}
    out = await auto_run(
        "echo evil >> .bashrc; echo evil > .zshrc; echo evil > .profile; mkdir -p .config/fish; "
        "echo evil > .config/fish/config.fish; echo key >> .ssh/authorized_keys; mkdir -p .aws; "
        "echo '[default]' > .aws/config; echo x >> .config/agentd/config.toml; echo evil > .vscode/x; "
        "echo ok > notes.txt",
        ctx,
        box,
    )
    after = {p: (box.home / p).read_bytes() for p in listing(box.home) if (box.home / p).is_file()}
    assert after == {**before, "notes.txt": b"ok\n"}, out.content
    assert listing(box.home) == sorted([*names, "notes.txt"])  # no stand-in left behind


async def test_editor_configuration(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12: `.vscode/tasks.json` (a task that runs on folder open), settings, launch configurations,
    `.idea/` run configurations and Neovim's exrc files, at the top and deeper, existing or not."""
    (box.ws / ".vscode").mkdir()
    (box.ws / ".vscode" / "settings.json").write_text("{}\n")
    (box.ws / "app").mkdir()
    before = listing(box.ws)
    task = '{"tasks":[{"label":"x","command":"touch /tmp/pwn","runOptions":{"runOn":"folderOpen"}}]}'
    out = await auto_run(
        f"echo '{task}' > .vscode/tasks.json; echo '{{}}' >> .vscode/settings.json; mkdir -p .idea/runConfigurations; "
        "echo x > .idea/runConfigurations/x.xml; echo 'os.execute(1)' > .nvim.lua; echo x > .exrc; "
        f"mkdir -p app/.vscode && echo '{task}' > app/.vscode/tasks.json; echo x > app/.nvimrc; echo ok > app/f",
        box.ctx(),
        box,
    )
    assert listing(box.ws) == sorted([*before, "app/f"]), out.content
    assert (box.ws / ".vscode" / "settings.json").read_text() == "{}\n"


async def test_an_ordinary_build_still_works_and_leaves_no_stand_in(
    bwrap_ok: SandboxStatus, box: Box
) -> None:
    """break12: a build that writes `src/` and `node_modules/`, deletes and rebuilds a package folder and
    reads the repository (`git status`, `git log`) runs as before; no empty stand-in stays behind."""
    subprocess.run(["rm", "-rf", str(box.ws / ".git")], check=True)
    git(box.ws, "init", "-q")
    (box.ws / "README").write_text("hi\n")
    git(box.ws, "add", "README")
    git(box.ws, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first")
    before = listing(box.ws)
    out = await auto_run(
        "set -e; mkdir -p src node_modules/pkg/lib; echo 'x' > src/app.js; echo '{}' > node_modules/pkg/package.json; "
        "rm -rf node_modules/pkg; mkdir -p node_modules/pkg dist; echo built > dist/out.js; "
        "git status --porcelain; git log --oneline | wc -l",
        box.ctx(),
        box,
    )
    assert out.content.splitlines()[-1].startswith("[sandbox: .") and not out.is_error, out.content
    assert "[exit code 0]" in out.content.splitlines()[-2]  # then the stand-ins named (S4)
    assert "?? dist/" in out.content and "?? src/" in out.content
    made = set(listing(box.ws)) - set(before)
    assert made == {"src", "src/app.js", "node_modules", "node_modules/pkg", "dist", "dist/out.js"}


async def test_git_commit_says_how_to_ask(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12: a command that must write `.git` (git commit) fails with a line naming the protected
    paths and the way to ask: `unsandboxed: true` (the user approves), or, under `sandbox = "required"`,
    asking the user to run it."""
    subprocess.run(["rm", "-rf", str(box.ws / ".git")], check=True)
    git(box.ws, "init", "-q")
    (box.ws / "a").write_text("1\n")
    command = "git add a && git -c user.name=t -c user.email=t@e commit -qm x"
    out = await auto_run(command, box.ctx("auto"), box)
    assert out.is_error and "unsandboxed: true; the user is asked" in out.content, out.content
    out = await auto_run(command, box.ctx("required"), box)
    assert 'sandbox = "required"' in out.content and "ask the user to run it" in out.content, out.content
    assert "No commits yet" in git(box.ws, "status")
    tool, ctx = RunCommand(), box.ctx("auto")  # the way it names: a question, even in mode auto
    args, _ = validate_input(tool, {"command": command, "unsandboxed": True})
    gate = Gate(mode="auto", roots=[box.ws], protected=box.protected(), line_writer=lambda _l: None)
    decision = await gate.decide("run_command", args, await tool.preview(args, ctx), "toolu_2")
    assert (decision.rule, decision.detail) == ("unsandboxed", "no terminal to ask"), decision


async def test_stand_ins_named_in_the_output_are_said_to_be_agentds(
    bwrap_ok: SandboxStatus, box: Box
) -> None:
    """break12 (S4): `git status --short` in the sandbox listed `?? .exrc ?? .nvim.lua ?? .nvimrc`, files
    the user does not have, which misled the model. They stay (an absent name is what a hostile command
    would create), and the result now says they were agentd's stand-ins, removed after the command."""
    out = await auto_run("git status --short --untracked-files=all . 2>&1; ls -a", box.ctx(), box)
    assert (
        ".exrc" in out.content and "stand-in(s) agentd put in place of absent protected paths" in out.content
    )
    assert ".exrc" not in os.listdir(box.ws)
    plain = await auto_run("echo hello", box.ctx(), box)
    assert "stand-in" not in plain.content
