"""install's post-install verdict comes from the accelerator registry (issue 25): each kind's ``builds(variant)``
and ``verify(verification)`` (``accelerators.verify_install``), with every built-in sentence as it was.

The oracle is the verdict as ``install.judge`` spelt it out per built-in kind before the registry answered
(frozen here, verbatim): over every pairing of accelerator, variant and what torch said, the registry's sentence
must be the same, word for word."""

from __future__ import annotations

import pytest

from stackdoctor import kinds
from stackdoctor.install import verify as install_verify
from stackdoctor.model.plan import Plan, PlannedPackage


def old_judge_tail(plan: Plan, v: install_verify.Verification, accelerator: str | None) -> tuple[bool, str]:
    """install.judge's kind-specific block before issue 25, step 2 (commit 0c31a6f), verbatim."""
    got = f"torch {v.version} imports in the target"
    variant = plan.variant or ""
    gpu_variant = variant.startswith(("cu", "rocm", "jetson")) or variant == "xpu"
    if accelerator in ("cuda", "rocm") and gpu_variant and variant != "xpu":
        if v.cuda_available and v.cuda_ok is not False:
            return True, f"{got} and runs on {v.device_name or 'the GPU'}"
        why = v.cuda_error or (v.warnings[0] if v.warnings else "torch.cuda.is_available() is False")
        return False, f"{got}, but the GPU is not usable from it: {why}; run `stackdoctor check`"
    if accelerator == "xpu" and variant == "xpu":
        return (True, f"{got} and sees the Intel GPU") if v.xpu_available else (False, f"{got}, but torch.xpu.is_available() is False; run `stackdoctor check`")
    if accelerator == "mps":
        return (True, f"{got} and MPS is available") if v.mps_available else (False, f"{got}, but MPS is not available; run `stackdoctor check`")
    if gpu_variant:
        return True, f"{got} (no matching GPU on this machine, so the accelerator was not tried)"
    return True, got


def plan(variant: str | None) -> Plan:
    return Plan(torch_version="2.13.0", variant=variant, index_url=None,
                packages=[PlannedPackage(name="torch", version="2.13.0", variant=None, index_url=None)])  # "torch==2.13.0"


VARIANTS = ["cu130", "cu126", "rocm7.2", "xpu", "jetson-jp6-cu126", "cpu", None]
SAID = {
    "cuda-runs": dict(cuda_available=True, cuda_ok=True, device_name="NVIDIA GeForce RTX 4090"),
    "cuda-runs-unnamed": dict(cuda_available=True),
    "cuda-add-wrong": dict(cuda_available=True, cuda_ok=False, cuda_error=None, warnings=[]),
    "cuda-error": dict(cuda_available=False, cuda_error="RuntimeError: CUDA unknown error"),
    "cuda-warning": dict(cuda_available=False, warnings=["CUDA initialization: driver too old"]),
    "cuda-nothing": dict(cuda_available=False),
    "xpu": dict(xpu_available=True),
    "no-xpu": dict(xpu_available=False),
    "mps": dict(mps_available=True),
    "no-mps": dict(mps_available=None),
}
# the pairs commands.install.accelerator_seen gives (a built-in kind's backend for a variant it serves, "mps" on
# a Mac whatever the variant, Jetson's "cuda" for its own and cu variants), and None for every variant
SEEN = [("cuda", "cu130"), ("cuda", "cu126"), ("cuda", "jetson-jp6-cu126"), ("rocm", "rocm7.2"), ("xpu", "xpu"),
        *[("mps", v) for v in VARIANTS], *[(None, v) for v in VARIANTS]]


@pytest.mark.parametrize(("accelerator", "variant"), SEEN)
@pytest.mark.parametrize("said", sorted(SAID))
def test_every_built_in_sentence_is_unchanged(accelerator, variant, said):
    v = install_verify.Verification(imported=True, version="2.13.0", **SAID[said])
    assert install_verify.judge(plan(variant), v, accelerator) == old_judge_tail(plan(variant), v, accelerator)


def test_the_sentences_word_for_word():
    cu, v = plan("cu130"), install_verify.Verification
    assert install_verify.judge(cu, v(imported=True, version="2.13.0", cuda_available=True, cuda_ok=True, device_name="NVIDIA H200"), "cuda") == (
        True, "torch 2.13.0 imports in the target and runs on NVIDIA H200")
    assert install_verify.judge(cu, v(imported=True, version="2.13.0", cuda_available=False), "cuda") == (
        False, "torch 2.13.0 imports in the target, but the GPU is not usable from it: torch.cuda.is_available() is False; run `stackdoctor check`")
    assert install_verify.judge(plan("xpu"), v(imported=True, version="2.13.0", xpu_available=False), "xpu") == (
        False, "torch 2.13.0 imports in the target, but torch.xpu.is_available() is False; run `stackdoctor check`")
    assert install_verify.judge(plan("xpu"), v(imported=True, version="2.13.0", xpu_available=True), "xpu") == (True, "torch 2.13.0 imports in the target and sees the Intel GPU")
    assert install_verify.judge(plan("cpu"), v(imported=True, version="2.13.0"), "mps") == (False, "torch 2.13.0 imports in the target, but MPS is not available; run `stackdoctor check`")
    assert install_verify.judge(plan("rocm7.2"), v(imported=True, version="2.13.0"), None) == (
        True, "torch 2.13.0 imports in the target (no matching GPU on this machine, so the accelerator was not tried)")
    assert install_verify.judge(plan("cpu"), v(imported=True, version="2.13.0"), None) == (True, "torch 2.13.0 imports in the target")


def test_the_version_and_import_checks_come_first():
    v = install_verify.Verification(imported=True, version="2.12.0", cuda_available=True, cuda_ok=True)
    ok, msg = install_verify.judge(plan("cu130"), v, "cuda")
    assert not ok and msg.startswith("the target imports torch 2.12.0, not the planned 2.13.0")
    assert install_verify.judge(plan("cu130"), install_verify.Verification(error="ImportError: libcudart.so.13"), "cuda") == (
        False, "torch does not import in the target: ImportError: libcudart.so.13")


@pytest.mark.parametrize(("name", "variant", "builds"), [
    ("nvidia", "cu130", True), ("nvidia", "rocm7.2", False), ("jetson", "jetson-jp6-cu126", True), ("jetson", "cu126", False),
    ("amd", "rocm7.2", True), ("amd", "cu126", False), ("intel", "xpu", True), ("intel", "cpu", False), ("apple", "cpu", True),
    ("nvidia", None, False), ("amd", "", False),
])
def test_builds(name, variant, builds):
    acc = kinds.by_name(name)
    assert acc is not None and acc.builds(variant) is builds


def test_each_kind_verifies_through_its_own_answer():
    """Each kind reads its own answer: a verification where only one API says yes is a yes for that kind alone."""
    for name, field in [("nvidia", "cuda_available"), ("amd", "cuda_available"), ("jetson", "cuda_available"), ("intel", "xpu_available"), ("apple", "mps_available")]:
        acc = kinds.by_name(name)
        assert acc is not None
        for other in {"cuda_available", "xpu_available", "mps_available"}:
            verdict = acc.verify(install_verify.Verification(imported=True, **{other: True}))
            assert verdict is not None and verdict[0] is (other == field), (name, other, verdict)


def test_a_kind_known_only_to_the_registry_is_verified_by_its_declaration(monkeypatch):
    """A kind outside the built-in ones (declared here) is verified from its torch_api's answer in
    Verification.available; with none, the registry has no verdict and judge falls back on the variant's kind."""

    class Npu(kinds.Accelerator):
        name, vendor, subject, label, backend, build_kind = "npu", "npu", "npu", "Test NPU", "npu", "npu"  # type: ignore[assignment]
        variant_prefixes, variant_pattern, available_field, torch_api = (), r"^npu\d+$", "", "npu"

    monkeypatch.setattr(kinds, "ALL", (*kinds.ALL, Npu()))
    assert kinds.torch_questions()["npu"] == "npu"  # beside the bundled kinds' questions
    p = plan("npu2")
    yes = install_verify.Verification(imported=True, version="2.13.0", available={"npu": True})
    assert install_verify.judge(p, yes, "npu") == (True, "torch 2.13.0 imports in the target and sees the Test NPU")
    no = install_verify.Verification(imported=True, version="2.13.0", available={"npu": False}, available_errors={"npu": "UserWarning: no firmware"})
    assert install_verify.judge(p, no, "npu") == (False, "torch 2.13.0 imports in the target, but torch.npu.is_available() is False (UserWarning: no firmware); run `stackdoctor check`")
    lacking = install_verify.Verification(imported=True, version="2.13.0", available_errors={"npu": "torch has no torch.npu"})
    assert install_verify.judge(p, lacking, "npu") == (False, "torch 2.13.0 imports in the target, but torch.npu.is_available() could not be asked: torch has no torch.npu; run `stackdoctor check`")
    unasked = install_verify.Verification(imported=True, version="2.13.0")
    assert install_verify.judge(p, unasked, "npu") == (True, "torch 2.13.0 imports in the target (no matching GPU on this machine, so the accelerator was not tried)")
    assert install_verify.judge(plan("cu130"), yes, "npu") == (True, "torch 2.13.0 imports in the target (no matching GPU on this machine, so the accelerator was not tried)")
