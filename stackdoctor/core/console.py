"""The one place consoles are made, and the glyphs a console can show.

A Windows console whose code page is 936 (Simplified Chinese) or 1252 (Western), a redirected
stream, or ``PYTHONIOENCODING=cp936`` cannot encode ``✓`` / ``✗`` / ``█``. Printing one used to
raise ``UnicodeEncodeError`` and lose the whole screen. Here:

- :func:`make_console` builds every :class:`rich.console.Console` stackdoctor prints with. On a
  stream whose encoding is not UTF, the console writes through :class:`SafeStream`, which
  replaces what the encoding cannot hold (with ``?``) instead of raising. rich itself switches
  its tree guides and table boxes to ASCII for such an encoding.
- :func:`marks` gives each severity's glyph and style, the busbw bar glyph and the spinner. Where
  the console's encoding cannot encode the glyphs, plain ASCII stands in: ``ok``, ``!!``, ``x``,
  ``-`` (padded to one width so the columns stay aligned), ``#`` and a ``-\\|/`` spinner.
- :func:`protect_std_streams` (called once by the CLI's ``main``) makes ``sys.stdout`` /
  ``sys.stderr`` replace rather than raise, for the text that is printed without rich.
- :func:`write_stdout` writes a machine-readable document (JSON, Markdown, JUnit) as UTF-8 bytes
  when stdout's own encoding is not UTF: a JSON consumer expects UTF-8, and nothing is lost.

The output boundary (:func:`install_boundary`, called once by ``main``): ``sys.stdout`` and ``sys.stderr``
become :class:`BoundaryStream` s, so every character stackdoctor writes to them, relayed installer output
included, passes :func:`stackdoctor.core.redact.scrub` (credentials ``****``, undecodable bytes ``\\xff``).
A stdout that is closed (``>&-``) or full (``>/dev/full``) is :class:`OutputUnwritable`: one sentence and
exit 2. Every console :func:`make_console` builds shows control characters in the text it draws as escapes
(``\\x1b``): a value from the machine never moves the cursor, sets the title or clears the screen.

Chinese text (``--lang zh``): GBK (cp936) encodes CJK, so it prints as is; on cp1252 each CJK
character becomes ``?`` (the replacement is the codec's own; the command still exits as it
would on UTF-8). ``NO_COLOR`` and redirected output are rich's own behaviour and are kept.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import sys
from typing import IO, TYPE_CHECKING, Any

from stackdoctor.core.errors import ExitCode, StackdoctorError
from stackdoctor.core.redact import escape_controls, scrub

if TYPE_CHECKING:  # rich is imported when a console is made: a JSON run never needs it
    from rich.console import Console  # lazy: rich is a heavy import, wanted only when something is drawn

__all__ = [
    "BoundaryStream",
    "OutputUnwritable",
    "SafeStream",
    "can_encode",
    "install_boundary",
    "make_console",
    "marks",
    "protect_std_streams",
    "reader_gone",
    "write_stdout",
]

UNICODE_MARKS: dict[str | None, tuple[str, str]] = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "fail": ("✗", "red"), None: ("·", "dim"),
                                                   "not-verified": ("?", "yellow")}
ASCII_MARKS: dict[str | None, tuple[str, str]] = {"ok": ("ok", "green"), "warn": ("!!", "yellow"), "fail": ("x ", "red"), None: ("- ", "dim"),
                                                 "not-verified": ("? ", "yellow")}
BAR, ASCII_BAR = "█", "#"
SPINNER, ASCII_SPINNER = "dots", "line"  # rich spinner names: braille frames, or - \ | /
ELLIPSIS, ASCII_ELLIPSIS = "…", "..."


def _encoding_of(stream: Any) -> str:
    """The codec name of a text stream (``utf-8`` when it does not say, as for ``io.StringIO``)."""
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(enc).name
    except LookupError:
        return "ascii"  # an encoding Python does not know: assume the least


def _is_utf(encoding: str) -> bool:
    return codecs.lookup(encoding).name.startswith("utf")


def can_encode(text: str, encoding: str) -> bool:
    """Whether ``text`` survives ``encoding`` (``can_encode("✓", "cp936")`` is False)."""
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class SafeStream:
    """A text stream that never raises ``UnicodeEncodeError``: what its encoding cannot hold is
    replaced with ``?``. Everything else (``isatty``, ``fileno``, ``encoding``, ``flush``) is the
    wrapped stream's, so rich still sees the real terminal, its width and its encoding."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._encoding = _encoding_of(stream)

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def wrapped(self) -> IO[str]:
        return self._stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except UnicodeEncodeError:
            safe = text.encode(self._encoding, errors="replace").decode(self._encoding, errors="replace")
            self._stream.write(safe)
            return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class OutputUnwritable(StackdoctorError):
    """stdout is closed or cannot take what is written (a full disk): the user's setup, exit 2."""

    exit_code = ExitCode.USAGE


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.EBADF:
        return "it is closed"
    return exc.strerror or str(exc)


class BoundaryStream:
    """``sys.stdout`` / ``sys.stderr`` as stackdoctor writes them: each text passes
    :func:`stackdoctor.core.redact.scrub`. On stdout a write or flush that fails (closed, full) raises
    :class:`OutputUnwritable`; on stderr it is dropped (what failed to show there cannot be shown)."""

    def __init__(self, stream: Any, name: str, *, raises: bool) -> None:
        self._stream = stream
        self._name = name
        self._raises = raises
        self.written = False  # whether any text went to it (cli.main's JSON answer to a --json command that stopped)

    @property
    def wrapped(self) -> Any:
        return self._stream

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def _fail(self, exc: OSError) -> None:
        if self._raises:
            raise OutputUnwritable(f"cannot write to {self._name}: {_why(exc)}.") from None

    def write(self, text: str) -> int:
        if self._stream is None:
            self._fail(OSError(errno.EBADF, "closed"))
            return len(text)
        safe = scrub(text)
        self.written = self.written or bool(text)
        try:
            self._stream.write(safe)
        except BrokenPipeError:
            if not self._raises:
                raise
            reader_gone(self._stream)
        except UnicodeEncodeError:
            enc = self.encoding
            self._stream.write(safe.encode(enc, errors="replace").decode(enc, errors="replace"))
        except OSError as exc:
            self._fail(exc)
        except ValueError:  # "I/O operation on closed file"
            self._fail(OSError(errno.EBADF, "closed"))
        return len(text)

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            if not self._raises:
                raise
            reader_gone(self._stream)
        except OSError as exc:
            self._fail(exc)
        except ValueError:
            self._fail(OSError(errno.EBADF, "closed"))

    def isatty(self) -> bool:
        try:
            return bool(self._stream is not None and self._stream.isatty())
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        if self._stream is None:
            raise OSError(errno.EBADF, "closed")
        return int(self._stream.fileno())

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def reader_gone(stream: Any = None) -> None:
    """stdout's reader closed the pipe (``| head -1``): what is left to print goes to ``/dev/null`` and the command
    goes on to its own end and exit code, as if the whole output had been read (under ``set -o pipefail`` a closed
    pipe must not fail a CI step, nor turn a finding's exit 1 into 0). Python's own flush at exit finds the
    same null device, so nothing is said about it either."""
    target = stream if stream is not None else sys.stdout
    try:
        fd = target.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 1
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        return
    with contextlib.suppress(OSError, ValueError):
        target.flush()  # what was buffered for the closed pipe now goes to the null device


def _is_stdout(file: Any) -> bool:
    try:
        return int(file.fileno()) == 1
    except (AttributeError, OSError, ValueError):
        return False


def install_boundary() -> None:
    """Route ``sys.stdout`` / ``sys.stderr`` through :class:`BoundaryStream` (once; ``main`` calls it)."""
    if not isinstance(sys.stdout, BoundaryStream):
        sys.stdout = BoundaryStream(sys.stdout, "standard output", raises=True)
    if not isinstance(sys.stderr, BoundaryStream):
        sys.stderr = BoundaryStream(sys.stderr, "standard error", raises=False)


def _safe_console_class() -> Any:
    """A rich Console that escapes control characters in the text it draws (never in its own styles)."""
    cls = _CONSOLE_CLASS.get("cls")
    if cls is not None:
        return cls
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def on_broken_pipe(self) -> None:
            if not _is_stdout(self.file):  # stderr closed: rich's own answer (install's talk keeps the line)
                super().on_broken_pipe()
            reader_gone(self.file)  # stdout's reader left: the rest goes nowhere, the command ends as it would

        def _render_buffer(self, buffer: Any) -> str:
            clean = (seg if seg.control else Segment(escape_controls(seg.text, lines=True), seg.style) for seg in buffer)
            return str(super()._render_buffer(clean))

    _CONSOLE_CLASS["cls"] = _SafeConsole
    return _SafeConsole


_CONSOLE_CLASS: dict[str, Any] = {}


def make_console(
    *, stderr: bool = False, file: IO[str] | None = None, width: int | None = None, record: bool = False, soft_wrap: bool = False
) -> Console:
    """A console on ``file`` (default stdout, or stderr) that cannot raise ``UnicodeEncodeError``.

    No highlighting (external text is never re-coloured); ``width`` fixes the width (rich reads
    the terminal's, else ``COLUMNS``, else 80); ``record`` keeps what was printed for export.
    """
    stream: Any = file if file is not None else (sys.stderr if stderr else sys.stdout)
    if stream is not None and not isinstance(stream, SafeStream) and not _is_utf(_encoding_of(stream)):
        stream = SafeStream(stream)
    elif file is None:
        stream = None  # rich then follows sys.stdout / sys.stderr as they are when it writes
    console: Console = _safe_console_class()(file=stream, highlight=False, soft_wrap=soft_wrap, width=width, record=record, stderr=stderr)
    return console


def marks(console: Console) -> dict[Any, Any]:
    """What this console can show: ``{"ok"|"warn"|"fail"|None: (glyph, style), "bar": glyph,
    "spinner": rich spinner name, "ellipsis": glyph}``; ASCII stand-ins where its encoding cannot
    encode the glyphs (the severity marks change together, so a screen never mixes the two)."""
    enc = console.encoding
    sev = UNICODE_MARKS if all(can_encode(g, enc) for g, _ in UNICODE_MARKS.values()) else ASCII_MARKS
    out: dict[Any, Any] = dict(sev)
    out["bar"] = BAR if can_encode(BAR, enc) else ASCII_BAR
    out["spinner"] = SPINNER if can_encode("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", enc) else ASCII_SPINNER
    out["ellipsis"] = ELLIPSIS if can_encode(ELLIPSIS, enc) else ASCII_ELLIPSIS
    return out


def protect_std_streams() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` replace what their encoding cannot hold instead of
    raising (for the plain ``print`` paths). UTF streams are left alone."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None or _is_utf(_encoding_of(stream)):
            continue
        try:
            if getattr(stream, "errors", "strict") == "strict":
                reconfigure(errors="replace")
        except (ValueError, OSError):
            pass


def write_stdout(text: str) -> None:
    """Write a machine-readable document to stdout: as text on a UTF stream, else as UTF-8 bytes to
    the underlying buffer (JSON and XML are UTF-8 by definition; a legacy code page would lose or
    refuse characters)."""
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    if buffer is not None and not _is_utf(_encoding_of(out)):
        out.flush()
        try:
            buffer.write(scrub(text).encode("utf-8"))
            buffer.flush()
        except BrokenPipeError:
            reader_gone(buffer)
        except OSError as exc:
            raise OutputUnwritable(f"cannot write to standard output: {_why(exc)}.") from None
        return
    out.write(text)
    out.flush()
