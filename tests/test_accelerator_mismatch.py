"""torch-backend-mismatch is derived from the accelerator registry (issue 25): the installed build targets a kind
(``Accelerator.targeted``) with no device here, while another kind's device needs a build of its own
(``Accelerator.needs_build``: present, and usable or a discrete GPU).

The oracle is the rule's former hand-written pairs (ROCm build with NVIDIA and no discrete AMD, CUDA build with a
discrete AMD and no NVIDIA, XPU build with either and no Intel), frozen here: on every machine of
tests/fixtures/machines and every GPU build the verdict is the same, with one intended change — a CUDA or ROCm build
on a machine whose only GPU torch could use is an Intel XPU one (the Arc A770) is now flagged, naming Intel and the
XPU build that the resolver plans."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from stackdoctor import kinds, rules
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, GpuView, TorchFacts, from_data
from stackdoctor.reconcile import reconcile

MATRIX = load_matrix([])
MACHINES = sorted((Path(__file__).parent / "fixtures" / "machines").glob("*.json"))
BUILDS = {
    "cu130": dict(version="2.13.0+cu130", variant="cu130", cuda="13.0"),
    "rocm7.2": dict(version="2.13.0+rocm7.2", variant="rocm7.2", hip="7.2.26015"),
    "xpu": dict(version="2.13.0+xpu", variant="xpu"),
    "cpu": dict(version="2.13.0+cpu", variant="cpu"),
}


def with_build(facts: Facts, build: str) -> Facts:
    f = copy.deepcopy(facts)
    f.torch = TorchFacts(installed=True, imported=False, distributions={"torch": BUILDS[build]["version"]}, **BUILDS[build])
    return f


def old_pairs(f: Facts) -> bool:
    """rules/torch.py's torch-backend-mismatch before the registry answered (commit 0c31a6f), on reconciled facts."""
    kind = kinds.build_kind(f.torch)
    if kind is None or kind == "cpu" or f.jetson.is_jetson:
        return False
    has_nv = any(g.vendor == "nvidia" for g in f.reconciled.gpus) or any((d.class_id or "").lower().startswith("0x03") for d in f.platform.nvidia_pci_devices)
    has_amd = any(not g.integrated for g in f.reconciled.gpus if g.vendor == "amd")
    has_intel = bool(f.intel.gpus)
    return (kind == "rocm" and has_nv and not has_amd) or (kind == "cuda" and has_amd and not has_nv) or (kind == "xpu" and (has_nv or has_amd) and not has_intel)


def mismatch(f: Facts) -> list[rules.Finding]:
    return [x for x in rules.judge(f, MATRIX, strict=True) if x.code == "torch-backend-mismatch"]


def machine(path: Path) -> Facts:
    return from_data(Facts, json.loads(path.read_text())["facts"])


@pytest.mark.parametrize("build", sorted(BUILDS))
@pytest.mark.parametrize("case", MACHINES, ids=[m.stem for m in MACHINES])
def test_the_registry_keeps_the_old_verdicts_but_one(case, build):
    f = reconcile(with_build(machine(case), build), MATRIX)
    found = mismatch(f)
    intel_only = kinds.by_name("intel").usable(f.facts) and not any(g.vendor in ("nvidia", "amd") and not g.integrated for g in f.reconciled.gpus)  # type: ignore[union-attr]
    if build in ("cu130", "rocm7.2") and intel_only:
        assert not old_pairs(f.facts) and len(found) == 1, (case.stem, build)  # the intended change
        assert "Intel" in found[0].detail and "--variant xpu" in (found[0].fix or ""), found[0]
    else:
        assert bool(found) == old_pairs(f.facts), (case.stem, build, [x.detail for x in found])


def test_a_cuda_build_on_an_intel_arc_machine_is_now_a_mismatch():
    f = reconcile(with_build(machine(Path(__file__).parent / "fixtures" / "machines" / "intel-arc-a770.json"), "cu130"), MATRIX)
    (hit,) = mismatch(f)
    assert hit.severity == "fail"
    assert "torch 2.13.0+cu130 is a CUDA build" in hit.detail and "Intel" in hit.detail, hit.detail
    assert "--variant xpu" in (hit.fix or ""), hit.fix
    # and the CPU-build rule does not say it twice
    assert "torch-gpu-build-no-gpu" not in {x.code for x in rules.judge(f, MATRIX, strict=True)}


def test_an_intel_gpu_torch_cannot_use_is_no_reason_for_another_build():
    """A CUDA build on a machine whose only GPU is an Intel one of a family the matrix does not list (so neither
    XPU-capable nor known to be integrated): no mismatch (the CUDA-build-without-a-GPU rule speaks instead)."""
    f = machine(Path(__file__).parent / "fixtures" / "machines" / "intel-arc-a770.json")
    for g in f.intel.gpus:
        g.device_id, g.name, g.xpu, g.discrete = "0xffff", None, None, None
    f = reconcile(with_build(f, "cu130"), MATRIX)
    assert [g.xpu for g in f.facts.intel.gpus] == [None]
    assert not kinds.by_name("intel").needs_build(f.facts)  # type: ignore[union-attr]
    assert mismatch(f) == []
    assert "torch-gpu-build-no-gpu" in {x.code for x in rules.judge(f, MATRIX, strict=True)}


def test_a_build_for_a_kind_that_is_here_is_never_a_mismatch():
    """A machine with an NVIDIA and an AMD GPU: neither build is flagged (the build's own kind has a device)."""
    f = machine(Path(__file__).parent / "fixtures" / "machines" / "rtx3090-driver535.json")
    for build in ("cu130", "rocm7.2"):
        g = reconcile(with_build(f, build), MATRIX)
        g.reconciled.gpus.append(GpuView(vendor="amd", index=1, name="Radeon RX 7900 XTX", gfx="gfx1100", witnesses=["rocminfo"]))
        assert mismatch(g) == [], build
