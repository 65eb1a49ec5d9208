"""The command-line shell: options -> layers -> renderer -> exit code.

Every command lives in ``stackdoctor/commands/<name>.py`` and adds itself with
``register(app)``. Commands *return* an :class:`~stackdoctor.core.errors.ExitCode`;
only :func:`main` exits. One policy for errors: a :class:`StackdoctorError` is one
line on stderr and its exit code (a closed or full stdout is one: exit 2); click usage errors are exit 2; anything else is
"internal error" and exit 3 (traceback only with ``--debug`` / ``STACKDOCTOR_DEBUG``).
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import re
import signal
import sys
import threading
import time
import traceback
from typing import Annotated, Any, Optional

import typer

from stackdoctor import __version__
from stackdoctor.core import classcode

# The command's own process keeps the dataclasses' compiled methods (issue 33): installed before the package's modules
# make their classes, and here rather than in stackdoctor/__init__ so that a program importing stackdoctor as a library
# keeps its own dataclasses module untouched.
classcode.install()

from stackdoctor.core.console import install_boundary, protect_std_streams  # noqa: E402
from stackdoctor.core.errors import ExitCode, StackdoctorError  # noqa: E402
from stackdoctor.core.redact import escape_controls  # noqa: E402
from stackdoctor.system import stop_children  # noqa: E402

COMMAND_MODULES = (
    "stackdoctor.commands.check",
    "stackdoctor.commands.install",
    "stackdoctor.commands.kernels",
    "stackdoctor.commands.matrix",
    "stackdoctor.commands.explain",
    "stackdoctor.commands.report",
    "stackdoctor.commands.diff",
    "stackdoctor.commands.bundle",
)

app = typer.Typer(
    name="stackdoctor",
    help="Diagnose, install and prove a machine's PyTorch stack.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_DEBUG = {"on": False}


def _version(value: bool) -> None:
    if value:
        print(f"stackdoctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")] = False,
) -> None:
    """Diagnose, install and prove a machine's PyTorch stack."""
    if debug:
        _DEBUG["on"] = True


for _mod in COMMAND_MODULES:
    importlib.import_module(_mod).register(app)


# What each option's value is, in words, for --help (typer would show a Python type: <str>, <float range>,
# <list[str]>). Keyed by option name, or by (command, option) where one name means different things.
METAVARS: dict[str, str] = {
    "--python": "PATH", "--format": "FORMAT", "--output": "FILE", "--timeout": "SECONDS", "--torch-timeout": "SECONDS",
    "--index-timeout": "SECONDS", "--replay": "REPORT", "--matrix": "FILE", "--config": "FILE", "--lang": "LANG",
    "--only": "CODE", "--skip": "CODE", "--device": "DEVICE", "--sizes": "N,N,...", "--nproc": "N", "--rank": "N",
    "--world-size": "N", "--master-addr": "ADDRESS", "--master-port": "PORT", "--iface": "INTERFACE", "--backend": "BACKEND",
    "--min-bytes": "BYTES", "--max-bytes": "BYTES", "--iters": "N", "--min-busbw": "GB/s", "--over": "LINK",
    "--torch": "VERSION", "--variant": "VARIANT", "--installer": "NAME", "--index-base": "URL", "--find-links": "URL",
    "--emit": "FORMAT", "--python-version": "VERSION", "--platform": "PLATFORM", "--driver": "VERSION", "--gpu": "ARCH",
    "--gfx": "GFX", "which": "KERNEL", "packages": "PACKAGE", "code": "CODE", "file": "FILE",
}
COMMAND_METAVARS: dict[tuple[str, str], str] = {("report", "--output"): "DIR"}


def _word_for(command: str, param: object) -> str:
    """The metavar of one parameter: from the tables, else a word for its type (never a Python type)."""
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")] or [str(getattr(param, "name", "") or "")]
    for name in opts:
        if (command, name) in COMMAND_METAVARS:
            return COMMAND_METAVARS[(command, name)]
        if name in METAVARS:
            return METAVARS[name]
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    return str(getattr(param, "name", "VALUE") or "VALUE").upper().replace("_", "-")


class _Interrupted(Exception):
    """Ctrl-C inside a command (typer would turn the KeyboardInterrupt into a silent exit 130)."""


def _interruptible(callback: Any) -> Any:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    return run


def _not_empty(ctx: Any, param: Any, value: Any) -> Any:
    """An option given an empty value on the command line (``--python ''``, ``--only ''``) is a usage error:
    one sentence and exit 2, never silently the default."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(v, str) and not v.strip() for v in values):
        try:
            given = ctx.get_parameter_source(param.name).name == "COMMANDLINE"
        except Exception:
            given = True
        if given:
            raise typer.BadParameter("the value is empty", ctx=ctx, param=param)
    return value


def _not_empty_then(callback: Any) -> Any:
    """An option's own callback (a kind's what-if flag keeping its value), with :func:`_not_empty` ahead of it."""
    if getattr(callback, "_after_not_empty", False):
        return callback

    def both(ctx: Any, param: Any, value: Any) -> Any:
        return callback(ctx, param, _not_empty(ctx, param, value))

    both._after_not_empty = True  # type: ignore[attr-defined]
    return both


_DIGITS = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _quick_value(desc: Any, value: Any, multi: bool) -> tuple[bool, Any]:
    """(True, the value) where typer's pydantic coercion of ``value`` is known to give exactly that, for the
    parameter kinds stackdoctor declares: None, a str option, a float or int in its range (as a number, or
    plain digits), a flag's bool, a list of str. (False, None) for anything else: typer's own coercion."""
    info = desc.parameter_info
    if desc.file_annotation is not None or info.parser is not None or desc.choices is not None or desc.is_path:
        return False, None
    ann = desc.annotation
    if value is None:
        return True, (() if multi else None)
    if multi:
        return _quick_list(ann, value)
    if ann is str or ann is bool:
        return (True, value) if type(value) is ann else (False, None)
    if ann in (int, float) and not getattr(info, "clamp", False):
        return _quick_number(ann, info, value)
    return False, None


def _quick_list(ann: Any, value: Any) -> tuple[bool, Any]:
    """A ``list[str]`` option's values, when each is a str."""
    items = value if isinstance(value, (list, tuple)) else None
    if str(ann) == "list[str]" and items is not None and all(type(v) is str for v in items):
        return True, list(items)
    return False, None


def _quick_number(ann: Any, info: Any, value: Any) -> tuple[bool, Any]:
    """An int or float option's value (a number of its type, an int for a float, or plain digits) within its range."""
    number: Any = None
    if type(value) is ann or (ann is float and type(value) is int):
        number = ann(value)
    elif type(value) is str and (_DIGITS if ann is int else _DECIMAL).fullmatch(value):
        number = ann(value)
    if number is not None and (info.min is None or number >= info.min) and (info.max is None or number <= info.max):
        return True, number
    return False, None


class _QuickCoercion:
    """typer >= 0.2x coerces every option through a pydantic ``TypeAdapter`` built on first use, and importing
    pydantic is a tenth of a second of every ``stackdoctor check`` (issue 33). The values stackdoctor's options
    take (strings, numbers in range, flags, lists of strings) are coerced here to what that adapter returns;
    anything else (a bad number, out of range) goes to typer's own coercion, built then, so its errors are typer's."""

    def __init__(self, build: Any) -> None:
        self._build = build

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        done, out = _quick_value(param.type_descriptor, value, bool(param.multiple or param.nargs == -1))
        if done:
            return out
        param._runtime_param = real = self._build(param.type_descriptor)
        return real.coerce(value, param=param, ctx=ctx)


def _quick_coercion(param: object) -> None:
    """Give ``param`` the quick coercion where this typer has the lazy pydantic one (older typers: nothing)."""
    if getattr(param, "_runtime_param", 0) is not None or getattr(param, "type_descriptor", None) is None:
        return
    try:
        from typer._coercion import build_runtime_param  # lazy: typer's private module, absent from older typers
    except ImportError:  # pragma: no cover - a typer without the adapter layer
        return
    param._runtime_param = _QuickCoercion(build_runtime_param)  # type: ignore[attr-defined]


def _quick_help_option(command: object) -> None:
    """The ``--help`` option click makes for each command when it parses: the quick coercion too."""
    original = getattr(command, "get_help_option", None)
    if original is None or getattr(original, "quick", False):
        return

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None:
            _quick_coercion(option)
        return option

    get_help_option.quick = True  # type: ignore[attr-defined]
    command.get_help_option = get_help_option  # type: ignore[attr-defined]


def _word_metavars(command: object, name: str = "") -> None:
    """Give every option and argument of ``command`` (and its subcommands) a metavar in words, and make
    each command's Ctrl-C reach :func:`main` (which stops the children and says "interrupted").
    Each subcommand's whole first paragraph is its line in the parent's ``--help`` (click would cut it at
    45 characters with an ellipsis), and an option given an empty value is refused."""
    for sub_name, sub in (getattr(command, "commands", None) or {}).items():
        _word_metavars(sub, sub_name)
        help_text = str(getattr(sub, "help", None) or "")
        if help_text and not getattr(sub, "short_help", None):
            sub.short_help = " ".join(help_text.strip().split("\n\n")[0].split())
    if getattr(command, "callback", None) is not None and not getattr(command, "commands", None):
        command.callback = _interruptible(command.callback)  # type: ignore[attr-defined]
    _quick_help_option(command)
    for param in getattr(command, "params", []):
        _quick_coercion(param)
        if getattr(param, "is_flag", False):
            continue
        if getattr(param, "metavar", None) is None:
            param.metavar = _word_for(name, param)
        if getattr(param, "param_type_name", "") == "option" and getattr(param, "callback", None) is not _not_empty:
            param.callback = _not_empty if param.callback is None else _not_empty_then(param.callback)
        if getattr(param, "param_type_name", "") == "argument":
            param.display_type_rich = lambda ctx: None  # the metavar says it; no "<str>" after it


# Options every command takes, which a user coming from other CLIs (git -C, pip --python) may put before the
# command: moved after it (after a group's subcommand), so `stackdoctor --lang zh check` is `check --lang zh`.
# The value-taking ones take the next word; `--lang=zh` is one word.
_MOVABLE = {"--lang": True, "--python": True, "--format": True, "--matrix": True, "--timeout": True, "--json": False, "--verbose": False, "-v": False}


def _habits(args: list[str]) -> list[str]:
    """``args`` with the spellings of other CLIs turned into stackdoctor's: ``-h`` is ``--help`` (anywhere before
    ``--``), ``help [COMMAND...]`` is ``[COMMAND...] --help``, ``version`` and ``-V`` (before any command) are
    ``--version``, and the common options put before the command (``--lang zh check``) go after it."""
    head: list[str] = []
    rest = list(args)
    while rest and rest[0] == "--debug":
        head.append(rest.pop(0))
    if rest[:1] == ["help"]:
        return [*head, *rest[1:], "--help"]
    if rest[:1] in (["version"], ["-V"]):
        return [*head, "--version"]
    moved: list[str] = []
    while rest and rest[0].split("=", 1)[0] in _MOVABLE:
        opt = rest.pop(0)
        moved.append(opt)
        if _MOVABLE[opt.split("=", 1)[0]] and "=" not in opt and rest:
            moved.append(rest.pop(0))
    if moved and rest and not rest[0].startswith("-"):
        at = 2 if rest[0] in {g.name for g in app.registered_groups} and len(rest) > 1 and not rest[1].startswith("-") else 1
        rest[at:at] = moved
    else:
        rest[:0] = moved
    end = rest.index("--") if "--" in rest else len(rest)
    return [*head, *["--help" if a == "-h" and i < end else a for i, a in enumerate(rest)]]


def _invoked(args: list[str] | None) -> str | None:
    """The command ``args`` run (``check`` in ``--debug check --json``), when it is a registered one; else None."""
    rest = list(args or [])
    while rest and rest[0] == "--debug":
        rest.pop(0)
    names = {info.name for info in app.registered_commands}
    return rest[0] if rest and rest[0] in names else None


def command(args: list[str] | None = None) -> object:
    """The click command ``main`` runs: the typer app with word metavars and Ctrl-C reported. With ``args`` naming
    one command, only that command is built (typer reads every command's signature to build it: a tenth of a
    second of each run, issue 33); its help, options and errors are the same, since a command's own never name
    the others."""
    target = app
    name = _invoked(args)
    if name is not None:
        target = copy.copy(app)
        target.registered_commands = [info for info in app.registered_commands if info.name == name]
    cmd = typer.main.get_command(target)
    _word_metavars(cmd)
    lang = _lang_of(list(args or []))
    if lang != "en":  # --help in the reader's language (issue 46)
        from stackdoctor.commands import help as helplang

        helplang.localize(cmd, lang)
    return cmd


def debug_enabled(argv: list[str]) -> bool:
    return _DEBUG["on"] or "--debug" in argv or os.environ.get("STACKDOCTOR_DEBUG", "") not in ("", "0")


def _click_base(name: str) -> type[BaseException]:
    """A click exception class as typer uses it (typer >= 0.2x vendors click; older ones depend on it).

    Found through typer's public exceptions, so the vendored and the real click are both covered.
    """
    for cls in typer.BadParameter.__mro__:
        if cls.__name__ == name:
            return cls
    raise LookupError(name)  # pragma: no cover - typer without click's exception tree


def _usage_line(exc: BaseException) -> str:
    """click's usage error as one sentence: ``stackdoctor: No such option: --nope (see 'stackdoctor check --help').``"""
    try:
        message = exc.format_message()  # type: ignore[attr-defined]
    except Exception:
        message = str(exc)
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) or "stackdoctor"
    message = message.rstrip().rstrip(".")
    return f"stackdoctor: {message} (see '{path} --help')."


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, map every outcome to an exit code, never show a traceback unasked."""
    protect_std_streams()  # a cp936/cp1252 console: replace what it cannot encode, never raise
    install_boundary()  # every write scrubbed of credentials; a closed / full stdout is one sentence, exit 2
    click_exception = _click_base("ClickException")
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _habits(args)
    except Exception:  # the words as typed rather than a traceback
        pass
    handle_termination()
    _ARGS[:] = args
    code: int
    stop: tuple[BaseException | None, str] | None = None  # what stopped the command: its JSON answer (--json)
    try:
        rv = command(args).main(args=args, prog_name="stackdoctor", standalone_mode=False)  # type: ignore[attr-defined]
        code = int(rv) if isinstance(rv, int) else 0
        sys.stdout.flush()  # a full stdout shows here (the text was buffered): one sentence, exit 2
    except StackdoctorError as exc:
        _err(f"stackdoctor: {_localized(str(exc), args)}")
        code, stop = int(exc.exit_code), (exc, str(exc))
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort as exc:  # click turns Ctrl-C into Abort
        _stop_children()
        _err("stackdoctor: " + _localized("interrupted." if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt) else "aborted.", args))
        code, stop = 130, (None, "interrupted.")
    except click_exception as exc:  # bad flag, unknown command, unparsable value: usage, exit 2
        if type(exc).__name__ == "NoArgsIsHelpError":  # `stackdoctor`, `stackdoctor matrix` alone: the help, as asked
            print(exc.ctx.get_help())  # type: ignore[attr-defined]
            code = ExitCode.OK
        else:
            _err("stackdoctor: " + _localized(_usage_line(exc).removeprefix("stackdoctor: "), args))
            code, stop = ExitCode.USAGE, (None, _usage_line(exc).removeprefix("stackdoctor: "))
    except (_Interrupted, KeyboardInterrupt):
        _stop_children()
        _err("stackdoctor: " + _localized("interrupted.", args))
        code, stop = 130, (None, "interrupted.")
    except BrokenPipeError:
        code = 0
    except Exception as exc:  # the no-traceback guarantee
        if debug_enabled(args):
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        line = (f"internal error: {type(exc).__name__}{': ' + first if first else ''}; "
                "please attach `stackdoctor report` to a bug report (re-run with --debug for the traceback).")
        _err("stackdoctor: " + _localized(line, args))
        code, stop = ExitCode.INTERNAL, (exc, line)
    if stop is not None:
        _answer_in_json(args, stop[0], stop[1], code)
    _exit(code)


_ARGS: list[str] = []  # the running command line (terminate's JSON answer)


def _answer_in_json(args: list[str], exc: BaseException | None, message: str, code: int) -> None:
    """A --json command that stopped: its JSON answer on stdout (:func:`stackdoctor.commands.answer_in_json`)."""
    try:
        from stackdoctor.commands import answer_in_json

        answer_in_json(args, exc, message, code)
    except Exception:
        pass


def _localized(text: str, args: list[str]) -> str:
    """One of stackdoctor's English sentences in the user's language (``--lang``, else LC_ALL / LC_MESSAGES /
    LANG): the error a user reads is in the language of the screen they asked for."""
    try:
        from stackdoctor.core import texts  # the sentence's template, in the user's language

        return texts.sentence(text, _lang_of(args))
    except Exception:  # the sentence in English rather than none
        return text


def _lang_of(args: list[str]) -> str:
    """The language this command line asks for: its ``--lang`` (after the command), else LC_ALL / LC_MESSAGES / LANG."""
    from stackdoctor.core.texts import detect_lang

    lang = None
    for i, a in enumerate(args):
        if a == "--":
            break
        if a == "--lang" and i + 1 < len(args):
            lang = args[i + 1]
        elif a.startswith("--lang="):
            lang = a.split("=", 1)[1]
    return detect_lang(os.environ, lang)


def _stop_children() -> None:
    """On Ctrl-C: every child still running (a probe, the target's ``import torch``, allreduce ranks)
    stops with us; each lives in a session of its own, so the terminal's SIGINT does not reach it."""
    try:
        stop_children()
        # A probe thread may be between starting its child and recording it: a second pass, once the
        # other threads have had a moment, stops a child that was not yet on the list.
        if threading.active_count() > 1:
            time.sleep(0.2)
            stop_children()
    except Exception:
        pass


# SIGTERM (a CI runner's timeout, `kill`, systemd) and SIGHUP (the terminal closed): exit code and words
_TERMINATING = {"SIGTERM": (143, "terminated (SIGTERM)"), "SIGHUP": (129, "hung up (SIGHUP: the terminal closed)")}


def handle_termination() -> None:
    """Make SIGTERM and SIGHUP stop stackdoctor the way Ctrl-C does: every child stops, the temporary
    folders go, one sentence on stderr, exit 143 (129 for SIGHUP) instead of a silent -15.

    Installed by :func:`main` before any command runs. A command with its own clean-up (``install``'s
    transaction) replaces it with ``signal.signal`` while that work runs and may end through
    :func:`terminate` itself. Only in the main thread (``signal.signal`` is refused elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in _TERMINATING:
        signum = getattr(signal, name, None)
        if signum is not None:
            try:
                signal.signal(signum, _on_terminate)
            except (OSError, ValueError):  # pragma: no cover - a platform that refuses it
                pass


def _on_terminate(signum: int, frame: object) -> None:
    terminate(signum)


def terminate(signum: int) -> None:
    """Stop the children, say why in one sentence, remove the temporary folders and exit (never returns)."""
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    code, words = _TERMINATING.get(name, (128 + signum, f"stopped by {name}"))
    _stop_children()
    _err(f"stackdoctor: {words}; stopped every process it had started.")
    _answer_in_json(_ARGS, None, f"{words}; stopped every process it had started.", code)
    _exit(code)


def _err(line: str) -> None:
    """One error sentence on stderr: one line, control characters from a value in it shown as escapes."""
    try:
        print(escape_controls(line), file=sys.stderr)
    except Exception:
        pass


def _exit(code: int) -> None:
    """Flush and leave; never wait on an abandoned probe thread."""
    classcode.save()  # what this run compiled of its dataclasses' methods, for the next run (os._exit runs no atexit)
    workers = sys.modules.get("stackdoctor._worker")
    if workers is not None:
        workers.remove_copied()  # the worker scripts a run from stackdoctor.pyz copied out of it
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)
