"""The commands (each module's ``register(app)``), and what they share: the ``--lang`` option."""

from __future__ import annotations

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
