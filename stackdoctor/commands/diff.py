"""``stackdoctor diff A.json B.json``: what differs between two reports ("works on my machine" vs CI).

Exit 0 when nothing differs, 1 when something does, 2 when a report cannot be read.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Optional

import typer

from stackdoctor.commands import LANG_HELP, use_lang
from stackdoctor.core.errors import ExitCode


def _show(v: Any, key: str = "", lang: str = "en") -> str:
    """A value as the screen says it: yes/no (never Python's True/False), a finding's severity in ``lang``, — for absent."""
    from stackdoctor.core.texts import ui

    if v is None:
        return ui("nc_missing_value", lang)
    if isinstance(v, bool):
        return ui("nc_yes" if v else "nc_no", lang)
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) if v else "[]"
    if key.startswith("findings.") and v in ("ok", "warn", "fail", "not-verified"):
        from stackdoctor.model.report import status_key

        return ui(status_key(v), lang)
    return str(v)


def register(app: typer.Typer) -> None:
    @app.command("diff")
    def diff(
        a: Annotated[str, typer.Argument(help="First report.json (e.g. the machine where it works).", metavar="A.json")],
        b: Annotated[str, typer.Argument(help="Second report.json (e.g. the CI runner).", metavar="B.json")],
        json_: Annotated[bool, typer.Option("--json", help='Print {"schema": "stackdoctor.diff/2", ...} instead of a table.')] = False,
        lang: Annotated[Optional[str], typer.Option("--lang", help=LANG_HELP)] = None,
    ) -> int:
        """Show what differs between two reports: driver, torch build, libraries, GPUs, findings."""
        use_lang(lang)
        from stackdoctor.model.diff import DIFF_SCHEMA, diff_reports
        from stackdoctor.model.report import load_report

        for path in (a, b):  # a file that is not there is that, not "cannot replay"
            if not os.path.exists(path):
                from stackdoctor.core.errors import UsageError

                raise UsageError(f"{path}: no such file.")
        ra, rb = load_report(a), load_report(b)
        from stackdoctor import kinds

        diffs = diff_reports(ra, rb, kinds.ALL)
        if json_:
            doc = {
                "schema": DIFF_SCHEMA,
                "a": {"path": a, "created_at": ra.created_at, "stackdoctor_version": ra.stackdoctor_version},
                "b": {"path": b, "created_at": rb.created_at, "stackdoctor_version": rb.stackdoctor_version},
                "count": len(diffs),
                "differences": [d.to_data() for d in diffs],
            }
            from stackdoctor.core.console import write_stdout
            from stackdoctor.core.redact import safe_data

            write_stdout(json.dumps(safe_data(doc), indent=2, ensure_ascii=False) + "\n")
        else:
            from rich.table import Table
            from rich.text import Text

            from stackdoctor.core.console import make_console
            from stackdoctor.core.redact import safe_data
            from stackdoctor.core.texts import detect_lang, sentence

            lang = detect_lang(os.environ)
            console = make_console()
            if not diffs:
                console.print(Text(sentence(f"No differences between {a} and {b}.", lang)))
            else:
                console.print(Text(sentence(f"{len(diffs)} difference(s)", lang)))  # its own line: a table title pads to the width
                for side, path in (("A", a), ("B", b)):  # each file named whole on its line, never folded in a column's header
                    console.print(Text(f"{side}: {safe_data(path, screen=True)}"), soft_wrap=True)
                table = Table()
                table.add_column(sentence("Key", lang), no_wrap=True)
                table.add_column("A", overflow="fold")
                table.add_column("B", overflow="fold")
                section = None
                for d in diffs:
                    if section is not None and d.section != section:
                        table.add_section()
                    section = d.section
                    table.add_row(*(Text(safe_data(v, screen=True)) for v in (d.key, _show(d.a, d.key, lang), _show(d.b, d.key, lang))))
                if console.is_terminal or console.color_system is not None:
                    console.print(table)
                else:  # a pipe, a log: no line ends in spaces
                    with console.capture() as drawn:
                        console.print(table)
                    console.print(Text("\n".join(line.rstrip() for line in drawn.get().splitlines())), soft_wrap=True)
        return ExitCode.FAILED if diffs else ExitCode.OK
