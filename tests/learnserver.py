"""A PEP 503 + PEP 658/714 index on 127.0.0.1 serving REAL artifacts, for ``stackdoctor matrix learn``.

It serves, under their real file names, whatever wheels it is given: the real torch 2.13.0+cpu wheel (the
suite's torch venv installs it; /opt/wheels holds it here), the real torchvision 0.28.0 wheel, the committed
skeleton of PyPI's torch 2.15.0 CUDA wheel (tests/fixtures/learn/, made by benchmarks/make_wheel_skeleton.py)
and small stand-ins the test generates (named as such). Project pages list each file with its sha256,
``data-requires-python`` and ``data-core-metadata``; ``<file>.metadata`` is the wheel's own METADATA, read out of
the zip once. Requests are counted per path, so a test can prove what was (not) fetched again.

``metadata=False`` serves no ``.metadata`` files (as the PyPI this project reaches serves none for torch);
``ranges=True`` answers ``Range: bytes=a-b`` requests with 206 and the bytes asked for (RFC 9110 section 14),
``ranges=False`` answers them with the whole file, as a server that refuses ranges does. ``sent`` counts the
body bytes sent per path, so a test can prove how little of a wheel was read.

``hostile`` (tests/test_trust_bounds.py, issue 44) makes it misbehave: ``endless206`` answers the 1-byte size probe
(``Range: bytes=0-0``) with 206 and bytes that never end; ``trickle`` sends every range answer one byte every 0.5 s;
``badmeta`` serves a ``.metadata`` file that is not the one whose sha256 the page advertises; ``filelink`` lists each
wheel by a ``file://`` link to where it lies on this machine.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
import urllib.parse
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename


def wheel_metadata(path: Path) -> bytes:
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return z.read(name)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class LearnIndex:
    def __init__(self, wheels: list[Path], *, metadata: bool = True, ranges: bool = True, hostile: str = "") -> None:
        self.hostile = hostile
        self.stopping = threading.Event()
        self.files: dict[str, Path] = {w.name: w for w in wheels}
        self.meta: dict[str, bytes] = {w.name: wheel_metadata(w) for w in wheels if w.stat().st_size} if metadata else {}
        self.sha: dict[str, str] = {w.name: _sha256(w) for w in wheels}
        self.hits: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.ranges = ranges
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = urllib.parse.unquote(self.path.split("?", 1)[0])
                index.hits[path] = index.hits[path] + 1
                parts = [p for p in path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    return self._page(parts[1])
                if len(parts) == 2 and parts[0] == "files":
                    name = parts[1]
                    if name.endswith(".metadata") and name[: -len(".metadata")] in index.meta:
                        body = index.meta[name[: -len(".metadata")]]
                        if index.hostile == "badmeta":  # not the file the page's sha256 names
                            body = body.replace(b"Requires-Python: ", b"Requires-Python: >=3.99,")
                        return self._send(body, "text/plain")
                    if name in index.files:
                        return self._file(path, index.files[name])
                self.send_error(404)

            def _file(self, path: str, file: Path) -> None:
                size = file.stat().st_size
                m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", "").strip())
                if m is None or not index.ranges or not (m.group(1) or m.group(2)):
                    index.sent[path] += size
                    return self._send(file.read_bytes(), "application/octet-stream")
                if m.group(1):
                    start, end = int(m.group(1)), min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
                else:
                    start, end = max(0, size - int(m.group(2))), size - 1
                if index.hostile == "endless206" and (start, end) == (0, 0):
                    return self._endless(size)
                if start >= size or end < start:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                with open(file, "rb") as fh:
                    fh.seek(start)
                    body = fh.read(end - start + 1)
                index.sent[path] += len(body)
                self.send_response(206)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if index.hostile == "trickle":
                    return self._trickle(body)
                self.wfile.write(body)
                return None

            def _endless(self, size: int) -> None:
                self.send_response(206)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Range", f"bytes 0-0/{size}")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    while not index.stopping.is_set():
                        self.wfile.write(b"\0" * 65536)
                except OSError:
                    pass
                self.close_connection = True

            def _trickle(self, body: bytes) -> None:
                try:
                    for i in range(len(body)):
                        if index.stopping.wait(0.5):
                            break
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                except OSError:
                    pass
                self.close_connection = True

            def _page(self, project: str) -> None:
                links = []
                for name in sorted(index.files):
                    pname = str(canonicalize_name(parse_wheel_filename(name)[0]))
                    if pname != canonicalize_name(project):
                        continue
                    href = "/files/" + urllib.parse.quote(name) + f"#sha256={index.sha[name]}"
                    if index.hostile == "filelink":
                        href = index.files[name].resolve().as_uri() + f"#sha256={index.sha[name]}"
                    extra = ""
                    if name in index.meta:
                        extra = f' data-core-metadata="sha256={hashlib.sha256(index.meta[name]).hexdigest()}"'
                    links.append(f'<a href="{html.escape(href)}"{extra}>{html.escape(name)}</a><br/>')
                if not links:
                    return self.send_error(404)
                self._send(("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>").encode(), "text/html")

            def _send(self, body: bytes, ctype: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self) -> LearnIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def standin_wheel(folder: Path, name: str, version: str, tag: str, requires_python: str, requires: list[str] = (),  # type: ignore[assignment]
                  pad_mb: int = 0, members: dict[str, bytes] | None = None) -> Path:
    """A tiny wheel NAMED as a stand-in (its METADATA says so): a release nobody knows yet. ``pad_mb``: a stored
    member of that many MiB of random bytes (``torch/lib/libtorch_cpu.so``, a real wheel's bulk) BEFORE the
    metadata, as in real wheels; ``members``: more members (name -> bytes); a RECORD lists every member's sha256."""
    import base64
    import os
    dist = f"{name}-{version.split('+')[0]}.dist-info"
    path = folder / f"{name}-{version}-{tag}.whl"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Requires-Python: {requires_python}",
            "Summary: STAND-IN generated by stackdoctor tests/learnserver.py (not PyTorch)"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    body: dict[str, bytes] = {}
    if pad_mb:
        body[f"{name}/lib/lib{name}_cpu.so"] = os.urandom(pad_mb * 1024 * 1024)
    body.update(members or {})
    body[f"{dist}/METADATA"] = ("\n".join(meta) + "\n").encode()
    body[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: stackdoctor-tests\nRoot-Is-Purelib: false\n"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in body.items():
            z.writestr(member, data, compress_type=zipfile.ZIP_STORED if member.endswith("_cpu.so") else zipfile.ZIP_DEFLATED)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(data)}")
        record.append(f"{dist}/RECORD,,")
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return path
