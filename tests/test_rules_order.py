"""The rules' order is public: findings of one severity are shown (and written in JSON) in run order, and
``check --list-checks`` / ``explain`` list the codes in registry order. A rule that moves into its kind's package
declares where it sits (``after`` / ``before`` a code, ``precedes``), so moving one changes neither; this test holds
both orders as they were before the kinds' rules left ``stackdoctor/rules/`` (issue 45)."""

import json
import subprocess
import sys

REGISTRY_ORDER = [
    "driver-missing", "driver-library-mismatch", "source-conflict", "wsl-driver", "amdgpu-not-loaded",
    "rocm-kfd-permission", "gpu-lost", "gpu-ecc-errors", "gpu-throttled", "gpu-persistence-off", "kernel-failed",
    "kernel-wrong-result", "kernel-slow", "allreduce-timeout", "allreduce-failed", "allreduce-slow",
    "thunderbolt-bridge-loop", "thunderbolt-rdma-disabled", "thunderbolt-link-slow", "thunderbolt-link-local-ip",
    "platform-ok", "driver-ok", "gpu-ok", "python-ok", "torch-ok", "runtime-ok", "runtime-not-verified",
    "toolkit-ok", "network-ok", "torch-numpy-abi", "torch-companion-pin", "container-no-gpu", "glibc-too-old",
    "probe-timeout", "probe-failed", "python-unsupported", "pynvml-deprecated", "requirement-unmet",
    "requirements-ok", "cuda-visible-devices-hides-all", "lib-path-shadowing", "runtime-error-code",
    "cuda-unavailable", "torch-lib-stale", "torch-import-failed", "install-unfinished", "install-in-progress",
    "install-unprinted", "install-backup-left", "torch-missing", "torch-files-unreadable", "torch-files-partial",
    "torch-installed-twice", "torch-cpu-only", "torch-backend-mismatch", "torchvision-mismatch",
    "torchaudio-mismatch", "torch-arch-list-mismatch", "jetson-wrong-wheel", "macos-x86-torch-too-new",
    "conda-pip-mix", "torch-numpy-missing", "torch-newer-than-matrix", "driver-too-old", "driver-minor-compat",
    "gpu-arch-unsupported", "nvcc-mismatch", "torch-gpu-build-no-gpu", "libcuda-stub", "rocm-gfx-unsupported",
    "xpu-unavailable", "mps-unavailable", "ascend-torch-npu-missing", "ascend-torch-npu-mismatch",
    "ascend-cann-missing", "ascend-cann-not-sourced", "ascend-cann-too-old", "ascend-driver-missing",
    "ascend-container-devices", "ascend-devices-hidden", "ascend-npu-unavailable",
]

RUN_ORDER = [
    "driver-library-mismatch", "source-conflict", "wsl-driver", "amdgpu-not-loaded", "rocm-kfd-permission",
    "gpu-ecc-errors", "gpu-throttled", "gpu-persistence-off", "kernel-failed", "kernel-wrong-result", "kernel-slow",
    "allreduce-timeout", "allreduce-failed", "allreduce-slow", "thunderbolt-bridge-loop",
    "thunderbolt-rdma-disabled", "thunderbolt-link-slow", "thunderbolt-link-local-ip", "torch-numpy-abi",
    "container-no-gpu", "driver-missing", "gpu-lost", "glibc-too-old", "probe-timeout", "probe-failed",
    "python-unsupported", "pynvml-deprecated", "requirement-unmet", "requirements-ok",
    "cuda-visible-devices-hides-all", "lib-path-shadowing", "torch-lib-stale", "install-unfinished",
    "install-in-progress", "install-unprinted", "install-backup-left", "torch-missing", "torch-files-unreadable",
    "torch-files-partial", "torch-installed-twice", "torch-cpu-only", "torch-backend-mismatch",
    "torchvision-mismatch", "torchaudio-mismatch", "torch-companion-pin", "torch-arch-list-mismatch",
    "jetson-wrong-wheel", "macos-x86-torch-too-new", "conda-pip-mix", "torch-numpy-missing",
    "torch-newer-than-matrix", "driver-too-old", "driver-minor-compat", "gpu-arch-unsupported", "nvcc-mismatch",
    "torch-gpu-build-no-gpu", "libcuda-stub", "rocm-gfx-unsupported", "runtime-error-code", "cuda-unavailable",
    "torch-import-failed", "xpu-unavailable", "mps-unavailable", "ascend-torch-npu-missing",
    "ascend-torch-npu-mismatch", "ascend-cann-missing", "ascend-cann-not-sourced", "ascend-cann-too-old",
    "ascend-driver-missing", "ascend-container-devices", "ascend-devices-hidden", "ascend-npu-unavailable",
    "platform-ok", "driver-ok", "gpu-ok", "python-ok", "torch-ok", "runtime-ok", "runtime-not-verified",
    "toolkit-ok", "network-ok",
]


# asked of a fresh interpreter: other tests declare plug-in rules and re-import kinds' rule modules in this one
_ASK = """
import json
from stackdoctor.rules import REGISTRY, ordered
shipped = {c for c, r in REGISTRY.items() if r.fn.__module__.startswith("stackdoctor.")}
print(json.dumps({
    "registry": [c for c in REGISTRY if c in shipped],
    "run": [r.code for r in ordered() if r.code in shipped],
    "probe-failed": list(REGISTRY["probe-failed"].defers_to),
    "torch-import-failed": list(REGISTRY["torch-import-failed"].defers_to),
}))
"""


def _orders():
    out = subprocess.run([sys.executable, "-c", _ASK], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_registry_and_run_order_are_kept():
    orders = _orders()
    assert orders["registry"] == REGISTRY_ORDER
    assert orders["run"] == RUN_ORDER
    # rocm-kfd-permission (AMD's) says it precedes probe-failed and torch-import-failed, which name no kind
    assert "rocm-kfd-permission" in orders["probe-failed"]
    assert {"driver-too-old", "gpu-arch-unsupported", "rocm-gfx-unsupported", "rocm-kfd-permission"} <= set(orders["torch-import-failed"])
