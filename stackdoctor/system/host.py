"""What the operating system says of itself (:class:`Host`): live, injected, or a captured tree's ``host.json``."""

from __future__ import annotations

import os
import platform as _platform
from dataclasses import dataclass
from typing import Any

HOST_FILE = "/.stackdoctor/host.json"
_HOST_KEYS = ("system", "machine", "release", "version", "node", "libc")


@dataclass(frozen=True)
class Host:
    """What the operating system says of itself: ``platform.uname()`` plus the C library.

    ``system`` is ``platform.system()``'s word ("Linux", "Darwin", "Windows"); ``libc`` is
    ``os.confstr("CS_GNU_LIBC_VERSION")`` ("glibc 2.39"). ``source`` says where it came from.
    """

    system: str | None = None
    machine: str | None = None
    release: str | None = None
    version: str | None = None
    node: str | None = None
    libc: str | None = None
    cpu_count: int | None = None
    source: str = "platform.uname()"

    @classmethod
    def live(cls) -> Host:
        u = _platform.uname()
        try:
            libc = os.confstr("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError, AttributeError):
            libc = None
        return cls(u.system or None, u.machine or None, u.release or None, u.version or None, u.node or None, libc, os.cpu_count(), "platform.uname()")

    def label(self, field: str) -> str:
        """Where this host's ``field`` came from, for a facts ``sources`` map: ``platform.system()``
        live, ``file:/.stackdoctor/host.json (system)`` for a captured tree."""
        if self.source == "platform.uname()":
            return {"libc": 'os.confstr("CS_GNU_LIBC_VERSION")', "cpu_count": "os.cpu_count()", "node": "socket.gethostname()"}.get(
                field, f"platform.{field}()"
            )
        return f"{self.source} ({field})"

    @classmethod
    def from_data(cls, data: object, source: str) -> Host | None:
        """A host from ``host.json``'s object; None when it is not one (unknown keys are ignored)."""
        if not isinstance(data, dict):
            return None
        vals: dict[str, Any] = {k: data[k] for k in _HOST_KEYS if isinstance(data.get(k), str) and data[k]}
        n = data.get("cpu_count")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            vals["cpu_count"] = n
        return cls(**vals, source=source)

