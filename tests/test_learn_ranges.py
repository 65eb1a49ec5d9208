"""``stackdoctor matrix learn`` where the index serves no PEP 658 ``.metadata`` files but answers HTTP range
requests (the PyPI this project reaches does exactly that for torch): the wheels' own METADATA and their GPU code
are read by ranges (stackdoctor/wheels/lazywheel.py), a small fraction of their bytes, counted by the server
(tests/learnserver.py). Wheels: the committed skeleton of PyPI's real torch 2.15.0 CUDA wheel, and stand-ins
(named so in their METADATA) padded to 24 MiB with a stored member before their metadata, as real wheels are."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from binfixtures import elf, fatbin, fatbin_entry
from learnserver import LearnIndex, standin_wheel

REPO = Path(__file__).resolve().parent.parent
SKELETON = REPO / "tests" / "fixtures" / "learn" / "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
PAD_MB = 24
X86 = (75, 80, 86, 90, 100, 120)
ARM = (80, 90, 100, 110, 120)
CUDA_PINS = ["cuda-toolkit[cublas,cudart]==13.2.2; platform_system == 'Linux'", "nvidia-cudnn-cu13==9.26.0.51; platform_system == 'Linux'"]


def _libtorch_cuda(sms: tuple[int, ...], containers: int = 6) -> bytes:
    """An ELF with a ``.nv_fatbin`` of ``containers`` containers, each with a cubin per sm (payloads of 4 KiB that
    hold the container magic at 8-byte offsets, so a reader that trusts a magic it meets inside a payload is wrong)."""
    payload = b"\x00" * 1024 + b"\x50\xed\x55\xba\x01\x00\x10\x00" + b"\xff" * 8 + b"\x11" * 3056
    cons = [[fatbin_entry(2, sm, payload=payload) for sm in sms] for _ in range(containers)]
    return elf([(".text", b"\x90" * 512), (".nv_fatbin", fatbin(*cons))])


def _gpu_wheel(folder: Path, version: str, tag: str, sms: tuple[int, ...]) -> Path:
    return standin_wheel(folder, "torch", version, tag, ">=3.11", CUDA_PINS, pad_mb=PAD_MB,
                         members={"torch/lib/libtorch_cuda.so": _libtorch_cuda(sms)})


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rangewheels")
    out = [SKELETON]
    for py in ("cp311-cp311", "cp312-cp312", "cp313-cp313t"):
        out.append(_gpu_wheel(tmp, "2.16.0", f"{py}-manylinux_2_28_x86_64", X86))
        out.append(_gpu_wheel(tmp, "2.16.0", f"{py}-manylinux_2_28_aarch64", ARM))
    out.append(standin_wheel(tmp, "torch", "2.16.0", "cp312-cp312-macosx_14_0_arm64", ">=3.11", pad_mb=PAD_MB))
    empty = tmp / "torch-2.16.0-cp312-cp312-win_amd64.whl"
    empty.write_bytes(b"")  # a 0-byte file where a wheel should be
    out.append(empty)
    return out


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKDOCTOR_", "XDG_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def learned(wheels, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    out = home / "learned.yaml"
    with LearnIndex(wheels, metadata=False) as idx:
        r = _cli("matrix", "learn", "--index", idx.url, "--out", str(out), "--gpu-code", "--no-companions", home=home)
        sent = dict(idx.sent)
        hits = dict(idx.hits)
    return r, yaml.safe_load(out.read_text()), sent, hits


def _row(doc, version):
    return next(r for r in doc["releases"] if r["version"] == version)


def test_every_platform_and_python_is_learned_from_a_small_fraction_of_the_bytes(learned, wheels):
    r, doc, sent, hits = learned
    assert not any(p.endswith(".metadata") and n for p, n in hits.items() if p in sent)  # none served: none counted as read
    row = _row(doc, "2.16.0")
    assert row["requires_python"] == ">=3.11" and row["pythons"] == ["3.11", "3.12", "3.13t"]
    cu = next(v for v in row["variants"] if v["name"] == "cu132")
    assert cu["platforms"] == ["manylinux_2_28_aarch64", "manylinux_2_28_x86_64"] and cu["index"] == "pypi"
    assert cu["runtime"]["cuda-toolkit"] == "13.2.2"
    assert cu["arch_list"] == [f"sm_{n}" for n in X86]
    assert cu["arch_by_platform"] == {"manylinux_2_28_aarch64": [f"sm_{n}" for n in ARM]}  # its own, not x86_64's
    cpu = next(v for v in row["variants"] if v["name"] == "cpu")
    assert cpu["platforms"] == ["macosx_14_0_arm64"]
    total = sum(w.stat().st_size for w in wheels)
    read = sum(sent.values())
    assert total > 6 * PAD_MB * 1024 * 1024 and read < total // 10, (read, total)
    for w in wheels:  # every wheel the learner read, it read in part
        if sent.get(f"/files/{w.name}"):
            assert sent[f"/files/{w.name}"] < max(w.stat().st_size // 4, 600_000), w.name


def test_the_real_skeleton_is_read_by_ranges(learned):
    import json

    _r, doc, _sent, _hits = learned
    src = json.loads((SKELETON.parent / (SKELETON.name + ".source.json")).read_text())
    (cu,) = _row(doc, "2.15.0")["variants"]
    assert cu["name"] == "cu132" and cu["arch_list"] == src["libtorch_cuda.so"]["arch_list"] and not src["libtorch_cuda.so"]["ptx"]
    assert "GPU code read from torch/lib/libtorch_cuda.so" in cu["source"]


def test_an_empty_wheel_is_named_and_the_run_says_so(learned):
    r, doc, _sent, _hits = learned
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    line = next(x for x in r.stdout.splitlines() if "torch-2.16.0-cp312-cp312-win_amd64.whl" in x and x.startswith("not learned:"))
    assert "0 bytes" in line
    assert "win_amd64" not in str(_row(doc, "2.16.0")["variants"])  # nothing made up for it
    assert "read " in r.stdout and "MiB of wheels by range requests" in r.stdout


def test_refused_ranges_without_download_name_every_artifact(wheels, tmp_path):
    out = tmp_path / "l.yaml"
    with LearnIndex([w for w in wheels if "2.16.0" in w.name and w.stat().st_size], metadata=False, ranges=False) as idx:
        r = _cli("matrix", "learn", "--index", idx.url, "--out", str(out), "--no-companions", home=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    missing = [x for x in r.stdout.splitlines() if x.startswith("not learned:")]
    assert missing and all("range requests" in x or "no build learned" in x for x in missing), r.stdout


def test_one_wheel_over_the_cap_is_skipped_and_named_not_the_end_of_the_run(wheels, tmp_path):
    out = tmp_path / "l.yaml"
    sub = [SKELETON] + [w for w in wheels if "2.16.0" in w.name and "x86_64" in w.name]
    with LearnIndex(sub, metadata=False, ranges=False) as idx:
        r = _cli("matrix", "learn", "--index", idx.url, "--out", str(out), "--download", "--max-wheel-mb", "2", "--no-companions", home=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert any(x.startswith("not learned:") and "2.16.0" in x and "limit" in x for x in r.stdout.splitlines()), r.stdout
    doc = yaml.safe_load(out.read_text())
    (cu,) = _row(doc, "2.15.0")["variants"]  # the small one, downloaded whole, was still learned
    assert cu["arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


@pytest.mark.parametrize("chunk", [1, 7, 61, 4096, 1 << 20])
def test_headers_kept_from_a_stream_read_as_the_whole_library(chunk):
    """The headers-only view of a library streaming past in pieces of any size gives the arch list the whole file gives."""
    from stackdoctor.wheels.lazywheel import _FatbinCapture
    from stackdoctor.wheels.learn import read_open_library

    lib = _libtorch_cuda(ARM, containers=5)
    whole = read_open_library(io.BytesIO(lib), "cuda", "lib")
    cap = _FatbinCapture(len(lib), tail=1024)  # its section names lie in the last KiB before the section table
    for i in range(0, len(lib), chunk):
        cap.feed(lib[i:i + chunk])
    kept = read_open_library(cap.view(), "cuda", "lib")
    assert kept == whole and kept["arch_list"] == [f"sm_{n}" for n in ARM] and kept["containers"] == 5
    assert sum(len(d) for d in cap.view().kept.values()) < len(lib) // 4


def test_a_member_that_does_not_match_its_record_is_not_used(tmp_path):
    from stackdoctor.wheels.index import IndexClient, IndexFile, PageCache
    from stackdoctor.wheels.learn import HttpSource

    good = standin_wheel(tmp_path, "torch", "2.16.0", "cp312-cp312-manylinux_2_28_x86_64", ">=3.11", pad_mb=1)
    bad = tmp_path / "bad" / good.name
    bad.parent.mkdir()
    with zipfile.ZipFile(good) as zi, zipfile.ZipFile(bad, "w") as zo:
        for info in zi.infolist():
            data = zi.read(info)
            if info.filename.endswith("METADATA"):
                data = data.replace(b">=3.11", b">=3.99")  # tampered after RECORD was written
            zo.writestr(info, data)
    with LearnIndex([bad], metadata=False) as idx, IndexClient({}, cache=PageCache(None)) as client:
        src = HttpSource(idx.url, client)
        meta, _f = src.metadata(IndexFile(bad.name, idx.url.rsplit("/", 1)[0] + "/files/" + bad.name))
    assert meta is None and "RECORD" in src.why[bad.name]
