"""Recorded real failures of the evidence classes of issue 42 (libraries as the loader finds them, the build's own GPU
code, pairs from their metadata), judged on both paths.

Each case is a folder of tests/fixtures/real/ whose ``source.md`` YAML has ``evidence_case``: a public bug report,
its verbatim output files and the facts it states. From them this module builds what each path would see:

- the fast path (``check --no-kernels``): torch read from its files only, so the versions, the companions' pins, the
  environment, the library GPU code the thread shows (``files``) and the linkage a reviewer derives from the recorded
  ``LD_LIBRARY_PATH`` (``expected_files_linkage``); never torch's own words;
- the import path (``check --no-kernels --import-torch``): the same, plus what torch said (``torch_said``: the verbatim
  file, put where the target worker puts that text) and the arch list torch printed.

A case must produce ``expected_finding`` on the import path and ``expected_fast_finding`` on the fast path (null: the
recording lacks what the files would show; then the fast path must not contradict the import path's finding with a
plain "ok" of the same layer). ``python tests/test_recorded_evidence.py`` prints how many cases each path gets right.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, LinkProblem, NvidiaGpu, RocmGpu, TorchFacts
from stackdoctor.rules.diagnose import diagnose

HERE = Path(__file__).resolve().parent
REAL = HERE / "fixtures" / "real"


def cases() -> list[tuple[str, dict]]:
    out = []
    for src in sorted(REAL.glob("*/source.md")):
        m = re.search(r"## Derived facts\s*```yaml\n(.*?)```", src.read_text(encoding="utf-8"), re.S)
        try:
            y = yaml.safe_load(m.group(1)) if m else None
        except yaml.YAMLError:  # another folder's block written for a human reader (not an evidence case)
            continue
        if isinstance(y, dict) and y.get("evidence_case"):
            out.append((src.parent.name, y))
    return out


CASES = cases()
# the cases by name (a new folder is added here too, so a folder that stops parsing is noticed)
NAMED = (
    "r-2x-rtx5090-sm120-torch270dev-cu124-pytorch-167244",
    "r-cudnn-incompat-850-833-co-gat-2",
    "r-cudnn-incompat-850-841-conda-gladia-928",
    "r-cudnn-incompat-870-824-torch201-cu118-kohya-ss-1096",
    "r-cudnn-incompat-870-860-torch201-cu118-audiocraft-186",
    "r-cudnn-ld-library-path-8.0.3-torch112-cu113-pytorch-80637",
    "r-numpy2-torch210-torch-npu-llamafactory-4382",
    "r-numpy2-torch22-macos-torchio-1183",
    "r-rtx5090-sm120-nix-forge-janrupf-9",
    "r-rtx5090-sm120-torch251-cu121-berkeley-humanoid-lite-49",
    "r-rx5700xt-gfx1010-rocm62-libtorch-hip-roc-obj-ls-pytorch-132570",
    "r-rx6700xt-gfx1031-override-rocm62-torch251-pytorch-132570",
    "r-rx7600xt-gfx1102-invalid-device-function-pytorch-147626",
    "r-torch-npu-280post2-beside-torch2120-sglang-28628",
    "r-torchvision-021-beside-torch251-vllm-ascend-479",
    "r-torchvision-023-beside-torch260-vision-9174",
)


def _said(case: str, y: dict) -> tuple[str | None, str]:
    said = y.get("torch_said") or {}
    if not said:
        return None, ""
    text = (REAL / case / said["file"]).read_text(encoding="utf-8")
    return said["field"], text


def facts_for(case: str, y: dict, imported: bool) -> Facts:
    f = Facts()
    os_text = str(y.get("os") or "Linux")
    f.platform.system = "Darwin" if "mac" in os_text.lower() else "Linux"
    f.platform.machine = "arm64" if "arm64" in os_text else "aarch64" if "aarch64" in os_text else "x86_64"
    f.environment = {k: v for k, v in (y.get("environment") or {}).items() if v is not None}
    for i, g in enumerate(y.get("gpus") or []):
        if g.get("gfx_arch"):
            f.rocm.gpus.append(RocmGpu(index=i, name=g.get("name"), gfx=g["gfx_arch"]))
        else:
            f.nvidia.gpus.append(NvidiaGpu(index=i, name=g.get("name"), compute_capability=g.get("compute_capability")))
    if f.rocm.gpus:
        f.rocm.amdgpu_loaded = f.rocm.kfd_present = f.rocm.kfd_accessible = True
    if f.nvidia.gpus or y.get("driver_version"):
        f.nvidia.driver_version = y.get("driver_version")
        f.nvidia.smi_state = "ok" if y.get("driver_version") else None
    ti = y.get("torch_installed") or {}
    t = TorchFacts(installed=True, version=ti.get("version"), variant=ti.get("variant"), cuda=ti.get("cuda"), hip=ti.get("hip"), imported=imported)
    t.numpy_version = y.get("numpy_version")
    t.distributions = {"torch": ti.get("version") or "?"}
    requires: dict[str, list[str]] = {}
    for name, c in (y.get("companions") or {}).items():
        t.distributions[name] = c["version"]
        setattr(t, f"{name}_version", c["version"])  # as the static read fills torchvision_version / torchaudio_version
        requires[name] = list(c.get("requires") or [])
    if y.get("torch_npu"):
        t.distributions["torch-npu"] = y["torch_npu"]["version"]
    if hasattr(t, "requires"):  # the facts of this branch; an older stackdoctor (a "before" measurement) has no such field
        t.requires = requires
    files = y.get("files") or {}
    if files.get("gfx"):
        t.arch_list_files = list(files["gfx"])
        t.sources["arch_list_files"] = files.get("source") or "torch's libraries"
    links = y.get("expected_files_linkage") or []
    if links:
        t.linkage_checked = True
        t.linkage = [LinkProblem(kind=p["kind"], library=p["library"], needed_by=p["needed_by"], detail=p.get("detail"),
                                 **({k: p[k] for k in ("found_version", "wheel_version") if k in p} if hasattr(LinkProblem, "found_version") else {}))
                     for p in links]
    if imported:
        field, text = _said(case, y)
        one = " ".join(text.split())
        if field == "import_warnings":
            t.import_warnings = [f"UserWarning: {one}"]
        elif field in ("cuda_error", "cudnn_error", "import_error") and hasattr(t, field):
            setattr(t, field, one)
            if field == "cuda_error":
                t.cuda_available = False if not f.rocm.gpus and not f.nvidia.gpus else True
        elif field == "cudnn_error":  # an older stackdoctor: the worker swallowed it
            pass
        if y.get("torch_arch_list"):
            t.arch_list = list(y["torch_arch_list"])
            t.sources["arch_list"] = "torch.cuda.get_arch_list()"
    f.torch = t
    return f


MATRIX = load_matrix([])


def judged(case: str, y: dict, imported: bool) -> dict[str, str]:
    return {x.code: x.severity for x in diagnose(facts_for(case, y, imported), MATRIX)}


# a finding that defers to another says the same thing: the companion's pin defers to the matrix's pairing
SAME = {"torch-companion-pin": ("torchvision-mismatch", "torchaudio-mismatch")}


def right(case: str, y: dict, imported: bool) -> bool:
    want = y.get("expected_finding") if imported else y.get("expected_fast_finding")
    got = judged(case, y, imported)
    if want is None and imported:
        return "rocm-gfx-unsupported" not in got and "gpu-arch-unsupported" not in got  # a counter-case
    if want is None:
        return True  # the recording has nothing the files would show
    return any(got.get(code) in ("warn", "fail") for code in (want, *SAME.get(want, ())))


@pytest.mark.parametrize(("case", "y"), CASES, ids=[c for c, _ in CASES])
def test_the_import_path_finds_the_recorded_failure(case, y):
    assert right(case, y, imported=True), (y.get("expected_finding"), judged(case, y, True))


@pytest.mark.parametrize(("case", "y"), CASES, ids=[c for c, _ in CASES])
def test_the_fast_path_finds_it_where_the_files_show_it(case, y):
    assert right(case, y, imported=False), (y.get("expected_fast_finding"), judged(case, y, False))


def test_there_are_fifteen_recorded_cases_with_sources():
    assert sorted(c for c, _ in CASES) == sorted(NAMED) and len(CASES) >= 15
    for case, _ in CASES:
        text = (REAL / case / "source.md").read_text(encoding="utf-8")
        assert re.search(r"^- Source: https://github\.com/\S+/(issues|pull)/\d+", text, re.M), case


def measure() -> tuple[int, int, int, int]:
    """(import right, fast right, fast applicable, cases)."""
    imp = sum(right(c, y, True) for c, y in CASES)
    applicable = [(c, y) for c, y in CASES if y.get("expected_fast_finding")]
    fast = sum(right(c, y, False) for c, y in applicable)
    return imp, fast, len(applicable), len(CASES)


if __name__ == "__main__":
    imp, fast, n_fast, n = measure()
    for c, y in CASES:
        print(f"{'ok ' if right(c, y, True) else 'BAD'} import  {'ok ' if right(c, y, False) else 'BAD'} fast  {c}")
    print(f"import path: {imp}/{n} right; fast path: {fast}/{n_fast} of the cases whose files show it")
    sys.exit(0)
