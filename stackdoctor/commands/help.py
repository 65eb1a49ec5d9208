"""``--help`` in the reader's language (issue 46 item 1): the commands' and options' help texts, and click's own
words around them (Usage, Options, [default: ...]).

The help texts stay English in the code, as every sentence of stackdoctor does; each paragraph has a template under
``sentences:`` in the locale files, and :func:`localize` swaps the Chinese in before click formats the help. Click's
own words come from a formatter of its own (:func:`_formatter`), which also folds Chinese by display cells (click
counts characters, and a CJK character is two cells wide). English help is click's, untouched."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["help_paragraphs", "localize"]


def help_paragraphs(text: str) -> list[str]:
    """A help text as click shows it (up to a form feed), one string per paragraph, its hard wraps undone."""
    body = inspect.cleandoc(text).partition("\f")[0]
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]


def _translated(text: str | None, lang: str) -> str | None:
    from stackdoctor.core.texts import sentence

    if not text:
        return text
    return "\n\n".join(sentence(p, lang) for p in help_paragraphs(text))


def localize(command: Any, lang: str) -> None:
    """Give ``command`` (and every subcommand) its help in ``lang``: texts, the help option's, click's words.

    Nothing is translated until a help is drawn (``format_help``): a command that runs pays nothing for it (the
    templates' patterns take a few tenths of a second to build, issue 33)."""
    if lang == "en":
        return
    for sub in (getattr(command, "commands", None) or {}).values():
        localize(sub, lang)
    original = command.format_help

    def format_help(ctx: Any, formatter: Any) -> None:
        _translate(command, ctx, lang)
        mine = _formatter(type(formatter), lang)(width=formatter.width)
        original(ctx, mine)
        formatter.write(mine.getvalue())

    command.format_help = format_help


def _translate(command: Any, ctx: Any, lang: str) -> None:
    """``command``'s texts in ``lang``, once: its help, its subcommands' lines, its options' and the help option's."""
    if getattr(command, "_helplang", None) == lang:
        return
    command._helplang = lang
    targets = [command, *(getattr(command, "commands", None) or {}).values()]
    for cmd in targets:
        for attr in ("help", "short_help"):
            if getattr(cmd, attr, None) and getattr(cmd, "_helplang_" + attr, None) != lang:
                setattr(cmd, attr, _translated(getattr(cmd, attr), lang))
                setattr(cmd, "_helplang_" + attr, lang)
    help_option = command.get_help_option(ctx)
    for param in [*getattr(command, "params", []), *([help_option] if help_option is not None else [])]:
        if getattr(param, "help", None) and getattr(param, "_helplang", None) != lang:
            param.help = _translated(param.help, lang)
            param._helplang = lang
    if getattr(command, "options_metavar", None):
        command.options_metavar = _ui("help_options_metavar", lang)
    if getattr(command, "subcommand_metavar", None):
        command.subcommand_metavar = _ui("help_subcommand_metavar", lang)


def _ui(key: str, lang: str, **values: Any) -> str:
    from stackdoctor.core.texts import ui

    return ui(key, lang, **values)


# click's words after an option's help: [default: auto], [required], [env var: X], a range (x>=0.1) kept as written
_EXTRA = re.compile(r"\s*\[([^\[\]]*)\]$")


def _extra(text: str, lang: str) -> tuple[str, str]:
    """An option's help split into its text and click's bracket after it, that bracket in ``lang`` ("" if none)."""
    m = _EXTRA.search(text)
    if not m:
        return text, ""
    parts = []
    for part in m.group(1).split("; "):
        key, _, value = part.partition(": ")
        if key == "default" and value:
            parts.append(_ui("help_default", lang, value=value))
        elif key == "env var" and value:
            parts.append(_ui("help_env_var", lang, value=value))
        elif part == "required":
            parts.append(_ui("help_required", lang))
        else:
            parts.append(part)
    return text[: m.start()], "[" + _ui("clause_sep", lang).join(parts) + "]"


def _formatter(base: type, lang: str) -> type:
    from rich.cells import cell_len as _cells

    from stackdoctor.render.wrap import wrap

    class Formatter(base):
        def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
            self.write(f"{'':>{self.current_indent}}{_ui('help_usage', lang)}{prog} {args}".rstrip() + "\n")

        def write_heading(self, heading: str) -> None:
            self.write(f"{'':>{self.current_indent}}{heading}{_ui('help_heading_end', lang)}\n")

        @contextmanager
        def section(self, name: str) -> Iterator[None]:
            word = {"Options": "help_section_options", "Arguments": "help_section_arguments", "Commands": "help_section_commands"}.get(name)
            with super().section(_ui(word, lang) if word else name):
                yield

        def write_text(self, text: str) -> None:
            indent = " " * self.current_indent
            for i, para in enumerate(help_paragraphs(text)):
                if i:
                    self.write("\n")
                self.write("\n".join(wrap(para, self.width, indent=indent)) + "\n")

        def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
            rows = [(str(first), *_extra(str(second or ""), lang)) for first, second in rows]
            first_col = min(max((_cells(f) for f, _, _ in rows), default=0), col_max) + col_spacing
            lead = " " * self.current_indent
            for first, second, extra in rows:
                head = f"{lead}{first}"
                if not second and not extra:
                    self.write(head + "\n")
                    continue
                hang = " " * (first_col + self.current_indent)
                if _cells(first) <= first_col - col_spacing:
                    lines = wrap(second, self.width, indent=head + " " * (first_col - _cells(first)), hang=hang)
                else:
                    lines = [head, *wrap(second, self.width, indent=hang)]
                if extra:  # click's bracket stays whole: after the text, or on a line of its own
                    last = lines[-1].rstrip()
                    fits = _cells(last) + 1 + _cells(extra) <= self.width and last.strip()
                    lines[-1:] = [f"{last} {extra}"] if fits else [last, hang + extra]
                self.write("\n".join(line.rstrip() for line in lines if line.strip()) + "\n")

    return Formatter
