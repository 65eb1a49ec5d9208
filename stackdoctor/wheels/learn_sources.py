"""Where ``matrix learn`` reads wheels from: an index over HTTP (:class:`HttpSource`, bounded reads, PEP 658 metadata or
the wheel's own ``METADATA`` by range requests) or an index snapshot with its wheels on disk (:class:`SnapshotSource`)."""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from stackdoctor.core.errors import IndexError_, UsageError
from stackdoctor.wheels.index import IndexClient, IndexFile, list_project, project_page_url
from stackdoctor.wheels.lazywheel import RangesRefused
from stackdoctor.wheels.learn_wheels import (
    GPU_LIBRARIES,
    MAX_LIBRARY_BYTES,
    MAX_METADATA_BYTES,
    MAX_WHEEL_BYTES,
    CoreMetadata,
    file_sha256,
    parse_core_metadata,
    public_url,
    read_open_library,
    read_wheel_gpu_code,
    read_wheel_metadata,
    tag_family,
    wheel_facts,
)

if TYPE_CHECKING:  # pragma: no cover
    pass

# ---------------------------------------------------------------------------- sources


class Source(Protocol):
    name: str  # what it is, for messages (redacted when printed)

    def files(self, project: str) -> tuple[str, list[IndexFile]]: ...

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]: ...

    def wheel(self, f: IndexFile, into: Path) -> Path | None: ...


@dataclass
class HttpSource:
    """An index over HTTP(S) or ``file://`` (PEP 503 / 691 pages, PEP 658 / 714 metadata files)."""

    index_url: str
    client: IndexClient
    download: bool = False
    max_metadata_bytes: int = MAX_METADATA_BYTES
    max_wheel_bytes: int = MAX_WHEEL_BYTES
    timeout_s: float = 600.0
    name: str = ""
    why: dict[str, str] = field(default_factory=dict)  # file name -> why its metadata / GPU code was not read
    readers: list[Any] = field(default_factory=list)  # the range readers used (their byte counts)
    notes: list[str] = field(default_factory=list)  # what was read and refused on the way (said as warnings)
    _last: Any = None

    def __post_init__(self) -> None:
        self.name = self.name or self.index_url

    def files(self, project: str) -> tuple[str, list[IndexFile]]:
        try:
            return list_project(self.client, self.index_url, project)
        except IndexError_ as exc:
            if getattr(exc, "reason", "") == "missing":
                return project_page_url(self.index_url, project), []
            raise

    def _get(self, url: str, cap: int, into: Path | None = None) -> bytes | Path | None:
        """GET ``url`` (bounded); None for a 404. Streams to ``into`` when given."""
        if url.startswith("file:"):
            from stackdoctor.wheels.index import local_path

            p = local_path(url)
            if not p.is_file():
                return None
            if p.stat().st_size > cap:
                raise IndexError_(f"{public_url(url)} is larger than {cap // (1024 * 1024)} MiB; not read.")
            if into is not None:
                return p
            return p.read_bytes()
        import httpx

        deadline = time.monotonic() + self.timeout_s
        run = self.client.budget  # the run's bytes and time, charged on every read (issue 44)
        try:
            with self.client._client_for(url).stream("GET", url, timeout=run.timeout(self.client.timeout_s)) as resp:
                if resp.status_code == 404:
                    return None
                if resp.status_code >= 400:
                    raise IndexError_(f"{public_url(url)} answered HTTP {resp.status_code}.")
                length = resp.headers.get("content-length")
                if length and length.isdigit() and int(length) > cap:
                    raise IndexError_(f"{public_url(url)} is {int(length) // (1024 * 1024)} MiB, larger than the {cap // (1024 * 1024)} MiB limit; not read.")
                got = 0
                buf = bytearray()
                fh = open(into, "wb") if into is not None else None  # noqa: SIM115 - closed below
                try:
                    for chunk in resp.iter_bytes():
                        got += len(chunk)
                        if got > cap:
                            raise IndexError_(f"{public_url(url)} is larger than the {cap // (1024 * 1024)} MiB limit; stopped reading it.")
                        if time.monotonic() > deadline:
                            raise IndexError_(f"{public_url(url)} did not arrive in {self.timeout_s:g} s; stopped reading it.")
                        run.take(len(chunk), public_url(url))
                        if fh is not None:
                            fh.write(chunk)
                        else:
                            buf += chunk
                finally:
                    if fh is not None:
                        fh.close()
                return into if into is not None else bytes(buf)
        except httpx.HTTPError as exc:
            raise IndexError_(f"{public_url(url)} could not be read: {type(exc).__name__}.") from None

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]:
        """The wheel's core metadata: the PEP 658 / 714 ``.metadata`` file where the index serves one, else the
        wheel's own ``METADATA`` read by HTTP range requests (:mod:`stackdoctor.wheels.lazywheel`), else (ranges refused,
        ``download`` on, the wheel within ``max_wheel_bytes``) from the whole wheel. None: :attr:`why` says why."""
        try:
            body = self._get(f.url + ".metadata", self.max_metadata_bytes)
        except IndexError_ as exc:
            body = None
            self.why[f.filename] = str(exc)
        if isinstance(body, bytes) and f.metadata_sha256 and hashlib.sha256(body).hexdigest() != f.metadata_sha256:
            # PEP 658: the page names the file's sha256; another file is not the wheel's metadata (issue 44)
            self.notes.append(f"{public_url(f.url)}.metadata does not match the sha256 the index page gives for it; not used (the wheel's own METADATA is read instead).")
            body = None
        if isinstance(body, bytes):
            return parse_core_metadata(body.decode("utf-8", errors="replace")), f
        if f.url.startswith("file:"):
            from stackdoctor.wheels.index import local_path

            p = local_path(f.url)
            if not p.exists():
                return self._missing(f, f"{public_url(f.url)} does not exist"), f
            return (read_wheel_metadata(p) if p.is_file() and p.stat().st_size else self._missing(f, "an empty file, not a wheel")), f
        try:
            rw = self._ranged(f)
            if rw.size == 0:
                return self._missing(f, "0 bytes on the index: an empty file, not a wheel"), f
            name = next((n for n in rw.names() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None:
                return self._missing(f, "the wheel has no .dist-info/METADATA"), f
            data = rw.read_member(name, self.max_metadata_bytes, rw.record())
            return parse_core_metadata(data.decode("utf-8", errors="replace")), f
        except RangesRefused as exc:
            refused = str(exc)
        except IndexError_ as exc:
            return self._missing(f, str(exc)), f
        if not self.download:
            return self._missing(f, f"no core metadata file on the index and {refused.split(': ', 1)[-1].rstrip('.')}; --download reads the whole wheel"), f
        with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
            try:
                path = self.wheel(f, Path(tmp))
            except IndexError_ as exc:
                return self._missing(f, str(exc)), f
            if path is None:
                return self._missing(f, "the wheel could not be downloaded"), f
            return read_wheel_metadata(path), f

    def _missing(self, f: IndexFile, why: str) -> CoreMetadata | None:
        self.why[f.filename] = why
        return None

    def _ranged(self, f: IndexFile) -> Any:
        from stackdoctor.wheels.lazywheel import RangeWheel

        if self._last is not None and self._last.url == f.url:
            return self._last
        self._last = None
        rw = RangeWheel(self.client._client_for(f.url), f.url, budget=self.max_wheel_bytes, timeout_s=self.timeout_s, public=public_url(f.url),
                        net=self.client.budget)
        self._last = rw
        self.readers.append(rw)
        return rw

    def gpu_code(self, f: IndexFile) -> dict[str, Any] | None:
        """The GPU code of the wheel's primary GPU library, read by range requests (only the library member's
        bytes, only its headers kept); the whole wheel where ranges are refused and ``download`` allows it."""
        if f.url.startswith("file:"):
            from stackdoctor.wheels.index import local_path

            return read_wheel_gpu_code(local_path(f.url))
        try:
            rw = self._ranged(f)
            if rw.size == 0:
                return {"kind": "unknown", "library": f.filename, "error": "0 bytes on the index: an empty file, not a wheel"}
            names = set(rw.names())
            member = next((m for m in GPU_LIBRARIES if m in names), None)
            if member is None:
                return None
            return dict(rw.gpu_code(member, GPU_LIBRARIES[member], MAX_LIBRARY_BYTES, read_open_library))
        except RangesRefused as exc:
            if not self.download:
                return {"kind": "unknown", "library": f.filename, "error": f"{str(exc).split(': ', 1)[-1].rstrip('.')}; --download reads the whole wheel"}
        except IndexError_ as exc:
            return {"kind": "unknown", "library": f.filename, "error": str(exc)}
        with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
            try:
                path = self.wheel(f, Path(tmp))
            except IndexError_ as exc:
                return {"kind": "unknown", "library": f.filename, "error": str(exc)}
            return read_wheel_gpu_code(path) if path else None

    @property
    def fetched(self) -> int:
        """Bytes of wheels read by range requests so far."""
        return sum(r.fetched for r in self.readers)

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        if not self.download:
            return None
        got = self._get(f.url, self.max_wheel_bytes, into / f.filename)
        return got if isinstance(got, Path) else None


@dataclass
class SnapshotSource:
    """An index read earlier (``benchmarks/pypi_via_pip.py``: file lists and core metadata, pip as transport)."""

    path: Path
    name: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    wheels: Path | None = None  # a folder of wheels downloaded earlier (by their index file names), for --download

    def __post_init__(self) -> None:
        try:
            self.data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--snapshot {self.path}: cannot be read as an index snapshot ({exc.__class__.__name__}).") from None
        if not isinstance(self.data.get("projects"), dict):
            raise UsageError(f"--snapshot {self.path}: not an index snapshot (no projects).")
        self.name = self.name or "https://pypi.org/simple"

    def files(self, project: str) -> tuple[str, list[IndexFile]]:
        p = self.data["projects"].get(project) or {}
        files = [IndexFile(str(f["filename"]), str(f["url"]), f.get("sha256"), f.get("requires_python")) for f in p.get("files") or []]
        return str(p.get("page") or f"{self.name}/{project}/"), files

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]:
        wf = wheel_facts(f)
        if wf is None:
            return None, f
        fam = tag_family(wf.platforms[0]) if wf.platforms else "any"
        meta = self.data["projects"].get(wf.project, {}).get("metadata", {})
        row = meta.get(f"{wf.version}{'+' + wf.label if wf.label else ''}|{fam}") or meta.get(f"{wf.version}|any")
        if not row:
            return None, f
        used = IndexFile(str(row["filename"]), str(row["url"]), row.get("sha256"), row.get("requires_python"))
        return CoreMetadata(row.get("requires_python"), tuple(row.get("requires_dist") or ())), used

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        """The wheel from the ``wheels`` folder when it is there and its sha256 is the index's."""
        if self.wheels is None:
            return None
        p = self.wheels / f.filename
        if not p.is_file():
            return None
        if f.sha256 and file_sha256(p) != f.sha256:
            raise IndexError_(f"{p}: its sha256 is not the index's ({f.sha256[:12]}...); not read.")
        return p
