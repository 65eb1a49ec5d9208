"""The commands (each module's ``register(app)``), and what they share: the ``--lang`` option, the accelerator kinds'
what-if flags on ``install`` (``--npu``)."""

from __future__ import annotations

import copy
from typing import Any

import typer
import typer.core

LANG_HELP = "en | zh (default from LC_ALL / LC_MESSAGES / LANG)."


def use_lang(lang: str | None) -> None:
    """A command's ``--lang``: checked (one sentence, exit 2), then every sentence of this run is in it."""
    if lang is None:
        return
    from stackdoctor.core.errors import UsageError
    from stackdoctor.core.texts import LANGS, choose_lang

    if lang not in LANGS:
        raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
    choose_lang(lang)


def _what_if_device(kind: str) -> object:
    """The callback of a kind's what-if flag (``--npu 910B``): its devices, kept in the context for the command."""

    def keep(ctx: typer.Context, param: object, value: object) -> object:
        names = [str(v) for v in (value or ())]  # type: ignore[attr-defined]
        if names:  # an empty one was refused before (cli._not_empty runs ahead of every option's callback)
            ctx.meta.setdefault(WHAT_IF_DEVICES, {})[kind] = names
        return value

    return keep


def _what_if_value(kind: str, key: str) -> object:
    """The callback of a kind's what-if value of its host (``--rocm-userspace 6.3.1``): kept in the context for the command."""

    def keep(ctx: typer.Context, param: object, value: object) -> object:
        if value is not None:  # an empty one was refused before (cli._not_empty runs ahead of every option's callback)
            ctx.meta.setdefault(WHAT_IF_VALUES, {}).setdefault(kind, {})[key] = str(value)
        return value

    return keep


WHAT_IF_DEVICES = "stackdoctor.what_if_devices"
WHAT_IF_VALUES = "stackdoctor.what_if_values"


def _option(params: list[Any], flag: str) -> Any:
    return next((p for p in params if flag in getattr(p, "opts", ())), None)


class InstallCommand(typer.core.TyperCommand):
    """install, with each accelerator kind's what-if flags: its devices' (:attr:`Accelerator.what_if_option`, ``--npu``)
    beside ``--gpu``, its host's values (:attr:`Accelerator.what_if_values`, ``--rocm-userspace``) after ``--gfx``; and
    the help of the built-in options that are a kind's (:attr:`Accelerator.option_help`). Declared by the kinds, so a
    plug-in kind's flags appear without an edit here."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        from stackdoctor import kinds

        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._kinds_help(kinds.ALL)
        like = _option(self.params, "--gfx")  # a repeatable text option, as typer builds one
        if like is None:
            return
        self._add_values(kinds.ALL, _option(self.params, "--python-version"), like)
        for flag, acc in kinds.what_if_options().items():
            opt: Any = copy.copy(like)
            opt.name, opt.opts, opt.secondary_opts = f"what_if_{acc.name}", [flag], []
            opt.callback, opt.expose_value, opt.metavar = _what_if_device(acc.name), False, "CHIP"
            opt.help = f"What-if {acc.label}: a chip name as {', '.join(acc.tool_witnesses) or 'its tool'} shows it (repeatable). Implies --dry-run."
            self.params.append(opt)

    def _kinds_help(self, accs: Any) -> None:
        """The help of the built-in options a kind declares its own (AMD's ``--gfx``); the first kind's, in priority order."""
        helps: dict[str, str] = {}
        for acc in accs:
            for flag, text in acc.option_help:
                helps.setdefault(flag, text)
        for flag, text in helps.items():
            opt = _option(self.params, flag)
            if opt is not None:
                opt.help = text

    def _add_values(self, accs: Any, like: Any, after: Any) -> None:
        """Each kind's what-if values of its host (a single text option, as ``--python-version``), right after ``after``."""
        if like is None:
            return
        at = self.params.index(after) + 1
        for acc in accs:
            for v in acc.what_if_values:
                value: Any = copy.copy(like)
                value.name, value.opts, value.secondary_opts = f"what_if_{acc.name}_{v.key}", [v.flag], []
                value.callback, value.expose_value, value.metavar, value.help = _what_if_value(acc.name, v.key), False, v.metavar, v.help
                self.params.insert(at, value)
                at += 1


# --- the JSON answer when a --json command could not run (issue 35) -------------------------------------------------
ERROR_SCHEMA = "stackdoctor.error/1"
_JSON_COMMANDS = ("check", "diff", "kernels", "matrix", "install")


def json_asked(args: list[str]) -> str | None:
    """The command ``args`` run when they ask it for JSON on stdout (``--json``, ``--format json``); else None."""
    words: list[str] = []
    for a in args:
        if a == "--":
            break
        words.append(a)
    command = next((w for w in words if not w.startswith("-")), None)
    if command not in _JSON_COMMANDS:
        return None
    formats = [a.split("=", 1)[1] for a in words if a.startswith("--format=")]
    formats += [words[i + 1] for i, a in enumerate(words[:-1]) if a == "--format"]
    if formats and any(f != "json" for f in formats):
        return None  # another format asked for too (a conflict, or markdown): stdout is not promised to be JSON
    return command if "--json" in words or formats else None


def error_kind(exc: BaseException | None, exit_code: int) -> str:
    """What stopped the command, in one word: usage, matrix, index, interrupted, terminated or internal."""
    from stackdoctor.core.errors import IndexError_, MatrixError, StackdoctorError

    if isinstance(exc, MatrixError):
        return "matrix"
    if isinstance(exc, IndexError_):
        return "index"
    if isinstance(exc, StackdoctorError) or exit_code == 2:
        return "usage"
    if exit_code == 130:
        return "interrupted"
    if exit_code in (129, 143) or exit_code > 128:
        return "terminated"
    return "internal"


def error_document(command: str, kind: str, message: str, exit_code: int) -> dict[str, Any]:
    """One ``stackdoctor.error/1`` document (``schemas/error.schema.json``)."""
    from stackdoctor import __version__

    return {"schema": ERROR_SCHEMA, "stackdoctor_version": __version__, "command": command,
            "error": {"kind": kind, "message": message, "exit_code": int(exit_code)}}


def answer_in_json(args: list[str], exc: BaseException | None, message: str, exit_code: int) -> None:
    """When ``args`` asked for JSON and the command stopped before writing anything to stdout: one JSON document
    there saying why (the sentence on stderr stays), so a script that parses stdout never gets an empty or
    non-JSON one. ``install`` answers with its own ``stackdoctor.plan/1`` (``build-plan/1`` with ``--from-source``),
    ``error`` set; every other command with ``stackdoctor.error/1``."""
    import json
    import sys

    command = json_asked(args)
    if command is None or exit_code == 0 or getattr(sys.stdout, "written", True):
        return
    from stackdoctor.core.errors import StackdoctorError, UsageError

    try:
        if command == "install":
            stop = exc if isinstance(exc, StackdoctorError) else UsageError(message, exit_code=exit_code)  # type: ignore[arg-type]
            if "--from-source" in args:
                from stackdoctor.render.build import build_json

                text = build_json(None, stop)
            else:
                from stackdoctor.render.plans import plan_json

                text = plan_json(None, stop)
        else:
            from stackdoctor.core.redact import safe_data

            doc = error_document(command, error_kind(exc, exit_code), message, exit_code)
            text = json.dumps(safe_data(doc), indent=2, ensure_ascii=False) + "\n"
        sys.stdout.write(text)
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - stdout closed or full: the sentence on stderr is all that can be said
        pass
