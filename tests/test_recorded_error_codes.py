"""Issue 42: every recorded real torch error text (tests/fixtures/real/*/torch-error.txt and the shared recordings, each
with its public source in source.md) through both paths of `check`: the fast path (torch read from its files,
`check --no-kernels`) and the import path (torch's runtime started, its text recorded). The import adds, it never
reverses; neither is all-ok where the recording shows a failure; a driver that answered is never "no NVIDIA GPU".

The error-code table itself (compat_matrix/runtime_errors.yaml) is read from real texts of several torch releases:
THC's `cuda runtime error (802)` (torch <= 1.4), c10's `Error 804: ...` (1.9 to 2.7), c10's own sentences
(`CUDA driver initialization failed`, `CUDA unknown error`), HIP's `Error 101: hipErrorInvalidDevice`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from stackdoctor.kinds.runtime_errors import read_text
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, NvidiaGpu, PlatformFacts, TorchFacts
from stackdoctor.rules.diagnose import diagnose

HERE = Path(__file__).resolve().parent
ROOTS = [HERE / "fixtures" / "real", HERE.parents[1] / "shared" / "fixtures" / "real"]
RECORDED = sorted({p.parent.name: p.parent for root in ROOTS if root.is_dir() for p in root.glob("*/torch-error.txt")}.values())
# the stand-in torch where a thread names only an era (a conda build stamp, a Python version) that the matrix predates:
# a build of the same kind the matrix knows, so the rules have a variant to read; the error text is the recording's
STAND_IN = {"cuda-runtime": ("2.4.1+cu121", "cu121", "12.1", None), "cuda-driver": ("2.4.1+cu121", "cu121", "12.1", None), "hip": ("2.5.1+rocm6.2", "rocm6.2", None, "6.2.41133")}
# the recorded texts, by name (each folder's source.md names its public thread); the glob below must find exactly these
NAMED = (
    "e-002-c10-oom-wsl2-pytorch-150048",
    "e-003-c10-wenet-700",
    "e-034-c10-stub-libcuda-sd-docker-22",
    "e-046-c10-exclusive-mode-timm-1033",
    "e-046-thc-busy-pytorch-2704",
    "e-100-thh-hip-no-device-legacy-rocm-build-1159",
    "e-101-hip-gfx803-rocm-gfx803-9",
    "e-101-hip-rx7900xt-legacy-rocm-build-1911",
    "e-500-c10-comfyui-docker-74",
    "e-500-c10-wsl2-docker-faster-whisper-20",
    "e-802-c10-azure-nd96asr-lisa-2823",
    "e-802-c10-torch270-llamafactory-7888",
    "e-802-thc-conda-torch7-1219",
    "e-803-c10-gtx1070-easydiffusion-379",
    "e-803-c10-torch210-atorch-2",
    "e-804-c10-gtx1650-container-torchpod-43",
    "e-804-c10-rtx3090-colossalai-4381",
    "e-804-c10-trtllm-1806",
    "e-999-c10-suspend-torch113-pytorch-88639",
    "e-999-thc-gtx1080-torch131-pytorch-31179",
    "r-torch-driver-too-old-found-10020-chexnet-42",
)
NO_GPU_CLAIMS = {"torch-gpu-build-no-gpu", "container-no-gpu"}


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([])


def derived(case: Path) -> dict:
    m = re.search(r"## Derived facts\s*```yaml\n(.*?)```", (case / "source.md").read_text(encoding="utf-8"), re.S)
    assert m, f"{case.name}: source.md has no Derived facts block"
    y = yaml.safe_load(m.group(1))
    assert re.search(r"^- Source: https://", (case / "source.md").read_text(encoding="utf-8"), re.M), f"{case.name}: no public source"
    return y


def machine(case: Path, *, imported: bool) -> Facts:
    """The recorded machine as the facts of one path: only what the thread shows (the driver nvidia-smi printed, a
    container, WSL), torch read from its files (fast path) or started with the recorded text (import path)."""
    y = derived(case)
    f = Facts()
    os_text = str(y.get("os") or "")
    container = y.get("container")
    f.platform = PlatformFacts(system="Linux", machine="x86_64", is_wsl="WSL" in os_text, container=container if container not in (None, "none", "unknown") else None)
    api = y.get("api") or "cuda-runtime"
    if y.get("driver_version") and api != "hip":
        f.nvidia.driver_version, f.nvidia.smi_state = str(y["driver_version"]), "ok"
        f.nvidia.cuda_driver_version = str(y["driver_max_cuda"]) if y.get("driver_max_cuda") else None
        f.nvidia.gpus = [NvidiaGpu(index=i, name=g.get("name")) for i, g in enumerate(y.get("gpus") or [])]
    given = y.get("torch_installed") if isinstance(y.get("torch_installed"), dict) else None
    version, variant, cuda, hip = STAND_IN[api]
    if given and str(given.get("version", "")).startswith("2."):
        version, cuda = str(given["version"]), str(given.get("cuda") or cuda)
        variant = version.split("+", 1)[1] if "+" in version else f"cu{cuda.replace('.', '')}"
    f.torch = TorchFacts(installed=True, version=version, variant=variant, cuda=cuda, hip=hip, location="/venv/site-packages/torch", imported=imported)
    if imported:
        f.torch.cuda_available, f.torch.device_count = False, 0
        f.torch.cuda_error = (case / "torch-error.txt").read_text(encoding="utf-8").strip()
    return f


def problems(findings) -> dict[str, str]:
    return {x.code: x.severity for x in findings if x.severity in ("warn", "fail")}


@pytest.mark.parametrize("case", RECORDED, ids=[c.name for c in RECORDED])
def test_both_paths_agree_and_neither_is_all_ok(matrix, case):
    fast = diagnose(machine(case, imported=False), matrix)
    full = diagnose(machine(case, imported=True), matrix)
    fast_p, full_p = problems(fast), problems(full)
    assert "fail" in full_p.values(), (case.name, full_p)  # the recording shows a failure: the import path says one
    # the fast path is never all-ok: a problem, or the runtime said to be not verified (with the command that does)
    assert fast_p or any(x.code == "runtime-not-verified" for x in fast), (case.name, [x.code for x in fast])
    # the import adds, it never reverses: what the fast path claimed stays (a "not verified" line is no claim)
    assert set(fast_p) <= set(full_p) | {"torch-gpu-build-no-gpu"} or not (set(fast_p) - set(full_p)), (case.name, fast_p, full_p)
    for code in set(fast_p) - set(full_p):
        hit = next(x for x in fast if x.code == code)
        assert "not known" in hit.detail or "not verified" in hit.detail, (case.name, code, hit.detail)


ERROR_CASES = [c for c in RECORDED if derived(c).get("error_number") is not None]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c.name for c in ERROR_CASES])
def test_a_driver_that_answered_is_never_no_gpu(matrix, case):
    y = derived(case)
    text = (case / "torch-error.txt").read_text(encoding="utf-8")
    found = read_text(text, matrix.table("runtime_errors"))
    assert [(x.number, x.name) for x in found] == [(y["error_number"], y["error_name"])], case.name
    full = diagnose(machine(case, imported=True), matrix)
    assert not NO_GPU_CLAIMS & {x.code for x in full}, (case.name, [(x.code, x.detail) for x in full if x.code in NO_GPU_CLAIMS])
    hit = next((x for x in full if x.code == "runtime-error-code"), None)
    assert hit is not None and str(y["error_number"]) in hit.detail and y["error_name"] in hit.detail, (case.name, [x.code for x in full])
    assert hit.fix and "--variant cpu" not in hit.fix


def test_every_recorded_text_is_named_here():
    local = sorted(c.name for c in RECORDED if c.parent == ROOTS[0])
    assert local == sorted(NAMED), set(local) ^ set(NAMED)
    assert len([n for n in NAMED if n.startswith("e-")]) >= 15


def test_three_torch_releases_wordings_read_to_the_same_row(matrix):
    """802 as torch 1.4 (THC), torch <= 1.10 (c10, CUDAFunctions.cpp:112) and torch 2.7.0 (c10, :109) wrote it."""
    rows = matrix.table("runtime_errors")
    names = {
        case: [(x.api, x.number, x.name, x.row.layer if x.row else None) for x in read_text((HERE / "fixtures" / "real" / case / "torch-error.txt").read_text(), rows)]
        for case in ("e-802-thc-conda-torch7-1219", "e-802-c10-azure-nd96asr-lisa-2823", "e-802-c10-torch270-llamafactory-7888")
    }
    assert set(map(tuple, (v[0] for v in names.values()))) == {("cuda-runtime", 802, "cudaErrorSystemNotReady", "fabric-manager")}, names


def test_an_unknown_number_is_read_and_said_unknown(matrix):
    f = machine(HERE / "fixtures" / "real" / "e-802-c10-torch270-llamafactory-7888", imported=True)
    f.torch.cuda_error = f.torch.cuda_error.replace("Error 802: system not yet initialized", "Error 4242: a future error")
    hit = next(x for x in diagnose(f, matrix) if x.code == "runtime-error-code")
    assert "4242" in hit.detail and "does not name" in hit.detail and "docs.nvidia.com" in (hit.fix or "")


def test_every_row_is_sourced_and_every_fix_key_has_words(matrix):
    from stackdoctor.core import texts

    rows = matrix.table("runtime_errors")
    assert {r.api for r in rows} == {"cuda-runtime", "cuda-driver", "hip"}
    for r in rows:
        assert r.source and r.meaning, r
        for lang in ("en", "zh"):
            assert texts.message("runtime-error-code", "fix", r.fix, lang, cuda="12.6", install="stackdoctor install"), (r.fix, lang)


def test_a_container_without_a_gpu_witness_says_the_same_on_both_paths(matrix):
    """This build machine's case (issue 42): a CUDA torch in a container with no GPU, no PCI entry, no device node and
    no variable naming one. The fast path and the import path (torch's real words: "Found no NVIDIA driver", c10's
    CUDAFunctions.cpp) say the same finding with the same words about what is not known; neither claims the container
    was started without the host's GPU (no witness says the host has one)."""
    found_no_driver = (
        "UserWarning: CUDA initialization: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
        "and installed a driver from http://www.nvidia.com/Download/index.aspx"
    )
    said = {}
    for imported in (False, True):
        f = Facts()
        f.platform = PlatformFacts(system="Linux", machine="x86_64", container="docker", container_nvidia_devices=False)
        f.platform.sources["nvidia_pci_devices"] = "file:/sys/bus/pci/devices"
        f.torch = TorchFacts(installed=True, version="2.7.0+cu126", variant="cu126", cuda="12.6", location="/v/site-packages/torch",
                             imported=imported, runtime_bytes={"nvidia-cudnn-cu12": 700_000_000})
        if imported:
            f.torch.cuda_available, f.torch.device_count, f.torch.driver_api_version, f.torch.cuda_error = False, 0, 0, found_no_driver
        out = diagnose(f, matrix)
        said[imported] = {x.code: x for x in out if x.severity in ("warn", "fail")}
        assert "container-no-gpu" not in said[imported]
    assert set(said[False]) == set(said[True]) == {"torch-gpu-build-no-gpu"}
    for x in said.values():
        assert "not known" in x["torch-gpu-build-no-gpu"].detail and "docker run --gpus all" in x["torch-gpu-build-no-gpu"].detail
    assert "Found no NVIDIA driver" in said[True]["torch-gpu-build-no-gpu"].detail  # the import adds its witness


def test_no_gpu_is_claimed_only_with_its_witness(matrix):
    """Outside a container, "this machine has no NVIDIA GPU" needs the PCI bus read (Linux, not WSL); without it the
    finding says it is not known."""
    def run(pci_read: bool, wsl: bool = False):
        f = Facts()
        f.platform = PlatformFacts(system="Linux", machine="x86_64", is_wsl=wsl)
        if pci_read:
            f.platform.sources["nvidia_pci_devices"] = "file:/sys/bus/pci/devices"
        f.torch = TorchFacts(installed=True, version="2.7.0+cu126", variant="cu126", cuda="12.6", location="/v/site-packages/torch", imported=False)
        return next(x for x in diagnose(f, matrix) if x.code == "torch-gpu-build-no-gpu").detail

    assert "has no NVIDIA GPU" in run(True)
    assert "not known" in run(False) and "not known" in run(True, wsl=True)


def test_each_layer_says_verified_failed_or_not_verified(matrix):
    """The report's ``layers`` (JSON; schema-checked by conftest where a command writes it): on the fast path the GPU
    runtime is not verified, with the statement that says so; with torch's 802 the fabric manager's layer failed (the
    row's layer, not the driver's), by its code."""
    from stackdoctor.model.report import layer_verdicts

    case = HERE / "fixtures" / "real" / "e-802-c10-torch270-llamafactory-7888"
    fast = {v["layer"]: v for v in layer_verdicts(diagnose(machine(case, imported=False), matrix))}
    full = {v["layer"]: v for v in layer_verdicts(diagnose(machine(case, imported=True), matrix))}
    assert fast["runtime"]["status"] == "not-verified" and fast["runtime"]["by"] == ["runtime-not-verified"]
    assert full["fabric-manager"]["status"] == "failed" and full["fabric-manager"]["by"] == ["runtime-error-code"]
    assert "runtime-error-code" not in full["driver"]["by"]
    assert fast["python"]["status"] == "not-verified"  # this recording has no Python facts: nothing verified it
    assert {v["status"] for v in full.values()} <= {"verified", "failed", "not-verified"}


def test_a_number_is_read_only_where_the_line_says_it_is_the_gpu_runtimes(matrix):
    rows = matrix.table("runtime_errors")
    assert read_text("sqlite3.OperationalError: Error 12: database is locked", rows) == []
    assert read_text("Check failed: error == cudaSuccess (46 vs. 0)  all CUDA-capable devices are busy or unavailable", rows)[0].number == 46
