"""``stackdoctor bundle -o stackdoctor.pyz``: this installation as one file any Python 3.10+ runs (:mod:`stackdoctor.render.zipapp`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from stackdoctor.commands import LANG_HELP, use_lang
from stackdoctor.core.errors import ExitCode, UsageError


def register(app: typer.Typer) -> None:
    @app.command("bundle")
    def bundle_cmd(
        output: Annotated[str, typer.Option("--output", "-o", help="The file to write (default: stackdoctor.pyz).")] = "stackdoctor.pyz",
        lang: Annotated[str | None, typer.Option("--lang", help=LANG_HELP)] = None,
    ) -> int:
        """Write this stackdoctor as one file for a machine without pip: python3 stackdoctor.pyz check."""
        use_lang(lang)
        from stackdoctor.core.texts import detect_lang, sentence
        from stackdoctor.render.zipapp import build_bundle, write_bundle

        out = Path(output)
        if out.is_dir():
            raise UsageError(f"cannot write the bundle to {out}: it is a folder; name a file, such as {out / 'stackdoctor.pyz'}.")
        if not out.parent.is_dir():
            raise UsageError(f"cannot write {out}: the folder {out.parent} does not exist.")
        b = build_bundle()
        try:
            size = write_bundle(b, out)
        except OSError as exc:
            raise UsageError(f"cannot write the bundle to {out}: {exc.strerror or exc}.") from None
        lg = detect_lang(os.environ)
        mib = f"{size / (1 << 20):.1f}"
        packages = ", ".join(f"{n} {v}" for n, v in sorted(b.packages.items()))
        print(sentence(f"Wrote {out} ({mib} MiB): stackdoctor with {packages}.", lg), file=sys.stderr)
        if b.left_out:
            said = ", ".join(f"{n} ({why})" for n, why in sorted(b.left_out.items()))
            print(sentence(f"Left out: {said}; what needs them says it was not read.", lg), file=sys.stderr)
        from stackdoctor.core.shell import word

        print(sentence(f"Run it with any Python 3.10 or newer: python3 {word(str(out), windows=os.name == 'nt')} check", lg), file=sys.stderr)
        return ExitCode.OK
