"""One output switch for every command that reports: ``--format`` and ``--output``.

``human`` (the rich screen), ``json`` (the report), ``markdown``, ``github`` (annotations on
stdout, a summary appended to ``$GITHUB_STEP_SUMMARY``) and ``junit``. ``--output FILE`` writes
the format to FILE instead of stdout, atomically (a temporary file in the same folder, then
``os.replace``): a failed write never leaves half a file. ``json`` and ``human`` keep host and user names
unless asked (they do not leave the machine by themselves); the CI formats are redacted. Credentials are
``****`` in every format (:mod:`stackdoctor.core.redact`'s output boundary), and what a screen or document
draws has its control characters escaped (:func:`shown`).
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from stackdoctor import kinds
from stackdoctor.core.console import make_console, write_stdout
from stackdoctor.core.errors import UsageError
from stackdoctor.core.redact import redact_report, redact_text, safe_data, scrub
from stackdoctor.model.report import Report, report_from_data

__all__ = ["CI_FORMATS", "FORMATS", "format_for", "format_report", "redacted", "write_output", "write_text_file"]

FORMATS = ("human", "json", "markdown", "github", "junit", "html")
CI_FORMATS = ("markdown", "github", "junit", "html")  # always redacted (html: the page a ticket links, as report.html)


# ``--output FILE`` without ``--format``: the format its extension names (a JUnit file is XML); any other
# extension (.txt, .log, none) gets the screen's text
EXTENSION_FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".xml": "junit"}


def format_for(path: str) -> str:
    """The format ``--output path`` writes when no ``--format`` is given: ``x.json`` -> json, ``x.md`` -> markdown,
    ``x.xml`` -> junit, anything else -> human."""
    return EXTENSION_FORMATS.get(os.path.splitext(path)[1].lower(), "human")


def redacted(report: Report) -> Report:
    """A redacted copy of ``report`` (see :mod:`stackdoctor.core.redact`)."""
    new = report_from_data(redact_report(report.to_data(), ids=kinds.device_ids()), origin="redacted report")
    new.replayed_from = redact_text(report.replayed_from) if report.replayed_from else None
    return new


# strings that are many lines by nature: a tool's output, a finding's explanation and fix
MULTILINE_KEYS = frozenset({"stdout", "stderr", "detail", "fix", "raw_outputs"})


def shown(report: Report) -> Report:
    """``report`` as it may be drawn on a screen or in a document: credentials ``****``, control characters
    from the machine escaped (``\\x1b``, ``\\r``, ``\\n`` inside a value), undecodable bytes ``\\xff``
    (:func:`stackdoctor.core.redact.safe_data`). Every renderer gets this copy, so no renderer needs to care."""
    new = report_from_data(safe_data(report.to_data(), screen=True, lines_in=MULTILINE_KEYS), origin="report")
    new.replayed_from = report.replayed_from and safe_data(report.replayed_from, screen=True)
    return new


def _human(report: Report, console: Any, verbose: bool, lang: str, strict: bool = False) -> None:
    from stackdoctor.render.human import render_report  # lazy (as each renderer below): rich, only for the format asked

    render_report(shown(report), console, verbose=verbose, lang=lang, strict=strict)


def format_report(report: Report, fmt: str, *, redact: bool = False, lang: str = "en", strict: bool = False) -> str:
    """The text of a machine-readable format (every format but ``human``; ``github`` -> its annotations).

    ``markdown`` here is ``check``'s: short, without the raw tool outputs (those belong in the bundle
    ``stackdoctor report`` writes). ``lang`` picks the words; ``strict`` lets the summary say why
    warnings fail."""
    if redact:
        report = redacted(report)
    if fmt != "json":
        report = shown(report)
    if fmt == "json":
        return report.to_json() + "\n"
    if fmt == "markdown":
        from stackdoctor.render.markdown import render_markdown

        return render_markdown(report, raw=False, redacted=redact, lang=lang, strict=strict)
    if fmt == "github":
        from stackdoctor.render.github import render_annotations

        return render_annotations(report, lang, strict)
    if fmt == "junit":
        from stackdoctor.render.junit import render_junit

        return render_junit(report, lang)
    if fmt == "html":
        from stackdoctor.render.html import render_html

        return render_html(report, lang=lang, redacted=redact, strict=strict)
    raise UsageError(f"unknown output format {fmt!r} (choose one of {', '.join(FORMATS)}).")


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission denied" if exc.errno != errno.EROFS else "read-only file system"
    return exc.strerror or str(exc)


def write_text_file(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all.

    A regular file (or a new one) is written to a temporary file beside it and renamed over it;
    a device or pipe (``/dev/stdout``, ``/dev/full``) is written directly. Every failure is one
    :class:`UsageError` sentence naming the file.

    :raises UsageError: the folder is missing, the file is read-only or a directory, the disk is full.
    """
    p = Path(path)
    data = scrub(text).encode("utf-8")  # the output boundary: no credential, no undecodable byte in a file
    try:
        st: os.stat_result | None = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write {p}: {_describe(exc)}.") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"cannot write {p}: it is a directory.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with open(p, "wb", buffering=0) as fh:
                view = memoryview(data)
                while view:
                    n = fh.write(view)
                    view = view[n or len(view) :]
        except OSError as exc:
            raise UsageError(f"cannot write {p}: {_describe(exc)}.") from None
        return
    if st is not None and not (st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
        raise UsageError(f"cannot write {p}: the file is read-only.")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {p}: the folder {parent} does not exist.")
    if st is not None:
        mode = stat.S_IMODE(st.st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise UsageError(f"cannot write {p}: {_describe(exc)}.") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _stdout(text: str) -> None:
    write_stdout(text)  # UTF-8 whatever the console's code page: these are documents, not screens


def _append_step_summary(text: str, console: Any) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:  # the annotations and the exit code still gate the job
        print(f"stackdoctor: warning: could not append the step summary to {path}: {_describe(exc)}.", file=sys.stderr)


def write_output(
    report: Report,
    fmt: str,
    output: str | None,
    *,
    console: Any,
    verbose: bool = False,
    redact_default: bool,
    redact: bool | None = None,
    lang: str = "en",
    strict: bool = False,
) -> None:
    """Render ``report`` in ``fmt`` to stdout, or to the file ``output``.

    Redaction: ``redact`` when given; else the CI formats (markdown, github, junit, html) are always
    redacted and json / human follow ``redact_default`` (``check``: False, ``report``: True).

    :raises UsageError: unknown format, or the output file cannot be written.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown output format {fmt!r} (choose one of {', '.join(FORMATS)}).")
    do_redact = redact if redact is not None else (fmt in CI_FORMATS or redact_default)
    if fmt == "human":
        base = redacted(report) if do_redact else report
        if output is None:
            _human(base, console, verbose, lang, strict)
            return
        buf = io.StringIO()
        _human(base, make_console(file=buf, width=100), verbose, lang, strict)
        write_text_file(output, buf.getvalue())
        return
    if fmt == "github":
        base = redacted(report) if do_redact else report
        from stackdoctor.render.github import render_annotations, render_summary

        drawn = shown(base)
        text = render_annotations(drawn, lang, strict)
        if output is None:
            _stdout(text)
        else:
            write_text_file(output, text)
        _append_step_summary(render_summary(drawn, redacted=do_redact, lang=lang, strict=strict), console)
        return
    text = format_report(report, fmt, redact=do_redact, lang=lang, strict=strict)
    if output is None:
        _stdout(text)
    else:
        write_text_file(output, text)
