"""Kernel and collective faults with real torch (the CPU build in STACKDOCTOR_TEST_TORCH_PYTHON / ``torch_python``),
driven by the workers' test hooks (STACKDOCTOR_TEST_HOOK, see stackdoctor/_worker/sd_kernels.py and
sd_allreduce.py): NaN results, an aborting kernel process, an allreduce peer that never joins, the
rendezvous port already taken. Each is a failing finding (exit 1) with one clear message.
"""

from __future__ import annotations

import json
import socket

import pytest
from helpers import machine_env, run_sd

from .conftest import BOUND_S, assert_others_intact, check, finding, pin

pytestmark = pytest.mark.slow

# allreduce: the worker waits --timeout for peers; the parent's outer bound per rank is
# 2 * timeout + 30 s (stackdoctor/verify/runner.py run_allreduce_local).
AR_TIMEOUT = 2
AR_BOUND_S = 2 * AR_TIMEOUT + 30 + 15


def kernels_cli(m, torch_python: str, *args: str, hook: str, timeout: float = 120):
    env = machine_env(m.bindir, m.sysroot, STACKDOCTOR_TEST_HOOK=hook)
    run = run_sd(["kernels", *args, "--python", torch_python, "--json"], env=env, timeout=timeout)
    doc = json.loads(run.stdout)
    assert doc["schema"] == "stackdoctor.kernels/1"
    return run, doc


def test_kernel_returns_nan(machine, torch_python):
    """The quick kernel pass inside ``check``: NaN in matmul is a failing finding; nothing else is lost."""
    run, data = check(machine, "--timeout", "1", "--torch-timeout", "60", python=torch_python, env=machine.env(STACKDOCTOR_TEST_HOOK="nan"), fast=False)
    # one per matmul result; and the suite's torch venv has no NumPy, which torch's import warns of
    pin(run, data, 1, ("fail", "kernel-wrong-result"), ("fail", "kernel-wrong-result"), ("warn", "torch-numpy-missing"))
    k = data["facts"]["kernels"]
    assert k["ran"] is True
    bad = [r for r in k["results"] if r["kernel"] == "matmul"]
    assert bad and all(r["ok"] is False and "NaN" in r["error"] for r in bad)
    assert any(r["kernel"] == "conv" and r["ok"] for r in k["results"])  # the other kernel still ran and passed
    wrong = [f for f in data["findings"] if f["code"] == "kernel-wrong-result"]
    assert all("\n" not in f["title"] and f["detail"].startswith("matmul ") and " on cpu returned wrong numbers: the result has NaN or Inf values" in f["detail"]
               for f in wrong), wrong
    assert all("torch.__config__.show()" in f["fix"] and "nvidia-smi" not in f["fix"] for f in wrong), wrong  # a CPU's fix, not a GPU's
    assert data["facts"]["torch"]["version"] == "2.13.0+cpu"
    assert_others_intact(data)


@pytest.mark.posix
def test_kernel_process_aborts(machine, torch_python):
    run, doc = kernels_cli(machine, torch_python, "matmul", "--device", "cpu", "--sizes", "32", "--timeout", "60", hook="abort")
    assert run.rc == 1 and run.elapsed < BOUND_S
    assert "SIGABRT" in (doc.get("signal") or "") + (doc.get("error") or ""), doc
    assert [(f["severity"], f["code"]) for f in doc["findings"] if f["severity"] != "ok"] == [("fail", "kernel-failed")], doc["findings"]
    f = finding(doc, "kernel-failed", "test hook: calling os.abort()", title="A kernel failed to run")
    assert "SIGABRT" in f["detail"], f["detail"]  # the title stays one per code; the signal is in the detail
    assert f["fix"]


@pytest.fixture(scope="module")
def allreduce_runs(tmp_path_factory, torch_python):
    """Both allreduce faults, run once and side by side: each is stopped as soon as another rank has reported."""
    from concurrent.futures import ThreadPoolExecutor

    from .conftest import make_machine

    m = make_machine(tmp_path_factory.mktemp("ar") / "machine", torch_python)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    common = ("allreduce", "--nproc", "2", "--timeout", str(AR_TIMEOUT), "--max-bytes", "64K", "--iters", "1")
    with ThreadPoolExecutor(2) as pool:
        never = pool.submit(kernels_cli, m, torch_python, *common, hook="hang-rank=1")
        taken = pool.submit(kernels_cli, m, torch_python, *common, "--master-port", str(port), hook="")
        out = {"never_joins": never.result(), "port_in_use": taken.result(), "port": port}
    s.close()
    return out


def test_allreduce_peer_never_joins(allreduce_runs):
    run, doc = allreduce_runs["never_joins"]
    assert run.rc == 1 and run.elapsed < AR_BOUND_S, run.elapsed
    ar = doc["allreduce"]
    assert ar["status"] == "timeout" and ar["missing_ranks"] == [1]
    fails = [f for f in doc["findings"] if f["severity"] != "ok"]
    assert [(f["severity"], f["code"]) for f in fails] == [("fail", "allreduce-timeout")]
    assert "Rank(s) 1 never joined" in fails[0]["detail"] and "\n" not in fails[0]["title"] and fails[0]["fix"]


def test_allreduce_port_in_use(allreduce_runs):
    """The rendezvous port is taken: a failed allreduce naming the port and the error, quickly (not a wait for peers)."""
    run, doc = allreduce_runs["port_in_use"]
    port = allreduce_runs["port"]
    assert run.rc == 1 and run.elapsed < AR_TIMEOUT + 20, run.elapsed
    ar = doc["allreduce"]
    assert ar["status"] == "failed"
    assert "address already in use" in ar["error"].lower() and str(port) in ar["error"]
    assert [(f["severity"], f["code"]) for f in doc["findings"] if f["severity"] != "ok"] == [("fail", "allreduce-failed")], doc["findings"]
    f = finding(doc, "allreduce-failed", str(port))
    assert "address already in use" in f["detail"].lower() and "never joined" not in f["detail"]
