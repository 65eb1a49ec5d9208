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
from .conftest import BOUND_S, assert_others_intact, check, one_clear_message

pytestmark = pytest.mark.slow

# allreduce: the worker waits --timeout for peers; the parent's outer bound per rank is
# 2 * timeout + 30 s (stackdoctor/kernels.py run_allreduce_local).
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
    assert run.rc == 1
    k = data["facts"]["kernels"]
    assert k["ran"] is True
    bad = [r for r in k["results"] if r["kernel"] == "matmul"]
    assert bad and all(r["ok"] is False and "NaN" in r["error"] for r in bad)
    assert any(r["kernel"] == "conv" and r["ok"] for r in k["results"])  # the other kernel still ran and passed
    assert {f["code"] for f in data["findings"] if f["severity"] == "fail"} == {"kernel-wrong-result"}
    one_clear_message(data, "matmul", "wrong numbers")
    assert data["facts"]["torch"]["version"] == "2.13.0+cpu"
    assert_others_intact(data)


@pytest.mark.posix
def test_kernel_process_aborts(machine, torch_python):
    run, doc = kernels_cli(machine, torch_python, "matmul", "--device", "cpu", "--sizes", "32", "--timeout", "60", hook="abort")
    assert run.rc == 1 and run.elapsed < BOUND_S
    assert "SIGABRT" in (doc.get("signal") or "") + (doc.get("error") or ""), doc
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert len(fails) == 1 and "SIGABRT" in fails[0]["title"] + fails[0]["detail"], fails
    assert "\n" not in fails[0]["title"]


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
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert [f["code"] for f in fails] == ["allreduce-timeout"]
    assert "Rank(s) 1 never joined" in fails[0]["detail"] and fails[0]["fix"]


def test_allreduce_port_in_use(allreduce_runs):
    run, doc = allreduce_runs["port_in_use"]
    port = allreduce_runs["port"]
    assert run.rc == 1 and run.elapsed < AR_BOUND_S, run.elapsed
    ar = doc["allreduce"]
    assert ar["status"] in ("failed", "timeout")
    assert "address already in use" in ar["error"].lower() and str(port) in ar["error"]
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert len(fails) == 1 and "address already in use" in fails[0]["detail"].lower()


def test_allreduce_port_in_use_is_named_and_quick(allreduce_runs):
    run, doc = allreduce_runs["port_in_use"]
    fails = [f for f in doc["findings"] if f["severity"] == "fail"]
    assert doc["allreduce"]["status"] == "failed"
    assert "never joined" not in fails[0]["detail"]
    assert run.elapsed < AR_TIMEOUT + 20
