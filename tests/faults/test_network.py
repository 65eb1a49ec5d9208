"""Network faults seen by ``stackdoctor install``'s index check, against a real HTTP index on 127.0.0.1
(tests/indexserver.py; the same server and seeded venv fixtures as tests/test_install.py, reused).

Every fault: exit 2, one sentence naming the URL's problem, quickly, and the venv unchanged
(its fake torch 2.12.0+cu126 still there and still importing).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from test_install import BEFORE, family, imports_fake_torch, isolated_env, py, seeded, server, venv  # noqa: F401  (fixtures)

from .conftest import BOUND_S

REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def install(venv_dir, base: str, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_MATRIX"] = ""
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", py(venv_dir), "--torch", "2.13.0", "--variant", "cu130",
         "--index-base", base, "--index-timeout", "2", "--yes", *extra],
        env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
    )
    p.elapsed = time.monotonic() - start  # type: ignore[attr-defined]
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def assert_index_fault(p: subprocess.CompletedProcess, venv_dir, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert p.elapsed < BOUND_S, p.elapsed  # type: ignore[attr-defined]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("stackdoctor: ")]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), (n, lines[0])
    assert family(venv_dir) == BEFORE  # nothing changed
    assert imports_fake_torch(venv_dir) == BEFORE["torch"]
    return lines[0]


def test_index_404(server, venv, tmp_path):
    assert_index_fault(install(venv, server.base("nosuchmode"), tmp_path), venv, "HTTP 404")


def test_index_500(server, venv, tmp_path):
    assert_index_fault(install(venv, server.base("e500"), tmp_path), venv, "HTTP 500")


def test_index_time_out(server, venv, tmp_path):
    p = install(venv, server.base("slow"), tmp_path)
    assert_index_fault(p, venv, "did not answer in 2 s")


def test_index_connection_refused(venv, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    assert_index_fault(install(venv, f"http://127.0.0.1:{port}/whl", tmp_path), venv, "cannot connect")


def test_index_invalid_html(server, venv, tmp_path):
    assert_index_fault(install(venv, server.base("garbage"), tmp_path), venv, "not a package index page")


@pytest.mark.parametrize("mode", ["huge", "hugelen"])
def test_index_1gb_response(server, venv, tmp_path, mode):
    """A 1 GiB page (streamed, with and without Content-Length): cut off at the cap, never read whole."""
    p = install(venv, server.base(mode), tmp_path)
    assert_index_fault(p, venv, "larger than any package page")
    assert p.elapsed < 20  # type: ignore[attr-defined]


def test_index_redirect_loop(server, venv, tmp_path):
    assert_index_fault(install(venv, server.base("loop"), tmp_path), venv, "redirects in a loop")
