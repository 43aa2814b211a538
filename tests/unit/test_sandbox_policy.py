"""The sandbox's pure parts (issue 12): the child environment, protected-path classes, the policy, the
bubblewrap command line, the Seatbelt profile, the facts `agentd doctor` prints, and the modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.permissions.protected import ProtectedPaths
from agentd.sandbox import (
    Launcher,
    SandboxPolicy,
    SandboxRefused,
    SandboxStatus,
    build_policy,
    missing,
    protections,
)
from agentd.sandbox.bwrap import bwrap_argv
from agentd.sandbox.env import child_env, dropped_names, is_secret_name
from agentd.sandbox.launcher import REAPER
from agentd.sandbox.seatbelt import seatbelt_argv, seatbelt_profile

BWRAP = SandboxStatus("bubblewrap", True, "/usr/bin/bwrap", "0.8.0")
NO_BWRAP = SandboxStatus("bubblewrap", False, problem="bubblewrap (bwrap) is not installed; install it")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    for d in (".ssh", ".aws", ".config/agentd", ".config/gcloud", "proj/.git", "proj/.agentd"):
        (h / d).mkdir(parents=True)
    for f in (".netrc", ".bashrc"):
        (h / f).write_text("x")
    return h


def test_child_env_drops_keys_and_credentials_and_keeps_the_rest() -> None:
    env = {
        "PATH": "/bin",
        "ANTHROPIC_API_KEY": "k",
        "OPENAI_API_KEY": "k",
        "ANTHROPIC_AUTH_TOKEN": "k",
        "MY_KEY_VAR": "k",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DB_PASSWORD": "p",
        "GOOGLE_APPLICATION_CREDENTIALS": "/f",
        "SSH_AUTH_SOCK": "/tmp/s",
        "HOME": "/h",
    }
    assert child_env(env, "MY_KEY_VAR") == {"PATH": "/bin", "SSH_AUTH_SOCK": "/tmp/s", "HOME": "/h"}
    kept = child_env(env, "MY_KEY_VAR", pass_env=["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "MY_KEY_VAR"])
    assert sorted(kept) == ["GITHUB_TOKEN", "HOME", "PATH", "SSH_AUTH_SOCK"]  # never a provider key
    assert dropped_names({"A_TOKEN": "1", "B": "2"}) == ["A_TOKEN"]
    assert [is_secret_name(n) for n in ("api_key", "XAUTHORITY", "NPM_TOKEN", "EDITOR")] == [
        True,
        False,
        True,
        False,
    ]


def test_protected_classes(home: Path, tmp_path: Path) -> None:
    """One class per kind of path; the user config dir and any `.agentd` folder are agentd's config."""
    data = tmp_path / "data"
    data.mkdir()
    p = ProtectedPaths.of(home, home / ".config/agentd", data)
    assert [
        p.classify(home / ".config/agentd/config.toml"),
        p.classify(home / "proj/.agentd/config.toml"),
        p.classify(data / "sessions/s/log.jsonl"),
        p.classify(home / "proj/.git/hooks/pre-commit"),
        p.classify(home / "proj/sub/.git"),
        p.classify(home / ".bashrc"),
        p.classify(home / ".config/fish/config.fish"),
        p.classify(home / ".ssh/authorized_keys"),
        p.classify(home / ".netrc"),
        p.classify(home / "proj/src/app.py"),
        p.classify(home / "proj/.bashrc"),
        p.classify(home / "proj/.vscode/tasks.json"),
        p.classify(home / "proj/sub/.idea/runConfigurations/x.xml"),
        p.classify(home / "proj/.nvim.lua"),
        p.classify(home / "proj/deep/er/.exrc"),
        p.classify(home / "proj/.zed/settings.json"),
        p.classify(home / "proj/.vscode/.git/config"),
    ] == [
        "agentd_config",
        "agentd_config",
        "agentd_data",
        "git_internals",
        "git_internals",
        "shell_startup",
        "shell_startup",
        "credentials",
        "credentials",
        None,
        None,
        "editor_config",
        "editor_config",
        "editor_config",
        "editor_config",
        "editor_config",
        "git_internals",
    ]


def test_policy_hides_and_protects(home: Path, tmp_path: Path) -> None:
    data = home / "proj" / "data"  # a data dir inside the workspace stays hidden
    data.mkdir()
    p = ProtectedPaths.of(home, home / ".config/agentd", data)
    policy = build_policy([home / "proj"], p, extra_writable=[home / "missing"])
    assert policy.writable == (home / "proj",)
    assert policy.readonly == ()  # filled per launch by agentd.sandbox.guard, from `guarded`
    assert {
        (home / "proj/.git", "dir"),
        (home / "proj/.vscode", "dir"),
        (home / "proj/.exrc", "file"),
    } <= set(policy.guarded)
    assert policy.quarantine == data / "quarantine"
    assert set(policy.hidden) == {
        home / ".config/agentd",
        data,
        home / ".ssh",
        home / ".aws",
        home / ".config/gcloud",
    }
    assert policy.hidden_files == (home / ".netrc",)
    # the workspace is the home folder: start-up files become read-only; nothing that contains it is hidden
    whole = build_policy([home], p)
    assert {(home / ".bashrc", "file"), (home / ".zshrc", "file"), (home / ".config/fish", "dir")} <= set(
        whole.guarded
    )
    assert (home / ".aws", "dir") in whole.guarded and (home / ".npmrc", "file") in whole.guarded
    assert home not in whole.hidden and home / ".ssh" in whole.hidden


def test_bwrap_argv_order() -> None:
    """Read-only root, private /tmp and /run, then the workspace, then the hidden paths, then the
    read-only paths inside the workspace; every namespace new; capabilities dropped."""
    home = Path("/home/u")
    policy = SandboxPolicy(
        writable=(home / "proj",),
        readonly=(home / "proj/.git",),
        hidden=(home / ".ssh", Path("/tmp/data")),
        hidden_files=(home / ".netrc",),
    )
    argv = bwrap_argv("/usr/bin/bwrap", policy, home / "proj", ["/bin/bash", "-c", "ls"])
    assert argv[:6] == [
        "/usr/bin/bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--cap-drop",
        "ALL",
    ]
    assert "--share-net" not in argv
    joined = " ".join(argv)
    order = [
        "--ro-bind / /",
        "--tmpfs /tmp",
        f"--bind {home}/proj {home}/proj",
        f"--tmpfs {home}/.ssh",
        f"--ro-bind /dev/null {home}/.netrc",
        f"--ro-bind {home}/proj/.git {home}/proj/.git",
        f"--chdir {home}/proj -- /bin/bash -c ls",
    ]
    positions = [joined.index(part) for part in order]
    assert positions == sorted(positions)
    assert "/tmp/data" not in joined  # already invisible: /tmp is private
    assert "--share-net" in bwrap_argv("/usr/bin/bwrap", policy.with_network(True), home, ["true"])


def test_seatbelt_profile(home: Path) -> None:
    policy = SandboxPolicy(
        writable=(home / "proj",),
        readonly=(home / "proj/.git",),
        hidden=(home / ".ssh",),
        hidden_files=(home / ".netrc",),
    )
    text = seatbelt_profile(policy)
    assert text.startswith("(version 1)\n(deny default)\n")
    assert f'(allow file-write* (subpath "{home}/proj"))' in text
    assert f'(deny file-write* (subpath "{home}/proj/.git"))' in text
    assert f'(deny file-read* file-write* (subpath "{home}/.ssh"))' in text
    assert f'(deny file-read* file-write* (literal "{home}/.netrc"))' in text
    assert "(allow network*)" not in text and "(allow network*)" in seatbelt_profile(
        policy.with_network(True)
    )
    assert text.index("(allow file-write*") < text.index("(deny file-write*")  # later rules win in SBPL
    argv = seatbelt_argv(policy, Path("/t"), ["/bin/bash", "-c", "ls"])
    assert (argv[0], argv[1], argv[3:]) == (
        "/usr/bin/sandbox-exec",
        "-p",
        ["-D", "TMPDIR=/t", "/bin/bash", "-c", "ls"],
    )
    assert seatbelt_profile(SandboxPolicy(writable=(Path('/a"b'),))).count('"/a\\"b"') == 1


def test_launcher_modes(tmp_path: Path) -> None:
    policy = SandboxPolicy(writable=(tmp_path,))
    cmd = ["/bin/bash", "-c", "ls"]
    boxed = Launcher("auto", BWRAP, policy).launch(cmd, tmp_path)
    assert (boxed.sandboxed, boxed.argv[0], boxed.argv[-3:]) == (True, "/usr/bin/bwrap", cmd)
    out = Launcher("auto", BWRAP, policy).launch(cmd, tmp_path, unsandboxed=True)
    assert (out.sandboxed, out.argv[2:4], out.argv[-3:]) == (False, ["-S", str(REAPER)], cmd)
    off = Launcher("off", BWRAP, policy)
    assert (off.active, off.launch(cmd, tmp_path).sandboxed) == (False, False)
    assert Launcher("auto", NO_BWRAP, policy).launch(cmd, tmp_path).sandboxed is False
    with pytest.raises(SandboxRefused, match='sandbox = "required" but no sandbox works here'):
        Launcher("required", NO_BWRAP, policy).launch(cmd, tmp_path)
    with pytest.raises(SandboxRefused, match="does not allow running outside the sandbox"):
        Launcher("required", BWRAP, policy).launch(cmd, tmp_path, unsandboxed=True)


def test_facts_name_every_missing_protection() -> None:
    on = protections(BWRAP, "auto")
    assert [(f.name, f.ok) for f in on] == [
        ("sandbox", True),
        ("environment", True),
        ("file system", True),
        ("secrets", True),
        ("network", True),
        ("agentd's process", True),
        ("process cleanup", True),
    ]
    off = {f.name for f in missing(protections(NO_BWRAP, "auto"))}
    assert {"sandbox", "file system", "secrets", "network"} <= off
    assert "process cleanup" not in off  # the subreaper helper
    assert [f.name for f in missing(protections(BWRAP, "auto", network=True))] == ["network"]
    mac = SandboxStatus(None, False, problem="no sandbox backend", cleanup="process-group")
    assert "process cleanup" in {f.name for f in missing(protections(mac, "off"))}
