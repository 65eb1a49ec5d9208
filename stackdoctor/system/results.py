"""What the OS boundary hands back: a tool run (:class:`CommandResult`) and a file read (:class:`ReadResult`)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

DEFAULT_TIMEOUT_S = 5.0
MAX_CAPTURE_BYTES = 4 * 1024 * 1024
MAX_FILE_BYTES = 1024 * 1024

# Set for tools whose output is parsed: stable, untranslated messages.
PARSE_ENV = {"LC_ALL": "C", "LANG": "C"}


@dataclass(frozen=True)
class CommandResult:
    """What one tool run did. ``status`` is one of ok / absent / denied / timeout / error."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    status: str = "ok"
    signal: int | None = None
    truncated: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.returncode == 0

    @property
    def tool(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else ""

    def describe_failure(self) -> str:
        """One sentence saying how the run failed (empty when it succeeded)."""
        name = self.tool
        if self.status == "absent":
            return f"{name} is not installed"
        if self.status == "denied":
            return f"{name} could not be run: {self.detail or 'permission denied'}"
        if self.status == "timeout":
            return f"{name} did not answer in {self.detail or '?'} s"
        if self.signal is not None:
            return f"{name} was killed by {signame(self.signal)}"
        if self.status == "error":
            return f"{name} could not be run: {self.detail}"
        if self.returncode:
            tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
            return f"{name} exited with code {self.returncode}" + (f": {tail[0][:200]}" if tail[0] else "")
        return ""

    def to_dict(self) -> dict:
        return {
            "argv": list(self.argv),
            "returncode": self.returncode,
            "status": self.status,
            "signal": self.signal,
            "duration_s": round(self.duration_s, 4),
            "truncated": self.truncated,
            "detail": self.detail,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


@dataclass(frozen=True)
class ReadResult:
    """A file read under the sysroot. ``status``: ok / absent / denied / error."""

    path: str
    status: str
    text: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"

