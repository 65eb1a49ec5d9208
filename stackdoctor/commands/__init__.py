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
    from stackdoctor.errors import UsageError
    from stackdoctor.texts import LANGS, choose_lang

    if lang not in LANGS:
        raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
    choose_lang(lang)


def _what_if_device(kind: str) -> object:
    """The callback of a kind's what-if flag (``--npu 910B``): its devices, kept in the context for the command."""

    def keep(ctx: typer.Context, param: object, value: object) -> object:
        names = [str(v) for v in (value or ())]  # type: ignore[attr-defined]
        if any(not n.strip() for n in names):
            raise typer.BadParameter("the value is empty", ctx=ctx, param=param)  # type: ignore[arg-type]
        if names:
            ctx.meta.setdefault(WHAT_IF_DEVICES, {})[kind] = names
        return value

    return keep


WHAT_IF_DEVICES = "stackdoctor.what_if_devices"


class InstallCommand(typer.core.TyperCommand):
    """install, with each accelerator kind's what-if flag (:attr:`Accelerator.what_if_option`, ``--npu``) beside
    ``--gpu``: declared by the kinds, so a plug-in kind's flag appears without an edit here."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        from stackdoctor import accelerators

        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        like = next((p for p in self.params if "--gfx" in getattr(p, "opts", ())), None)  # a repeatable text option, as typer builds one
        if like is None:
            return
        for flag, acc in accelerators.what_if_options().items():
            opt: Any = copy.copy(like)
            opt.name, opt.opts, opt.secondary_opts = f"what_if_{acc.name}", [flag], []
            opt.callback, opt.expose_value, opt.metavar = _what_if_device(acc.name), False, "CHIP"
            opt.help = f"What-if {acc.label}: a chip name as {', '.join(acc.tool_witnesses) or 'its tool'} shows it (repeatable). Implies --dry-run."
            self.params.append(opt)
