"""Programs that run a command given as an option's value (issue 12 §2, break12 R5; CONTRACTS.md §5;
docs/security.md §3).

Owns: `COMMAND_OPTIONS` (the one table: program -> subcommand -> option -> how its value runs) and
`option_runs()` (one simple command's words -> what those options start). A value whose form is known is
read as what it is (`sh`: a shell command line, parsed; `argv`: a program name; `exec=`: tar's
`exec=COMMAND` action); any other (`?`) is unknowable. `--opt VALUE`, `--opt=VALUE` and an attached
`-oVALUE` are all read. git's subcommand is found after its global options (agentd.permissions.argv).
Pure; imports the standard library and agentd.permissions.argv.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentd.permissions.argv import Run, Words, command_name, without_global_options

Form = str  # "sh" | "argv" | "exec=" | "ssh-o" | "?"
_UPLOAD = {"--upload-pack": "sh", "--exec": "sh"}
_SSH = {"-o": "ssh-o", "-F": "?", "-S": "argv"}
_VIM = {"-c": "?", "--cmd": "?", "-S": "?", "-u": "?", "+": "?"}
COMMAND_OPTIONS: Mapping[str, Mapping[str, Mapping[str, Form]]] = {
    "tar": {"": {"--checkpoint-action": "exec=", "--to-command": "sh", "-I": "sh", "--use-compress-program": "sh",
                 "--info-script": "sh", "--new-volume-script": "sh", "-F": "sh", "--rsh-command": "sh",
                 "--rmt-command": "sh"}},
    "git": {
        "ls-remote": {**_UPLOAD, "-u": "sh"}, "fetch": _UPLOAD, "pull": _UPLOAD, "clone": {**_UPLOAD, "-u": "sh"},
        "fetch-pack": _UPLOAD, "archive": {"--exec": "sh", "--remote": "?"},
        "push": {"--receive-pack": "sh", "--exec": "sh"}, "send-pack": {"--receive-pack": "sh", "--exec": "sh"},
        "difftool": {"-x": "sh", "--extcmd": "sh", "-t": "?", "--tool": "?"}, "mergetool": {"-t": "?", "--tool": "?"},
        "rebase": {"-x": "sh", "--exec": "sh"}, "filter-branch": {"": "?"}, "filter-repo": {"": "?"},
        "bisect": {"run": "?"}, "submodule": {"foreach": "?"}, "daemon": {"": "?"}, "instaweb": {"": "?"},
    },
    "ssh": {"": _SSH}, "scp": {"": _SSH}, "sftp": {"": _SSH}, "autossh": {"": _SSH},
    "rsync": {"": {"-e": "sh", "--rsh": "sh", "--rsync-path": "sh"}},
    "zip": {"": {"-TT": "sh", "--unzip-command": "sh"}},
    "split": {"": {"--filter": "sh"}},
    "sort": {"": {"--compress-program": "argv"}},
    "vim": {"": _VIM}, "nvim": {"": _VIM}, "vi": {"": _VIM}, "view": {"": _VIM}, "ex": {"": _VIM},
    "gvim": {"": _VIM}, "vimdiff": {"": _VIM},
    "emacs": {"": {"--eval": "?", "-l": "?", "--load": "?", "-f": "?", "--funcall": "?", "--batch": "?"}},
    "less": {"": {"+": "?"}},
    "dpkg-source": {"": {"--before-build": "?"}},
    "rpmbuild": {"": {"--eval": "?", "-E": "?"}},
    "ffmpeg": {"": {"-filter_script": "?"}},
    "curl": {"": {"-K": "?", "--config": "?"}},
    "wget": {"": {"-e": "?", "--execute": "?"}},
    "openssl": {"": {"-engine": "?"}},
    "man": {"": {"-P": "sh", "--pager": "sh", "-H": "sh", "--html": "sh"}},
}  # fmt: skip
_SSH_KEYS = re.compile(r"^\s*(proxycommand|localcommand|knownhostscommand|remotecommand|match)\b\s*=?\s*(.*)$",
                       re.I | re.S)  # fmt: skip
_VIM_PLUS = re.compile(r"^\+(?!\d*$)")  # `+cmd` (not `+42`, a line number)


def option_runs(words: Words) -> tuple[Run, ...]:
    """What `words` starts through options whose value is a command (COMMAND_OPTIONS). Never raises."""
    if not words or words[0] is None:
        return ()
    table = COMMAND_OPTIONS.get(command_name(words[0]))
    if table is None:
        return ()
    bare = without_global_options(words)[0]
    if len(bare) > 1 and "" not in table:
        sub, opts = bare[1], table.get(bare[1] or "")
        if sub is None:
            return (Run(why=f"`{words[0]}` runs a subcommand agentd cannot know before it runs"),)
        if opts is None:
            return ()
        return _scan(words, bare[2:], opts, f"{words[0]} {sub}")
    return _scan(words, bare[1:], table.get("", {}), str(words[0]))


def _scan(words: Words, rest: Words, opts: Mapping[str, Form], what: str) -> tuple[Run, ...]:
    if "" in opts:  # every use of it runs what its words or configuration say
        return (Run(why=f"`{what}` runs commands its arguments or configuration name"),)
    runs: list[Run] = []
    for i, w in enumerate(rest):
        if w is None:
            continue
        if w in opts and opts[w] == "?" and not w.startswith("-"):  # a positional keyword: `bisect run`
            runs.append(Run(why=f"`{what} {w}` runs a command agentd does not read"))
            continue
        if "+" in opts and _VIM_PLUS.match(w):
            runs.append(Run(why=f"`{what} {w[:40]}` runs an editor command"))
            continue
        found = _option(w, rest[i + 1] if i + 1 < len(rest) else None, opts)
        run = _read(what, *found) if found is not None else None
        if run is not None:
            runs.append(run)
    return tuple(runs)


def _option(
    word: str, following: str | None, opts: Mapping[str, Form]
) -> tuple[str, Form, str | None] | None:
    """(option, form, value) when `word` is one of `opts`: `--o V`, `--o=V`, `-o V`, `-oV`."""
    if not word.startswith("-"):
        return None
    name, eq, value = word.partition("=")
    if (name in opts and word.startswith("--")) or (eq and name in opts):
        return name, opts[name], value if eq else following
    if word in opts:
        return word, opts[word], following
    for opt, form in opts.items():
        if not opt.startswith("--") and len(opt) > 2 and word.startswith(opt):  # `-TTcmd`, `-filter_script`
            return opt, form, word[len(opt) :]
    if word.startswith("--"):
        return None
    for j, ch in enumerate(word[1:], start=1):  # a bundle: `rsync -ave CMD`, `ssh -oProxyCommand=...`
        if f"-{ch}" in opts:
            return f"-{ch}", opts[f"-{ch}"], word[j + 1 :] or following
    return None


def _read(what: str, option: str, form: Form, value: str | None) -> Run | None:
    if value is None:
        return Run(why=f"`{what} {option}` runs a command agentd cannot know before it runs")
    if form == "sh":
        return Run(script=value)
    if form == "argv" and value.split():
        return Run(words=tuple(value.split()))
    if form == "exec=":
        return Run(script=value[5:]) if value.startswith("exec=") else None
    if form == "ssh-o":
        m = _SSH_KEYS.match(value)
        if m is None:
            return None
        return (
            Run(script=m.group(2))
            if m.group(1).lower() != "match"
            else Run(why=f"`{what} -o Match` runs a command")
        )
    return Run(why=f"`{what} {option}` runs a command agentd does not read")
