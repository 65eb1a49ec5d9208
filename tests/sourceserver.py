"""Package sources as users configure them, served on 127.0.0.1 with small GENERATED wheels (NOT PyTorch).

One threaded HTTP server answers for several "hosts" (path prefixes), each recording its hits:

- ``/pypi/simple/<project>/``: a PyPI-style mirror. Like PyPI it has torch only as the label-less default
  build (``torch-2.13.0-...whl``, ``torch-2.14.0-...whl``, whose METADATA requires ``nvidia-cuda-runtime==13.0.96``,
  i.e. a cu130 build) and no ``+cpu`` / ``+cuXXX`` builds; it also serves torch's (synthetic) dependencies
  ``filelock``, ``sympy`` and ``mpmath``, and the cu130 runtime wheel.
- ``/torch/whl/<variant>/<project>/``: a PEP 503 copy of the PyTorch index (``+cpu`` builds).
- ``/pytorch-wheels/<variant>/``: a mirror in the flat "pytorch-wheels" layout: one listing page of files per
  variant, written like an nginx autoindex with ``+`` escaped as ``&#43;`` in the links (the form reported for
  mirrors.aliyun.com; see tests/fixtures/mirrors/source.md); the files next to it.
- ``/down/...``: answers HTTP 503 to everything (pip retries a 503): an index that is up but failing.

The wheels are built with tests/indexserver.py's ``build_wheel`` (valid RECORD, METADATA with the
``Requires-Dist`` given here) and their ``torch/__init__.py`` carries ``STACKDOCTOR_FAKE_TORCH = True``.
"""

from __future__ import annotations

import base64
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from indexserver import LINUX, WheelSpec, _torch_files, build_wheel

TAG = f"cp311-cp311-{LINUX}"
DEPS = ["filelock", "sympy>=1.13.3"]


def _module(name: str, version: str) -> dict[str, str]:
    return {f"{name.replace('-', '_')}/__init__.py": f"# synthetic {name} {version} for stackdoctor tests\n__version__ = '{version}'\n"}


def specs() -> dict[str, WheelSpec]:
    """Every generated wheel by file name."""
    out: list[WheelSpec] = []
    for tv in ("2.13.0", "2.14.0"):
        out.append(WheelSpec("torch", f"{tv}+cpu", TAG, list(DEPS), _torch_files(f"{tv}+cpu")))
        # PyPI's default build: no local label, a CUDA 13.0 runtime requirement (as the real 2.14.1 wheel's cuda-toolkit==13.0.3)
        plain = _torch_files(f"{tv}+cu130")
        plain["torch/version.py"] = f"__version__ = '{tv}'\ncuda = '13.0'\nhip = None\n"
        plain["torch/__init__.py"] = plain["torch/__init__.py"].replace(f"'{tv}+cu130'", f"'{tv}'")
        out.append(WheelSpec("torch", tv, TAG, [*DEPS, "nvidia-cuda-runtime==13.0.96"], plain))
    out.append(WheelSpec("torchvision", "0.28.0+cpu", TAG, ["torch==2.13.0+cpu"], _module("torchvision", "0.28.0+cpu")))
    out.append(WheelSpec("nvidia-cuda-runtime", "13.0.96", f"py3-none-{LINUX}", [], _module("fake_nvidia_cuda_runtime", "13.0.96")))
    out.append(WheelSpec("filelock", "3.20.0", "py3-none-any", [], _module("filelock", "3.20.0")))
    out.append(WheelSpec("sympy", "1.14.0", "py3-none-any", ["mpmath>=1.1.0"], _module("sympy", "1.14.0")))
    out.append(WheelSpec("mpmath", "1.3.0", "py3-none-any", [], _module("mpmath", "1.3.0")))
    return {s.filename: s for s in out}


class SourceServer:
    """``auth``: path prefix -> (user, password) that requests under it must send as HTTP basic auth (else 401),
    an index that needs the credentials its users configure (tests/test_output_boundary.py). ``validators``: pages
    answered 200 carry an ``ETag`` and ``Last-Modified`` and a matching ``If-None-Match`` is answered 304 (``not_modified``
    counts them), as PyPI and download.pytorch.org do (tests/test_trust_io.py)."""

    def __init__(self, auth: dict[str, tuple[str, str]] | None = None, *, validators: bool = False) -> None:
        self.auth = dict(auth or {})
        self.validators = validators
        self.not_modified = 0
        self.refused = 0
        self.specs = specs()
        self.wheels = {name: build_wheel(s) for name, s in self.specs.items()}
        self.hits: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ urls

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def pypi(self) -> str:
        return f"{self.root}/pypi/simple"

    def torch_index(self) -> str:
        return f"{self.root}/torch/whl"

    def flat_mirror(self) -> str:
        return f"{self.root}/pytorch-wheels"

    def down(self) -> str:
        return f"{self.root}/down/simple"

    def count(self, prefix: str) -> int:
        with self.lock:
            return sum(n for path, n in self.hits.items() if path.startswith(prefix))

    # ------------------------------------------------------------------ content

    def pypi_files(self) -> list[str]:
        return [n for n, s in self.specs.items() if "+" not in s.version]

    def variant_files(self, variant: str) -> list[str]:
        return [n for n, s in self.specs.items() if s.version.endswith(f"+{variant}")]

    def write_folder(self, directory: Path, names: list[str]) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for n in names:
            (directory / n).write_bytes(self.wheels[n])
        return directory

    def _project_page(self, names: list[str], href: str) -> bytes:
        links = "".join(f'<a href="{href}{urllib.parse.quote(n)}">{n}</a><br/>\n' for n in names)
        return f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n".encode()

    def _autoindex(self, path: str, names: list[str]) -> bytes:
        rows = "".join(
            f'<a href="{n.replace("+", "&#43;")}" title="{n}">{n}</a>{" " * max(1, 60 - len(n))}01-Sep-2026 00:00  {len(self.wheels[n])}\n'
            for n in names
        )
        return (
            f"<html>\n<head><title>Index of {path}</title></head>\n<body>\n<h1>Index of {path}</h1><hr><pre>"
            f'<a href="../">../</a>\n{rows}</pre><hr></body>\n</html>\n'
        ).encode()

    def route(self, path: str) -> tuple[int, bytes, str]:
        parts = [p for p in urllib.parse.unquote(path).split("?")[0].split("/") if p]
        if parts[:1] == ["down"]:
            return 503, b"<html><body>503 Service Unavailable</body></html>", "text/html"
        if parts[:2] == ["pypi", "simple"] and len(parts) == 3:
            names = [n for n in self.pypi_files() if self.specs[n].name == parts[2]]
            return (200, self._project_page(names, "../../files/"), "text/html") if names else (404, b"not found", "text/html")
        if parts[:2] == ["pypi", "files"] and len(parts) == 3 and parts[2] in self.pypi_files():
            return 200, self.wheels[parts[2]], "application/octet-stream"
        if parts[:2] == ["torch", "whl"] and len(parts) == 4:
            variant, project = parts[2], parts[3]
            names = [n for n in self.variant_files(variant) if self.specs[n].name == project]
            # the PyTorch index mirrors torch's dependencies too (PACKAGE_LINKS_ALLOW_LIST)
            names += [n for n in self.pypi_files() if self.specs[n].name == project and project != "torch"]
            return (200, self._project_page(names, "../files/"), "text/html") if names else (404, b"not found", "text/html")
        if parts[:2] == ["torch", "whl"] and len(parts) == 5 and parts[3] == "files" and parts[4] in self.wheels:
            return 200, self.wheels[parts[4]], "application/octet-stream"
        if parts[:1] == ["pytorch-wheels"] and len(parts) == 2:
            names = self.variant_files(parts[1])
            return (200, self._autoindex(f"/pytorch-wheels/{parts[1]}/", names), "text/html") if names else (404, b"not found", "text/html")
        if parts[:1] == ["pytorch-wheels"] and len(parts) == 3 and parts[2] in self.variant_files(parts[1]):
            return 200, self.wheels[parts[2]], "application/octet-stream"
        return 404, b"not found", "text/html"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with srv.lock:
                    srv.hits[urllib.parse.urlsplit(self.path).path] += 1
                status, body, ctype = srv.route(self.path)
                need = next((cred for prefix, cred in srv.auth.items() if self.path.startswith(prefix)), None)
                if need is not None:
                    want = "Basic " + base64.b64encode(f"{need[0]}:{need[1]}".encode()).decode()
                    if self.headers.get("Authorization") != want:
                        with srv.lock:
                            srv.refused += 1
                        status, body, ctype = 401, b"credentials required", "text/plain"
                extra: dict[str, str] = {}
                if srv.validators and status == 200 and ctype == "text/html":
                    import hashlib

                    extra = {"ETag": f'"{hashlib.sha256(body).hexdigest()[:16]}"', "Last-Modified": "Tue, 01 Sep 2026 00:00:00 GMT"}
                    if self.headers.get("If-None-Match") == extra["ETag"]:
                        with srv.lock:
                            srv.not_modified += 1
                        status, body = 304, b""
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="stackdoctor-tests"')
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self) -> None:
                self.do_GET()

        return Handler

    def start(self) -> SourceServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
