"""Rules by command see what a command line runs (break12): an adversarial review ran `rm` under a deny rule
`run_command(rm)` in the auto mode through wrappers (`sudo`, `timeout`, `env`, `xargs`...), `sh -c` and
`eval` strings, expansions (`$R f`), absolute paths, `find -delete`, a pipe into `sh` and `python -c`.
Every form is now a part the rules see, or a command that cannot be known, which asks when a deny or ask
rule exists and which no allow pattern covers (agentd.permissions.wrappers, shellwords, rules)."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.clock import ManualClock
from agentd.permissions.gate import Decision, Gate
from agentd.permissions.prefix import command_prefix
from agentd.permissions.rules import Rule, subject_of, verdicts
from agentd.permissions.shellwords import MAX_DEPTH, split_command
from agentd.tools.base import Preview

ROOT = Path("/work/ws")
DENY_RM = Rule(tool="run_command(rm)", action="deny")
ASK_RM = Rule(tool="run_command(rm)", action="ask")

# the review's forms: each runs rm
LITERAL = [
    'bash -c "rm f"', "sh -c 'rm f'", 'eval "rm f"', "/bin/rm f", "./rm f", "command rm f", "env rm f",
    "env -i X=1 rm f", "X=1 rm f", "ls | xargs rm", "find . -exec rm {} ;", "find . -execdir rm -f {} +",
    "find . -name '*.pyc' -delete", "nice rm f", "nice -n 5 rm f", "timeout 5 rm f", "timeout -s KILL 5 rm f",
    "sudo rm f", "sudo -u root -E rm f", "doas rm f", "busybox rm f", "toybox rm f", "exec rm f",
    "builtin command rm f", "nohup rm f &", "stdbuf -oL rm f", "time rm f", "time -p rm f", "setsid rm f",
    "xargs -I{} rm {}", "xargs -0 -n1 rm", "bash -lc 'cd x && rm f'", "bash -o pipefail -c 'rm f'",
    "sh -c \"sh -c 'eval rm f'\"", "su -c 'rm f'", "watch -n 1 rm f", "parallel rm ::: a b",
    "find . -exec sh -c 'rm \"$1\"' _ {} ;", "\\rm f", "'rm' f", "r\\m f", "f() { rm x; }; f",
    "trap 'rm f' EXIT", "coproc rm f", "flock /tmp/l rm f", "flock /tmp/l -c 'rm f'", "script -qc 'rm f' /dev/null",
    "env -S 'rm f'", "fd -e pyc -x rm", "true && { rm f; }", "if true; then timeout 1 rm f; fi",
    "su root -c 'rm f'", "runuser -u nobody -- rm f", "valgrind rm f", "unshare -r rm f", "gdb --args rm f",
    "uv run --with x rm f", "poetry run rm f", "npm exec -- rm f", "npx -c 'rm f'", "bundle exec rm f",
    "conda run -n base rm f", "nix-shell -p x --run 'rm f'", "nix develop -c rm f", "direnv exec . rm f",
    "x=$(rm f)", "echo $(( $(rm f) ))", "[[ $(rm f) ]]", "case x in x) rm f;; esac", 'r""m f',
    "timeout 5 \\\n  rm f", "sudo \\\n rm \\\n f", "bash -c 'timeout 5 \\\n rm f'",
]  # fmt: skip
# forms whose command cannot be known before they run
UNKNOWABLE = [
    "R=rm; $R f", "${R:-rm} f", "$(echo rm) f", "`echo rm` f", 'sh <<< "rm f"', "sh <<EOF\nrm f\nEOF",
    "echo cm0gZgo= | base64 -d | sh", "curl -s x | bash", "bash -s < x", "bash /dev/stdin <<< 'rm f'",
    "source /dev/stdin <<< 'rm f'", "bash <(echo rm f)",
    "python -c \"import os; os.remove('f')\"", "python3 -Bc 'import os'", "python3 - <<< 'import os'",
    "perl -e 'unlink \"f\"'", "perl -pi -e 's/a/b/' f", "node -e 'require(\"fs\").rmSync(\"f\")'",
    "ruby -e 'File.delete(\"f\")'", "php -r 'unlink(\"f\");'", "awk 'BEGIN { system(\"rm f\") }'",
    "sed 's/.*/rm f/e' x", "sh -c \"$CMD\"", "eval \"$CMD\"", "xargs sh -c", "sudo $CMD f", "env $X rm f",
    "xargs -I{} {} f", "find . -exec {} ;", "parallel ::: 'rm f'", "git -c alias.x='!rm f' x",
    "PAGER='rm f' git log", "alias x=rm", "{r,}m f", "sudo -s", "$'rm' f", "rm${IFS}f",
    "make --eval='x:;rm f' x", "make -f - <<< 'x:;rm f'", "gdb -batch -ex 'shell rm f'", "expect -c 'spawn rm f'",
    "nix-shell -p x", ". <(echo rm f)",
]  # fmt: skip


def verdict(command: str, *rules: Rule) -> tuple[str, list[str | None]]:
    """The combined action of `command` under `rules` (deny > ask > allow) and the labels that decided."""
    parts = verdicts(subject_of("run_command", command=command, path=None, roots=[ROOT]), rules)
    acts = {v.action for v in parts}
    action = "deny" if "deny" in acts else "ask" if "ask" in acts else "allow"
    return action, [v.label for v in parts if v.action == action]


def auto(command: str, *rules: Rule) -> Decision:
    """The gate's decision in the auto mode for a sandboxed command, with nobody to answer a question
    (an ask ends as `timeout`; `mode` means the command would have run without asking)."""
    gate = Gate(
        rules, None, "auto", None, None, 120, ManualClock(), line_writer=lambda _l: None, roots=[ROOT]
    )
    preview = Preview(summary=f"Run `{command}`", command=command, cwd=str(ROOT), sandboxed=True)
    return asyncio.run(gate.decide("run_command", {"command": command}, preview, "t1"))


@pytest.mark.parametrize("command", LITERAL)
def test_break12_a_deny_on_rm_sees_every_form(command: str) -> None:
    """break12: each form runs rm; the deny rule denies it, in the auto mode too, and an ask rule asks."""
    assert verdict(command, DENY_RM) == ("deny", ["run_command(rm)=deny"]), command
    d = auto(command, DENY_RM)
    assert (d.decision, d.decided_by, d.rule) == ("deny", "rule", "run_command(rm)=deny"), command
    assert verdict(command, ASK_RM)[0] == "ask", command
    assert auto(command, ASK_RM).decided_by == "timeout", command  # asked, not run by the mode


@pytest.mark.parametrize("command", UNKNOWABLE)
def test_break12_what_cannot_be_known_asks_under_a_deny_or_ask_rule(command: str) -> None:
    """break12: a command that only a run reveals asks when a deny or ask rule on run_command exists (it
    might be rm), also in the auto mode; without such rules the auto mode still runs it in the sandbox."""
    action, labels = verdict(command, DENY_RM)
    assert action in ("ask", "deny"), command
    assert action == "deny" or "unknowable:run_command(rm)=deny" in labels, (command, labels)
    assert auto(command, DENY_RM).decided_by in ("rule", "timeout"), command
    assert auto(command, ASK_RM).decided_by == "timeout", command
    assert auto(command).decided_by == "mode", command  # no rule: the sandbox is the guard


@pytest.mark.parametrize("command", UNKNOWABLE)
def test_break12_no_allow_pattern_covers_what_cannot_be_known(command: str) -> None:
    """break12: allow patterns for every word of the line still ask; only the exact tool name allows."""
    names = ("sh", "bash", "python", "python3", "perl", "node", "ruby", "php", "awk", "sed", "git", "xargs",
             "find", "parallel", "sudo", "env", "echo", "base64", "curl", "source", "alias", "eval", "rm", "true")  # fmt: skip
    patterns = [Rule(tool=f"run_command({name} *)", action="allow") for name in names]
    assert verdict(command, *patterns)[0] == "ask", command
    assert verdict(command, Rule(tool="run_command", action="allow"))[0] == "allow", command
    both = (Rule(tool="run_command", action="allow"), DENY_RM)
    assert verdict(command, *both)[0] in ("ask", "deny"), command  # a deny rule still makes it ask


def test_break12_deny_matches_the_program_name_and_unknown_words() -> None:
    """A deny names a program wherever it lives; a word known only at run time may be the denied one."""
    assert verdict("/usr/bin/rm -rf x", DENY_RM)[0] == "deny"
    assert verdict("rm -rf $DIR", Rule(tool="run_command(rm -rf *)", action="deny"))[0] == "deny"
    assert verdict("rm $FLAGS /", Rule(tool="run_command(rm -rf *)", action="deny")) == (
        "ask", ["unknowable:run_command(rm -rf *)=deny"],
    )  # fmt: skip
    assert verdict("git $SUB origin", Rule(tool="run_command(git push)", action="deny"))[0] == "ask"
    assert verdict("git status", Rule(tool="run_command(git push)", action="deny"))[0] == "ask"  # the default
    assert verdict("echo $HOME", DENY_RM, Rule(tool="run_command(echo *)", action="allow"))[0] == "allow"
    allow_rm = Rule(tool="run_command(rm *)", action="allow")
    assert [verdict(c, allow_rm)[0] for c in ("rm f", "/tmp/evil/rm f", "./rm f")] == ["allow", "ask", "ask"]


def test_break12_allows_see_through_wrappers() -> None:
    """A transparent wrapper needs no rule of its own; one that changes who or where (`sudo`, `env X=1`,
    `find`) does, and a rule naming the wrapped command covers it; `run_command(sudo *)` is not a blank
    cheque for what sudo runs."""
    npm = Rule(tool="run_command(npm test)", action="allow")
    for command in ("timeout 600 npm test", "nice -n 5 npm test", "env npm test", "command npm test",
                    "bash -c 'npm test'", "sh -c \"timeout 5 npm test\"", "eval npm test", "nohup npm test"):  # fmt: skip
        assert verdict(command, npm)[0] == "allow", command
    for command in ("bash -c 'npm test; rm f'", "sudo npm test", "env PATH=/tmp npm test", "X=1 npm test",
                    "find . -exec npm test ;", "timeout 5 npm publish", "/tmp/npm test"):  # fmt: skip
        assert verdict(command, npm)[0] == "ask", command
    apt = Rule(tool="run_command(sudo apt install *)", action="allow")
    assert verdict("sudo apt install jq", apt)[0] == "allow"
    assert (
        verdict(
            "sudo timeout 5 apt install jq", Rule(tool="run_command(sudo timeout 5 apt *)", action="allow")
        )[0]
        == "allow"
    )
    sudo_any = Rule(tool="run_command(sudo *)", action="allow")
    assert verdict("sudo rm -rf /", sudo_any)[0] == "ask"
    assert verdict("sudo apt install jq", apt, DENY_RM)[0] == "allow"
    assert verdict("sudo rm f", sudo_any, Rule(tool="run_command(rm *)", action="allow"))[0] == "allow"
    find = (Rule(tool="run_command(find *)", action="allow"),)
    assert verdict("find . -name '*.pyc'", *find)[0] == "allow"
    assert verdict("find . -name '*.pyc' -delete", *find)[0] == "ask"  # -delete is rm: it needs its own rule
    assert verdict("find . -fprint /etc/x", *find)[0] == "ask"  # a write outside the workspace


def test_break12_always_offers_the_command_inside_wrappers() -> None:
    """The "always" prefix is the command the line runs: not `bash` for `bash -c "npm test"`, not bare
    `git` for `git -C sub status`; none when the wrapper changes who runs it or what is inside is unsure."""
    assert [command_prefix(c) for c in (
        'bash -c "npm test"', "timeout 60 npm test -- --watch", "nice -n 5 make build", "env cargo test",
        "git -C sub status", "git -C sub log --oneline", "git --no-pager diff HEAD", "make -C sub test",
        "sudo apt install jq", "env X=1 npm test", 'bash -c "npm test && rm f"', "sh -c 'rm -rf ~'",
        "python3 -c 'print(1)'", "xargs -I{} {}", "$R f", "/bin/rm f", "uv run pytest -x", "npm exec -- rm f",
    )] == [
        "npm test", "npm test", "make build", "cargo test", "git -C sub status", "git -C sub log",
        "git --no-pager diff", "make -C sub test", None, None, None, None, None, None, None, "/bin/rm f",
        "uv run pytest", None,
    ]  # fmt: skip


def test_break12_a_function_body_is_seen() -> None:
    """A function body's commands are parts (a deny denies), and the definition still keeps allows away."""
    assert verdict("f() { rm x; }; f", DENY_RM)[0] == "deny"
    assert verdict("f() { ls; }; f", Rule(tool="run_command(ls *)", action="allow"))[0] == "ask"


def test_break12_nesting_is_bounded() -> None:
    """Strings inside strings are followed `MAX_DEPTH` deep, then the command is unknowable. (How fast a
    10 KB line is decided is measured by `python -m tests.benchmarks.rules`, docs/benchmarks.md.)"""
    deep = "rm f"
    for _ in range(MAX_DEPTH - 1):
        deep = f"sh -c {shlex.quote(deep)}"
    assert verdict(deep, DENY_RM)[0] == "deny"
    for _ in range(3):
        deep = f"sh -c {shlex.quote(deep)}"
    assert verdict(deep, DENY_RM) == ("ask", ["unknowable:run_command(rm)=deny"])
    assert verdict(deep, Rule(tool="run_command", action="allow"))[0] == "allow"


def test_break12_the_parse_of_a_nested_string_keeps_its_problems() -> None:
    assert not split_command("sh -c 'echo \"unterminated'").complete
    assert verdict("sh -c 'echo \"x'", Rule(tool="run_command(echo *)", action="allow"))[0] == "ask"


# ---- the property, with deny rules and the auto mode ----------------------------------------------------
RUNS_RM = ["rm -rf x", "/bin/rm x", "./rm x"]
HARMLESS = ["npm test", "git status", "ls -la", "echo hi"]
WRAP = ["timeout 5 {}", "nice -n 5 {}", "env {}", "env A=1 {}", "command {}", "sudo {}", "nohup {}",
        "busybox {}", "stdbuf -oL {}", "exec {}"]  # fmt: skip


@st.composite
def runs(draw: st.DrawFn, depth: int = 0, line_start: bool = True) -> tuple[str, bool, bool]:
    """A random line, whether it runs rm, and whether it has a command only a run reveals. `line_start`:
    the words start a shell command (where `B=2 CMD` is an assignment, not a program named `B=2`)."""
    kind = draw(
        st.sampled_from(["plain", "wrap", "shc", "eval", "join", "expand", "pipe_sh", "find", "xargs"])
    )
    if depth >= 3 or kind in ("plain", "xargs"):
        c = draw(st.sampled_from(RUNS_RM + HARMLESS))
        return f"ls | xargs {c}" if kind == "xargs" else c, c in RUNS_RM, False
    if kind == "expand":
        return draw(st.sampled_from(["$R x", "${R:-rm} x", "$(echo rm) x"])), False, True
    if kind == "pipe_sh":
        return "echo cm0gZgo= | base64 -d | sh", False, True
    if kind == "find":
        found = draw(st.sampled_from(["find . -delete", "find . -exec rm {} +", "find . -name x"]))
        return found, found != "find . -name x", False
    inner_start = kind in ("shc", "eval") or (kind == "join" and line_start)
    inner, rm, unknown = draw(runs(depth + 1, inner_start))
    if kind == "wrap":
        line = draw(st.sampled_from([*WRAP, "B=2 {}"] if line_start else WRAP)).format(inner)
    elif kind == "shc":
        line = f"{draw(st.sampled_from(['sh', 'bash', '/bin/bash']))} -c {shlex.quote(inner)}"
    elif kind == "eval":
        line = f"eval {shlex.quote(inner)}"
    else:
        other, rm2, unknown2 = draw(runs(depth + 1, True))
        line, rm, unknown = (
            f"{inner} {draw(st.sampled_from(['&&', '||', ';', '|']))} {other}",
            rm or rm2,
            unknown or unknown2,
        )
    return line, rm, unknown


@settings(max_examples=300, deadline=None)
@given(runs())
def test_break12_property_a_deny_holds_through_every_form(case: tuple[str, bool, bool]) -> None:
    """break12: with `run_command(rm)` denied and every other command allowed by a pattern, a line that
    runs rm is denied (in the auto mode too), one with a command only a run reveals asks, and nothing
    else is held up."""
    line, rm, unknown = case
    allow_all = [Rule(tool=f"run_command({w} *)", action="allow") for w in ("npm", "git", "ls", "echo", "find",
                 "sudo", "timeout", "nice", "env", "command", "xargs", "nohup", "busybox", "base64", "stdbuf", "exec",
                 "sh", "bash", "/bin/bash", "eval", "A=1", "B=2")]  # fmt: skip
    d = auto(line, DENY_RM, *allow_all)
    if rm:
        assert (d.decision, d.decided_by) == ("deny", "rule"), line
    elif unknown:
        assert d.decided_by in ("rule", "timeout") and d.decision == "deny", line
    else:
        assert d.decided_by in ("mode", "rule") and d.decision == "allow", (line, d)


def test_break12_a_hook_matcher_sees_what_a_line_runs() -> None:
    """A `before_tool` hook on `run_command(git push *)` runs for `sudo git push`, `bash -c "git push"` and
    `git $SUB` (it might be a push), not for `git status` (docs/hooks.md)."""
    from agentd.core.user_hooks import HookSpec

    hook = HookSpec("before_tool", "no-push", "true", "run_command(git push *)")
    seen = {c: hook.matches("run_command", Preview(summary="", command=c), [ROOT])
            for c in ("git push", "sudo git push", 'bash -c "git push origin"', "git $SUB", "git status")}  # fmt: skip
    assert seen == {"git push": True, "sudo git push": True, 'bash -c "git push origin"': True, "git $SUB": True,
                    "git status": False}  # fmt: skip


# ---- the second review (break12 R1-R6): bash reads a line differently, builtins that evaluate strings ----
ASK_PUSH = Rule(tool="run_command(git push *)", action="ask")
GIT_PUSH = [
    "git -C . push origin HEAD:main", "git --no-pager push", "git -c push.default=current push", "git -P push",
    "git --git-dir=.git push", "git --work-tree=. push", "git --namespace=x push", "git --namespace x push",
    "git -C . -c a=b --no-pager push", "sudo git -C . push",
]  # fmt: skip
# R1: bash reads these as `rm ...`
READS_AS_RM = [
    "r\\\nm f2", "/bin/r\\\nm f", "time { rm f1; }", "time ! rm f1", "trap -- 'rm f2' EXIT", "env - rm f3",
    "env - X=1 rm f3",
]  # fmt: skip
# R2: builtins and syntax that evaluate a string as code; and R1's brace expansions
EVALUATES = [
    "rm{,} f1", "/bin/rm{,} f", "x='a[$(rm f)]'; echo $((x))", "((x))", "let 'x=a[$(rm f)]'", "let x=1",
    "declare -a 'x=($(rm f))'", "typeset 'x=$(rm f)'", "local 'x=`rm f`'", "export 'x=$(rm f)'",
    "readonly 'a[$(rm f)]=1'", "PS4='$(rm f)'; set -x", "export PS1=x", "PROMPT_COMMAND='rm f'",
    "mapfile -C 'rm f #' -c 1 arr", "readarray -C 'rm f #' arr", "read -a 'a[$(rm f)]'", "read 'a[$i]'",
    "echo ${x@P}", "echo ${!x}", "echo ${a[$i]}", "printf -v 'a[$(rm f)]' x", "printf -v'a[$i]' x",
    "unset 'a[$i]'", "for ((i=0;i<n;i++)); do :; done", "[[ $x -eq 1 ]]", "a[$i]=1", "declare x=$y",
    "echo $(( $(cat f) ))",
]  # fmt: skip


@pytest.mark.parametrize("command", GIT_PUSH)
def test_break12_r3_git_global_options_do_not_hide_the_subcommand(command: str) -> None:
    """break12 R3: an ask rule `run_command(git push *)` asks for `git -C . push` and every other global
    option before the subcommand (argv.GLOBAL_OPTIONS, the table "always" reads too)."""
    action, labels = verdict(command, ASK_PUSH, Rule(tool="run_command(git *)", action="allow"))
    assert (action, labels[-1]) == ("ask", "run_command(git push *)=ask"), (command, labels)


def test_break12_r3_an_unknown_global_option_might_be_push_and_prefixes_keep_them() -> None:
    """break12 R3: `git $X push` might be anything: unknowable; `git -C . status` is not push; the prefix
    "always" offers keeps the global options (one owner of them)."""
    assert set(verdict("git $X push", ASK_PUSH)[1]) == {"unknowable:run_command(git push *)=ask"}
    assert verdict("git -C . status", ASK_PUSH, Rule(tool="run_command(git *)", action="allow"))[0] == "allow"
    assert command_prefix("git -C sub --no-pager status -s") == "git -C sub --no-pager status"
    assert command_prefix("git --version") == "git --version"


@pytest.mark.parametrize("command", READS_AS_RM)
def test_break12_r1_what_bash_reads_as_rm_is_denied(command: str) -> None:
    """break12 R1: a line continuation inside a word, `time { ...; }`, `trap -- STRING`, `env -`."""
    assert verdict(command, DENY_RM) == ("deny", ["run_command(rm)=deny"]), command


@pytest.mark.parametrize("command", EVALUATES)
def test_break12_r2_code_held_in_strings_is_unknowable(command: str) -> None:
    """break12 R2: arithmetic on values, subscripts in names, re-read declarations, prompts, `mapfile -C`,
    `${x@P}`, `${!x}`, brace expansions: they ask under a deny rule, and no allow pattern covers them, not
    even one for the builtin itself (`printf -v 'a[$(rm important)]' x` under allow `printf *`)."""
    action, labels = verdict(command, DENY_RM)
    assert action == "ask" and "unknowable:run_command(rm)=deny" in labels, (command, labels)
    builtin = shlex.split(command.replace("$", "").replace("`", ""))[0].split("=")[0]
    allows = [
        Rule(tool=f"run_command({w} *)", action="allow") for w in (builtin, "echo", "printf", ":", "set")
    ]
    assert verdict(command, *allows)[0] == "ask", command


def test_break12_r2_plain_builtins_are_still_allowed() -> None:
    """break12 R2, the control: literal arithmetic, numeric subscripts, a plain export are not code."""
    for command in ("echo $((1+2))", "echo ${a[1]}", "export FOO=bar", "printf '%s' x", "read -r line",
                    "declare -r X=1", "local y=2"):  # fmt: skip
        name = command.split()[0]
        assert verdict(command, DENY_RM, Rule(tool=f"run_command({name} *)", action="allow"))[0] == "allow", (
            command
        )


# R6: interpreters' bundled options and sed's address flags; R4: more wrappers
INLINE = [
    "perl -le 'system \"rm f\"'", "perl -l -e 'x'", "perl -lane 'x' f", "ruby -le 'x'", "perl -i -e 'x' f",
    "perl -0777 -ne x", "perl -I -e x", "sed -n '/./Ie rm f' x", "sed '/x/M e' f", "sed -e '1e rm f' f",
    "sed -n 'w /tmp/x' f", "sed 's/a/b/w /tmp/o' f", "csh -c 'rm f'", "tcsh -fc 'x'", "fish -c 'rm f'",
]  # fmt: skip
NAMED_FILES = ["perl -I lib script.pl", "perl -Mstrict script.pl", "ruby -W0 x.rb", "sed 's/foo/world/g' x",
               "sed '/www/d' x", "sed -n '/a/,/b/p' f"]  # fmt: skip
WRAPPED_RM = ["chrt 5 rm f", "chrt -f 5 rm f", "fakeroot rm f", "fakeroot -- rm f", "prlimit --nofile=10 rm f",
              "prlimit -n5 rm f", "unshare -r rm f", "nsenter -t 1 rm f", "systemd-run --user rm f",
              "npx -c 'rm f'", "npm exec -- rm f", "uv run rm f", "poetry run rm f", "ksh -c 'rm f'"]  # fmt: skip


@pytest.mark.parametrize("command", INLINE)
def test_break12_r6_bundled_interpreter_options_and_sed_commands_are_unknowable(command: str) -> None:
    """break12 R6: `-l`/`-0` take only an attached number, `-i`/`-M` only an attached value, so the `-e` after
    them is found; sed's address flags before `e`, sed's `w`; csh/fish strings are not bash."""
    action, labels = verdict(command, DENY_RM)
    assert action == "ask" and "unknowable:run_command(rm)=deny" in labels, (command, labels)


@pytest.mark.parametrize("command", NAMED_FILES)
def test_break12_r6_named_programs_and_plain_sed_scripts_are_known(command: str) -> None:
    """break12 R6, the control: a script file, a module, a sed script with only s///, d and p."""
    assert verdict(command, DENY_RM)[1] == ["default:run_command=ask"], command


@pytest.mark.parametrize("command", WRAPPED_RM)
def test_break12_r4_more_wrappers_run_rm(command: str) -> None:
    """break12 R4: chrt (with its priority), fakeroot, prlimit, and the runners the review listed."""
    assert verdict(command, DENY_RM) == ("deny", ["run_command(rm)=deny"]), command


# R5: a command given as an option's value (agentd.permissions.optionruns.COMMAND_OPTIONS)
OPTION_RUNS_RM = [
    "tar --checkpoint=1 --checkpoint-action=exec='rm f' -cf x.tar .", "tar -cf x.tar --to-command='rm f' .",
    "tar -I 'rm f' -xf x", "tar --use-compress-program='rm f' -xf x", "git ls-remote --upload-pack='rm f' .",
    "git fetch --upload-pack 'rm f' .", "git clone -u 'rm f' a b", "git -C . difftool -x 'rm f'",
    "git rebase -x 'rm f' HEAD~1", "git rebase --exec='rm f' HEAD~1", "git push --receive-pack='rm f' o",
    "ssh -o ProxyCommand='rm f' h", "ssh -oLocalCommand='rm f' -oPermitLocalCommand=yes h",
    "ssh -o 'ProxyCommand rm f' h", "rsync -e 'rm f' a b:", "rsync -ave 'rm f' a b:", "zip -TT 'rm f' -T x.zip f",
    "zip --unzip-command='rm f' -T x.zip f", "split --filter='rm f' x", "sort --compress-program=rm f",
]  # fmt: skip
OPTION_UNKNOWABLE = [
    "git bisect run rm f", "git submodule foreach 'rm f'", "git filter-branch --tree-filter 'rm f'",
    "git -c protocol.ext.allow=always clone 'ext::sh -c rm% f' x",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!rm f' git x", "GIT_SSH_COMMAND='rm f' git fetch",
    "export GIT_SSH_COMMAND='rm f'; git fetch", "GIT_EXTERNAL_DIFF='rm f' git diff", "PAGER='rm f' git log",
    "EDITOR='rm f' git commit", "make --eval 'x:;rm f' x", "python -m timeit -s 'import os' 'os.remove(\"f\")'",
    "python -m pdb -c 'import os' x.py", "vim -c '!rm f' x", "nvim +'!rm f' x", "gdb -ex 'shell rm f'",
    "tar -I \"$X\" -xf x",
]  # fmt: skip
OPTION_PLAIN = ["tar -xzf x.tgz", "ssh h ls", "rsync -av a b", "sort -k2 f", "python -m pytest", "vim +42 x",
                "git log", "git fetch origin", "git rebase -i HEAD~2", "zip -r x.zip d"]  # fmt: skip


@pytest.mark.parametrize("command", OPTION_RUNS_RM)
def test_break12_r5_a_command_in_an_option_value_is_a_part(command: str) -> None:
    """break12 R5: tar's --checkpoint-action=exec= / --to-command / -I, git's --upload-pack / --receive-pack
    / difftool -x / rebase --exec, ssh -o ProxyCommand / LocalCommand, rsync -e (bundled too), zip -TT,
    split --filter, sort --compress-program: the value is read as the command line it is."""
    assert verdict(command, DENY_RM) == ("deny", ["run_command(rm)=deny"]), command


@pytest.mark.parametrize("command", OPTION_UNKNOWABLE)
def test_break12_r5_commands_in_forms_agentd_does_not_read_are_unknowable(command: str) -> None:
    """break12 R5: git bisect run, submodule foreach, filter-branch, ext:: URLs, GIT_CONFIG_KEY_n and the
    variables naming a command (also exported), make --eval, python -m timeit / pdb -c, vim -c / +cmd,
    gdb -ex, a value known only at run time."""
    action, labels = verdict(command, DENY_RM)
    assert action == "ask" and "unknowable:run_command(rm)=deny" in labels, (command, labels)


@pytest.mark.parametrize("command", OPTION_PLAIN)
def test_break12_r5_plain_uses_stay_known(command: str) -> None:
    """break12 R5, the control: the same programs without such an option start nothing."""
    assert verdict(command, DENY_RM)[1] == ["default:run_command=ask"], command


# P1: with the sandbox off, a program's own writes (its options) to a protected path ask
def gate_decision(command: str, tmp: Path, *rules: Rule, sandboxed: bool = False) -> Decision:
    from agentd.permissions.protected import ProtectedPaths

    home, ws = tmp / "home", tmp / "home" / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    protected = ProtectedPaths.of(home, home / ".config" / "agentd", tmp / "data")
    gate = Gate(rules, None, "auto", None, None, 120, ManualClock(), line_writer=lambda _l: None, roots=[ws],
                protected=protected)  # fmt: skip
    command = command.replace("HOMEDIR", str(home))
    preview = Preview(summary=f"Run `{command}`", command=command, cwd=str(ws), sandboxed=sandboxed)
    return asyncio.run(gate.decide("run_command", {"command": command}, preview, "t1"))


@pytest.mark.parametrize(
    "command",
    ["git diff --output=$HOME/.bashrc", "git log -p --output=.git/hooks/pre-commit", "git diff --output ~/.profile",
     "git diff -o.vscode/tasks.json", "git diff --output=HOMEDIR/.ssh/config", "git diff --output=${HOME}/.zshrc",
     "git diff --output=../ws/.agentd/x"],
)  # fmt: skip
def test_break12_p1_a_protected_path_in_any_word_asks_without_the_sandbox(
    command: str, tmp_path: Path
) -> None:
    """break12 P1: allowed by `run_command(git diff *)` / `git log *`, with the sandbox off these wrote
    ~/.bashrc and a git hook; now any word naming a protected path asks (a person decides: here nobody
    answers), whatever rules or mode say."""
    allow = [
        Rule(tool="run_command(git diff *)", action="allow"),
        Rule(tool="run_command(git log *)", action="allow"),
    ]
    d = gate_decision(command, tmp_path, *allow)
    assert not d.allowed and (d.rule or "").startswith("protected:"), (command, d)


def test_break12_p1_ordinary_commands_and_the_sandbox(tmp_path: Path) -> None:
    """break12 P1, the control: a command naming no protected path is allowed by its rule; with the sandbox
    active the sandbox protects those paths, so the rule decides."""
    allow = Rule(tool="run_command(git diff *)", action="allow")
    assert gate_decision("git diff --output=out.patch src/a.py", tmp_path, allow).allowed
    assert gate_decision("git diff --stat ./src", tmp_path, allow).allowed
    assert gate_decision("git diff --output=.git/hooks/x", tmp_path, allow, sandboxed=True).allowed
