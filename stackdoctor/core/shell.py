"""Fix lines in the user's shell: POSIX sh where stackdoctor runs on Linux and macOS, PowerShell on Windows.

The locale files and the rules write environment changes the POSIX way (``export NAME=value``,
``unset NAME``). A Windows user pasting that into PowerShell (the default shell of Windows Terminal)
gets an error, so :func:`for_windows` rewrites those two forms, wherever they stand in a fix line
(also inside a trailing comment: "e.g. export CUDA_VISIBLE_DEVICES=0"). Pure; no other text changes.
"""

from __future__ import annotations

import re
import shlex

__all__ = ["export", "for_windows", "format_command", "powershell_set", "powershell_unset", "word"]

# export NAME=value (value: a quoted string or up to the next blank); several assignments after one export too
_EXPORT = re.compile(r"(?<![\w$-])export\s+((?:[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|[^\s\"';]*)\s*)+)")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s\"';]*)")
_UNSET = re.compile(r"(?<![\w$-])unset\s+([A-Za-z_][A-Za-z0-9_]*)")
_POSIX_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


_PS_BARE = re.compile(r"[\w\-.:\\/=+,@%]+")


def word(arg: str, *, windows: bool = False) -> str:
    """One argument as the shell reads it. POSIX: :func:`shlex.quote`. PowerShell: bare when it is plain
    (``C:\\x\\python.exe``, ``torch==2.13.0+cu126``; POSIX quoting would make the path a string PowerShell
    prints instead of running), else a single-quoted literal (a ``'`` inside is doubled). A quoted program
    needs ``&`` before it in PowerShell: :func:`for_windows` and the install command add it."""
    if _CONTROL.search(arg):
        return _c_quoted(arg, windows)
    if not windows:
        return shlex.quote(arg)
    return arg if _PS_BARE.fullmatch(arg) else "'" + arg.replace("'", "''") + "'"


# C0, DEL and C1 controls: inside an ordinary quoted word they would print as themselves (a newline forges a line,
# an ESC drives the terminal), so such a word is written in the quoting that spells them as escapes
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_POSIX_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\'"}
_PS_NAMED = {"\n": "`n", "\r": "`r", "\t": "`t", "\x1b": "`e", "`": "``", "$": "`$", '"': '`"'}


def _c_quoted(arg: str, windows: bool) -> str:
    """``arg`` with control characters as escapes the shell turns back into them: bash/zsh ``$'a\\nb'``,
    PowerShell ``"a`nb"`` (``$([char]0x7)`` for the others)."""
    named = _PS_NAMED if windows else _POSIX_NAMED
    out = []
    for c in arg:
        if c in named:
            out.append(named[c])
        elif _CONTROL.match(c):
            out.append(f"$([char]0x{ord(c):x})" if windows else f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return f'"{"".join(out)}"' if windows else f"$'{''.join(out)}'"


def powershell_set(name: str, value: str) -> str:
    """``$env:NAME = "value"``; a POSIX ``$VAR`` inside the value becomes ``$env:VAR``."""
    value = _POSIX_VAR.sub(lambda m: f"$env:{m.group(1)}", value).replace('"', '`"')
    return f'$env:{name} = "{value}"'


def powershell_unset(name: str) -> str:
    """PowerShell's ``unset``: removing the variable from the process environment."""
    return f"Remove-Item Env:{name}"


def for_windows(fix: str) -> str:
    """``fix`` with its POSIX environment commands written for PowerShell.

    ``export A=1 B=2`` -> ``$env:A = "1"; $env:B = "2"``; ``unset A`` -> ``Remove-Item Env:A``. A search
    PATH keeps its entries: ``PATH=/x/bin:$PATH`` -> ``$env:PATH = "/x/bin;$env:PATH"`` (Windows separates
    with ``;``)."""

    def export(m: re.Match[str]) -> str:
        parts = []
        for name, raw in _ASSIGN.findall(m.group(1)):
            value = raw[1:-1] if raw[:1] in "\"'" and raw[-1:] == raw[:1] and len(raw) >= 2 else raw
            if name.upper() == "PATH" or name.upper().endswith("_PATH"):
                value = value.replace(":$", ";$").replace(":${", ";${")
            parts.append(powershell_set(name, value))
        whole = m.group(0)
        return "; ".join(parts) + whole[len(whole.rstrip()):]  # the spacing before a comment stays

    out = _UNSET.sub(lambda m: powershell_unset(m.group(1)), _EXPORT.sub(export, fix))
    return "& " + out if out.startswith("'") else out  # a quoted program (a Python under C:\Users\First Last)


def format_command(argv: list[str], env: dict[str, str | None] | None = None, *, windows: bool = False) -> str:
    """``VAR=value ... argv`` as a shell would take it (``env -u VAR`` for an unset one).

    ``windows``: as PowerShell takes it: ``$env:VAR = "value"; `` (``Remove-Item Env:VAR; ``) before the
    command, backslashes left bare (POSIX quoting would turn ``C:\\x\\python.exe`` into a string PowerShell
    prints instead of running), and ``&`` before a quoted program."""
    if windows:
        words = [word(a, windows=True) for a in argv]
        cmd = " ".join((["&"] if words and words[0] != argv[0] else []) + words)
        pre_ps = [powershell_unset(k) if v is None else powershell_set(k, v) for k, v in (env or {}).items()]
        return "; ".join([*pre_ps, cmd])
    pre: list[str] = []
    unset = [k for k, v in (env or {}).items() if v is None]
    if unset:
        pre += ["env"] + [x for k in unset for x in ("-u", k)]
    pre += [f"{k}={word(v)}" for k, v in (env or {}).items() if v is not None]
    return " ".join(pre + [word(a) for a in argv])


def export(assignments: dict[str, str], *, windows: bool = False, prepend_to: str | None = None) -> str:
    """Environment variables set to probed values (paths), as one line the user's shell runs as written: every value
    one quoted word (:func:`word`: a space, a quote, ``;``, ``$()``, a newline stay part of the value). POSIX:
    ``export A='/x y' PATH='/x y/bin':"$PATH"``; PowerShell: ``$env:A = '/x y'; $env:PATH = '/x y/bin' + ';' + $env:PATH``.
    ``prepend_to``: the one variable whose value goes before its current one (a search path)."""
    if windows:
        parts = []
        for k, v in assignments.items():
            tail = f" + ';' + $env:{k}" if k == prepend_to else ""
            parts.append(f"$env:{k} = {_c_quoted(v, True) if _CONTROL.search(v) else _ps_literal(v)}{tail}")
        return "; ".join(parts)
    sep = ":"
    return "export " + " ".join(f"{k}={word(v)}" + (f'{sep}"${k}"' if k == prepend_to else "") for k, v in assignments.items())


def _ps_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
