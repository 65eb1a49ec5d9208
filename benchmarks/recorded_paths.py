"""How many recorded real torch error texts each path of `check` gets right (issue 42), for a before/after.

Every tests/fixtures/real/*/torch-error.txt (each with its public source in source.md) is judged twice, as
tests/test_recorded_error_codes.py builds the machine: the fast path (torch read from its files) and the import path
(torch's runtime started, the recorded text its answer). Right, on the import path: a failure is said, no "no NVIDIA
GPU" / "container without GPU" claim where the text is a driver's answer, and the error's number is named (or a finding
that already says it: driver-too-old, gpu-arch-unsupported). Right, on the fast path: not all-ok (a problem, or the
runtime said to be not verified), and nothing it claims is reversed by the import (a "not known" / "not verified" line
is no claim).

    python benchmarks/recorded_paths.py                       # this checkout
    PYTHONPATH=/tmp/base python benchmarks/recorded_paths.py  # an earlier commit's stackdoctor/ (git archive <c> stackdoctor compat_matrix)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real"
STAND_IN = {"cuda-runtime": ("2.4.1+cu121", "cu121", "12.1", None), "hip": ("2.5.1+rocm6.2", "rocm6.2", None, "6.2.41133")}
NO_GPU = {"torch-gpu-build-no-gpu", "container-no-gpu"}
SAYS_IT = {"driver-too-old", "gpu-arch-unsupported", "rocm-gfx-unsupported"}


def machine(case: Path, imported: bool):  # the same machine as tests/test_recorded_error_codes.py's
    from stackdoctor.model.facts import Facts, NvidiaGpu, PlatformFacts, TorchFacts

    y = yaml.safe_load(re.search(r"## Derived facts\s*```yaml\n(.*?)```", (case / "source.md").read_text(), re.S).group(1))
    f = Facts()
    c = y.get("container")
    f.platform = PlatformFacts(system="Linux", machine="x86_64", is_wsl="WSL" in str(y.get("os") or ""), container=c if c not in (None, "none", "unknown") else None)
    api = y.get("api") or "cuda-runtime"
    if y.get("driver_version") and api != "hip":
        f.nvidia.driver_version, f.nvidia.smi_state = str(y["driver_version"]), "ok"
        f.nvidia.cuda_driver_version = str(y["driver_max_cuda"]) if y.get("driver_max_cuda") else None
        f.nvidia.gpus = [NvidiaGpu(index=i, name=g.get("name")) for i, g in enumerate(y.get("gpus") or [])]
    version, variant, cuda, hip = STAND_IN["hip" if api == "hip" else "cuda-runtime"]
    given = y.get("torch_installed") if isinstance(y.get("torch_installed"), dict) else None
    if given and str(given.get("version", "")).startswith("2."):
        version, cuda = str(given["version"]), str(given.get("cuda") or cuda)
        variant = version.split("+", 1)[1] if "+" in version else f"cu{cuda.replace('.', '')}"
    f.torch = TorchFacts(installed=True, version=version, variant=variant, cuda=cuda, hip=hip, location="/venv/site-packages/torch", imported=imported)
    if imported:
        f.torch.cuda_available, f.torch.device_count = False, 0
        f.torch.cuda_error = (case / "torch-error.txt").read_text().strip()
    return f, y


def main() -> int:
    from stackdoctor.matrix import load_matrix
    from stackdoctor.rules.diagnose import diagnose

    m = load_matrix([])
    cases = sorted(p.parent for p in HERE.glob("*/torch-error.txt"))
    right = {"fast": 0, "import": 0}
    for case in cases:
        (ff, y), (fi, _) = machine(case, False), machine(case, True)
        fast, full = diagnose(ff, m), diagnose(fi, m)
        fp = {x.code: x for x in fast if x.severity in ("warn", "fail")}
        ip = {x.code: x for x in full if x.severity in ("warn", "fail")}
        number = y.get("error_number")
        named = number is None or any(re.search(rf"\b{number}\b", x.detail) for x in ip.values()) or bool(SAYS_IT & set(ip))
        ok_import = any(x.severity == "fail" for x in ip.values()) and not (number is not None and NO_GPU & set(ip)) and named
        reversed_ = [c for c in set(fp) - set(ip) if not re.search(r"not known|not verified", fp[c].detail)]
        ok_fast = bool(fp or any(x.code == "runtime-not-verified" for x in fast)) and not reversed_
        right["fast"] += ok_fast
        right["import"] += ok_import
        print(f"{case.name:55} fast {'ok ' if ok_fast else 'NO '} {sorted(fp)}  import {'ok ' if ok_import else 'NO '} {sorted(ip)}")
    print(f"right: fast path {right['fast']}/{len(cases)}, import path {right['import']}/{len(cases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
