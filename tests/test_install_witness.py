"""`stackdoctor install` with the index as a witness (issue 22), and the install flow as one value (issue 25).

A release nobody knows (a STAND-IN torch 2.16.0+cpu, tests/learnserver.py: a tiny wheel whose METADATA says it is
not PyTorch) is served on 127.0.0.1 as a PEP 503 index with PEP 658 metadata files, as a find-links page, or sits
in a local folder. The real CLI plans it, the reason saying where it was learned; a server that does not answer
leaves the matrix's plan with a warning; ``--offline`` asks nothing. The PyTorch index stackdoctor would add is a
closed port (download.pytorch.org unreachable, as on this build machine).
"""

from __future__ import annotations

import ast
import html
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import new_venv, run_stackdoctor
from learnserver import LearnIndex, standin_wheel, wheel_metadata

REPO = Path(__file__).resolve().parent.parent
PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
TAG = f"{PY}-{PY}-manylinux_2_28_x86_64"
DEAD = "http://127.0.0.1:9/whl"
LEARNED = "torch 2.16.0: not in the matrix; learned from {url} (its file names and core metadata)"

linux_x86_64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"), reason="the stand-in wheel is a manylinux x86_64 one"
)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("standin")
    standin_wheel(folder, "torch", "2.16.0+cpu", TAG, f">={sys.version_info.major}.{sys.version_info.minor}")
    return folder


@pytest.fixture(scope="module")
def learn_index(wheels):
    with LearnIndex(sorted(wheels.glob("*.whl"))) as idx:
        yield idx


class VariantIndex:
    """The PyTorch index's layout, ``<base>/<variant>/<project>/``, serving the stand-in with its metadata file."""

    def __init__(self, wheels: list[Path]) -> None:
        self.files = {w.name: w for w in wheels}
        self.meta = {w.name: wheel_metadata(w) for w in wheels}
        self.hits: Counter[str] = Counter()
        index = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = urllib.parse.unquote(self.path.split("?", 1)[0])
                index.hits[path] += 1
                parts = [p for p in path.split("/") if p]
                if len(parts) == 3 and parts[0] == "whl" and parts[2] == "torch":
                    names = [n for n in sorted(index.files) if f"+{parts[1]}-" in n]  # the variant's folder: its label
                    if not names:
                        return self.send_error(404)
                    links = "".join(
                        f'<a href="/files/{html.escape(urllib.parse.quote(n))}" data-core-metadata="true">{html.escape(n)}</a><br/>\n'
                        for n in names
                    )
                    return self._send(f"<!DOCTYPE html><html><body>\n{links}</body></html>".encode(), "text/html")
                if len(parts) == 2 and parts[0] == "files":
                    name = parts[1]
                    if name.endswith(".metadata") and name[: -len(".metadata")] in index.meta:
                        return self._send(index.meta[name[: -len(".metadata")]], "text/plain")
                    if name in index.files:
                        return self._send(index.files[name].read_bytes(), "application/octet-stream")
                self.send_error(404)

            def _send(self, body: bytes, ctype: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/whl"

    def __enter__(self) -> VariantIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "CONDA_", "STACKDOCTOR_", "XDG_"))}
    env.update(
        HOME=str(tmp), PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=DEAD + "/pypi", UV_NO_CONFIG="1", STACKDOCTOR_INDEX_BASE=DEAD, STACKDOCTOR_MATRIX="",
        STACKDOCTOR_CACHE_DIR=str(tmp / "sd-cache"), XDG_CONFIG_DIRS=str(tmp / "no-xdg"), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
    )
    env.update(extra)
    return env


def sd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    p = run_stackdoctor(
        [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, "--variant", "cpu", *args],
        env=env, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


# ---------------------------------------------------------------------------- the index as a witness


@linux_x86_64
@pytest.mark.parametrize("pin", [[], ["--torch", "2.16.0"]], ids=["unpinned", "pinned"])
def test_a_release_nobody_knows_on_a_find_links_page_is_planned_with_where_it_was_learned(learn_index, tmp_path, pin):
    page = learn_index.url + "/torch/"
    before = learn_index.hits["/simple/torch/"]
    p = sd(["--dry-run", "--json", "--find-links", page, *pin], user_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert learn_index.hits["/simple/torch/"] - before == 1  # asked once: the witness reads what the survey listed
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.16.0", "cpu"), plan["reasons"]
    assert plan["reasons"][0] == LEARNED.format(url=page)
    assert any("learned" in r and "from the index's own files" in r and "sha256:" in r for r in plan["reasons"]), plan["reasons"]
    assert plan["packages"][0]["wheel"] == f"torch-2.16.0+cpu-{TAG}.whl" and plan["packages"][0]["source"] == page
    assert plan["command"][-2:] == ["--find-links", page]
    assert learn_index.hits[f"/files/torch-2.16.0+cpu-{TAG}.whl"] == 0  # its metadata file was enough: no wheel fetched


@linux_x86_64
def test_the_pytorch_index_named_by_index_base_is_a_witness_and_the_plan_installs_from_it(wheels, tmp_path):
    with VariantIndex(sorted(wheels.glob("*.whl"))) as idx:
        p = sd(["--dry-run", "--index-base", idx.base], user_env(tmp_path))
        hits = Counter(idx.hits)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Plan for " in p.stdout and "torch 2.16.0 (cpu)" in p.stdout
    assert LEARNED.format(url=f"{idx.base}/cpu") in p.stdout
    assert f"--index-url {idx.base}/cpu" in p.stdout  # the learned build's index: the one that served it
    assert hits[f"/files/torch-2.16.0+cpu-{TAG}.whl.metadata"] == 1 and hits[f"/files/torch-2.16.0+cpu-{TAG}.whl"] == 0
    assert hits["/whl/cpu/torch/"] == 1  # the source survey's page, read once: the witness reads what it listed


def test_a_learned_cuda_build_is_planned_with_its_gpu_code_marked_inferred(tmp_path):
    """A what-if for an H100: the stand-in torch 2.16.0+cu132 on a find-links page (names and metadata, no binaries
    read) gets the GPU code of the nearest known cu132 build, and the plan's reasons say so."""
    standin_wheel(tmp_path, "torch", "2.16.0+cu132", "cp312-cp312-manylinux_2_28_x86_64", ">=3.10")
    what_if = ["--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--gpu", "H100", "--driver", "595.45.04"]
    with VariantIndex(sorted(tmp_path.glob("*.whl"))) as idx:
        p = subprocess.run(
            [sys.executable, "-m", "stackdoctor", "install", *what_if, "--find-links", f"{idx.base}/cu132/torch/", "--json"],
            env=user_env(tmp_path), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
        )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.16.0", "cu132"), plan["reasons"]
    assert plan["reasons"][0] == LEARNED.format(url=f"{idx.base}/cu132/torch/")
    assert any("; GPU code inferred: GPU code of torch " in r and " cu132 (the nearest known build of the same CUDA version)" in r for r in plan["reasons"]), plan["reasons"]
    # a find-links page is no index: the learned build keeps its variant's index, the wheel was found on the page
    assert plan["index_url"] == f"{DEAD}/cu132" and plan["packages"][0]["source"] == f"{idx.base}/cu132/torch/"
    assert plan["command"][:3] == ["python3", "-m", "pip"]


@linux_x86_64
def test_a_local_folder_teaches_offline_without_a_request(wheels, learn_index, tmp_path):
    before = sum(learn_index.hits.values())
    p = sd(["--dry-run", "--json", "--offline", "--find-links", str(wheels)], user_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == "2.16.0" and plan["reasons"][0] == LEARNED.format(url=str(wheels))
    assert plan["command"][-2:] == ["--find-links", str(wheels)]
    assert sum(learn_index.hits.values()) == before


@linux_x86_64
def test_offline_asks_the_server_nothing(learn_index, tmp_path):
    before = sum(learn_index.hits.values())
    page = learn_index.url + "/torch/"
    pinned = sd(["--dry-run", "--json", "--offline", "--find-links", page, "--torch", "2.16.0"], user_env(tmp_path))
    unpinned = sd(["--dry-run", "--json", "--offline", "--find-links", page], user_env(tmp_path))
    assert sum(learn_index.hits.values()) == before
    assert pinned.returncode == 1 and json.loads(pinned.stdout)["variant"] is None  # unknown, and nothing was asked
    assert "not in the compatibility matrix" in json.loads(pinned.stdout)["reasons"][0]
    plan = json.loads(unpinned.stdout)
    assert unpinned.returncode == 0 and plan["torch_version"] != "2.16.0"  # the matrix's plan
    assert any(w.startswith("the wheels were not checked:") for w in plan["warnings"]), plan["warnings"]


@linux_x86_64
def test_a_server_that_does_not_answer_leaves_the_matrix_plan_and_says_so(wheels, tmp_path):
    dead = f"http://127.0.0.1:{closed_port()}/simple"
    # pinned: the release stays unknown, the refusal is the matrix's, and a warning says the index did not answer
    p = sd(["--dry-run", "--json", "--torch", "2.16.0", "--find-links", dead + "/torch/"], user_env(tmp_path))
    assert p.returncode == 1, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["variant"] is None and "torch 2.16.0 is not in the compatibility matrix" in plan["reasons"][0]
    assert any(w.startswith(f"{dead}/torch/ did not answer (cannot connect to 127.0.0.1") for w in plan["warnings"]), plan["warnings"]
    assert "No torch build fits this request." in p.stderr
    # unpinned: a configured index that is down is skipped with a warning; the matrix's plan is served by a folder
    matrix_plan = json.loads(sd(["--dry-run", "--json", "--offline"], user_env(tmp_path)).stdout)["torch_version"]
    folder = tmp_path / "matrix-wheels"
    folder.mkdir()
    standin_wheel(folder, "torch", f"{matrix_plan}+cpu", TAG, ">=3.10")
    p = sd(["--dry-run", "--json", "--find-links", str(folder)], user_env(tmp_path, PIP_INDEX_URL=dead))
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == matrix_plan and not any(r.startswith("torch 2.16.0") for r in plan["reasons"])
    assert any(w.startswith(f"{dead} did not answer (") and w.endswith("it is skipped, not retried") for w in plan["warnings"]), plan["warnings"]


# ---------------------------------------------------------------------------- the flow is one value; the command is thin


def test_the_flow_returns_one_outcome_and_prints_nothing(tmp_path, capsys, monkeypatch):
    from stackdoctor.install.flow import InstallOptions, InstallOutcome, install
    from stackdoctor.install.options import MachineOptions, SourceOptions

    facts = json.loads((REPO / "tests" / "fixtures" / "machines" / "no-gpu-linux.json").read_text())["facts"]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    monkeypatch.setenv("STACKDOCTOR_INDEX_BASE", DEAD)
    # no pip configuration of this machine (a what-if asks the user's sources too: a PIP_FIND_LINKS folder would answer)
    for k in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    outcome = install(InstallOptions(dry_run=True, machine=MachineOptions(replay=str(report)), sources=SourceOptions(offline=True)))
    assert isinstance(outcome, InstallOutcome)
    assert outcome.error is None and outcome.exit_code == 0 and outcome.what == "dry-run"
    assert outcome.plan is not None and outcome.plan.variant == "cpu" and outcome.plan.command[:3] == ["python3", "-m", "pip"]
    assert outcome.hypothetical and outcome.plan.machine and any("were not checked" in w for w in outcome.warnings)
    bad = install(InstallOptions(installer="npm"))
    assert bad.exit_code == 2 and "--installer must be one of" in str(bad.error) and bad.plan is None
    assert capsys.readouterr() == ("", "")


def test_the_install_command_is_thin():
    path = REPO / "stackdoctor" / "commands" / "install.py"
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
    for heavy in ("availability", "resolve", "reconcile", "install", "install.transaction", "install.index", "learn", "install.conda",
                  "install.sources", "install.mirrors", "install.verify", "pipeline", "engine"):
        assert f"stackdoctor.{heavy}" not in imported, heavy
    modules = {n.module for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {a.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("stackdoctor.commands.") for m in modules)  # no command imports another (the package's shared helpers may)
    assert "stackdoctor.install.flow" in imported


@linux_x86_64
def test_a_learned_release_installs_into_a_fresh_venv_from_a_local_folder(tmp_path):
    """The whole way: a (FAKE, importable) torch 2.16.0+cpu in a find-links folder, --offline --yes: learned, planned,
    installed by real pip into a fresh venv, and verified by importing it there."""
    from indexserver import WheelSpec, _torch_files, build_wheel

    folder = tmp_path / "wheels"
    folder.mkdir()
    spec = WheelSpec("torch", "2.16.0+cpu", TAG, [], _torch_files("2.16.0+cpu"))
    (folder / spec.filename).write_bytes(build_wheel(spec))
    new_venv(tmp_path / "venv")
    target = str(tmp_path / "venv" / "bin" / "python")
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", target, "--variant", "cpu", "--offline", "--find-links", str(folder), "--yes", "--json"],
        env=user_env(tmp_path, PIP_CACHE_DIR=str(tmp_path / "pip-cache"), PIP_DISABLE_PIP_VERSION_CHECK="1"),
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == "2.16.0" and plan["reasons"][0] == LEARNED.format(url=str(folder))
    assert "done: " in p.stderr and "imports in the target" in p.stderr
    got = subprocess.run([target, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == "2.16.0+cpu"
