"""``kernels`` given a device the target's torch lacks, or a size that is none, is the user's input to fix (issue 35,
item 10): one sentence on stderr and exit 2, not a ``kernel-failed`` finding with a compiler's fix. Real CLI, the real
CPU build of torch (``torch_python``)."""

from __future__ import annotations

import json

import pytest
from helpers import run_sd


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cuda:0", "xpu:0", "tpu"])
def test_a_device_torch_does_not_have_is_one_sentence_and_exit_2(torch_python, device):
    r = run_sd(["kernels", "matmul", "--python", torch_python, "--device", device], timeout=180)
    assert r.rc == 2, (r.rc, r.stdout[-2000:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--device {device}" in lines[0] and "it has: cpu" in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "compiler" not in r.stdout + r.stderr


@pytest.mark.slow
def test_a_device_torch_does_not_have_under_json_is_an_error_document(torch_python):
    r = run_sd(["kernels", "matmul", "--python", torch_python, "--device", "cuda:0", "--json"], timeout=180)
    assert r.rc == 2, (r.rc, r.stderr[-2000:])
    doc = json.loads(r.stdout)
    assert doc["schema"].startswith("stackdoctor.error/") and "cuda:0" in json.dumps(doc), doc


@pytest.mark.parametrize("sizes", ["0", "64,0", "-8"])
def test_a_size_that_is_no_matmul_is_refused_before_torch_runs(sizes):
    r = run_sd(["kernels", "matmul", "--sizes", sizes], timeout=60)
    assert r.rc == 2, (r.rc, r.stderr[-2000:])
    assert len(r.stderr.strip().splitlines()) == 1 and "positive integer" in r.stderr, r.stderr


@pytest.mark.slow
def test_the_cpu_still_runs(torch_python):
    r = run_sd(["kernels", "matmul", "--python", torch_python, "--device", "cpu", "--sizes", "64"], timeout=180)
    assert r.rc == 0, (r.rc, r.stdout[-2000:], r.stderr[-2000:])
