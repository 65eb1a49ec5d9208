"""The import predicted from the files (stackdoctor/binaries/linkage.py), checked against the real dynamic loader.

The layout is the one of PyPI's CUDA wheels: ``torch/_C*.so`` -> ``torch/lib/libtorch_python.so`` ->
``torch/lib/libtorch_cuda.so``, which needs ``libcudnn.so.9``, ``libnccl.so.2`` and ``libcudart.so.12``
from the ``nvidia-*`` wheels through ``$ORIGIN/../../nvidia/<name>/lib`` run paths, and calls
``cudaMalloc@libcudart.so.12`` (a versioned symbol, as the real libcudart exports it) and ``ncclMemFree``.
Every library is a tiny real shared object compiled here with the C compiler; each case changes one
thing and compares the prediction with what glibc's ``ld.so`` does when the same file is ``dlopen``-ed
(``ctypes.CDLL``, ``RTLD_NOW``, in a child process, which is what ``import torch`` does to ``_C``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stackdoctor.binaries.linkage import check_linkage, torch_roots
from stackdoctor.system import System

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = [pytest.mark.posix, pytest.mark.skipif(CC is None or not sys.platform.startswith("linux"), reason="needs a C compiler and glibc's ld.so")]

SOABI = "cpython-311-x86_64-linux-gnu"
DLOPEN = textwrap.dedent(
    """
    import ctypes, json, sys
    try:
        ctypes.CDLL(sys.argv[1])
    except OSError as exc:
        print(json.dumps({"error": str(exc)}))
    else:
        maps = open("/proc/self/maps").read().split()
        print(json.dumps({"error": None, "cudnn": sorted({w for w in maps if w.endswith("libcudnn.so.9")})}))
    """
)


def cc(out: Path, source: str, *args: str) -> None:
    src = out.with_suffix(out.suffix + ".c")
    src.write_text(source)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(src), *args], check=True, capture_output=True, timeout=60)
    src.unlink()


def _cudart(path: Path, node: str) -> None:
    vs = path.parent / "cudart.map"
    vs.write_text(f"{node} {{ global: cudaMalloc; local: *; }};\n")
    cc(path, "int cudaMalloc(void **p, unsigned long n) { return 0; }\n", "-Wl,-soname,libcudart.so.12", f"-Wl,--version-script={vs}")
    vs.unlink()


def _nccl(path: Path, with_mem_free: bool) -> None:
    body = "int ncclGetVersion(int *v) { *v = 22703; return 0; }\n" + ("int ncclMemFree(void *p) { return 0; }\n" if with_mem_free else "")
    cc(path, body, "-Wl,-soname,libnccl.so.2")


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory) -> Path:
    """site-packages with torch's three libraries and the nvidia-cudnn / nccl / cuda-runtime wheels' libraries."""
    site = tmp_path_factory.mktemp("linkage") / "site-packages"
    nv = {name: site / "nvidia" / name / "lib" for name in ("cudnn", "nccl", "cuda_runtime")}
    for d in nv.values():
        d.mkdir(parents=True)
    lib = site / "torch" / "lib"
    lib.mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("")
    cc(nv["cudnn"] / "libcudnn.so.9", "int cudnnCreate(void **h) { return 0; }\n", "-Wl,-soname,libcudnn.so.9")
    _nccl(nv["nccl"] / "libnccl.so.2", with_mem_free=True)
    _cudart(nv["cuda_runtime"] / "libcudart.so.12", "libcudart.so.12")
    rpath = ":".join(f"$ORIGIN/../../nvidia/{n}/lib" for n in nv)
    cc(lib / "libtorch_cuda.so",
       "int cudnnCreate(void **); int ncclMemFree(void *); int cudaMalloc(void **, unsigned long);\n"
       "int torch_cuda_init(void) { void *p; cudaMalloc(&p, 1); cudnnCreate(&p); return ncclMemFree(p); }\n",
       "-Wl,-soname,libtorch_cuda.so", f"-Wl,-rpath,{rpath}", "-Wl,--enable-new-dtags", "-Wl,-z,now",
       *(f"-L{d}" for d in nv.values()), "-l:libcudnn.so.9", "-l:libnccl.so.2", "-l:libcudart.so.12")
    cc(lib / "libtorch_python.so", "int torch_cuda_init(void);\nint torch_python_init(void) { return torch_cuda_init(); }\n",
       "-Wl,-soname,libtorch_python.so", "-Wl,-rpath,$ORIGIN", "-Wl,--disable-new-dtags", f"-L{lib}", "-l:libtorch_cuda.so")
    cc(site / "torch" / f"_C.{SOABI}.so", "int torch_python_init(void);\nint PyInit__C(void) { return torch_python_init(); }\n",
       "-Wl,-rpath,$ORIGIN/lib", "-Wl,--disable-new-dtags", f"-L{lib}", "-l:libtorch_python.so")
    return site


def copy_tree(wheel_tree: Path, tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    shutil.copytree(wheel_tree, site, symlinks=True)
    return site


def predict(site: Path, env: dict[str, str] | None = None):
    system = System.from_env().local
    roots = torch_roots(system, str(site / "torch"))
    return check_linkage(system, roots, env=env or {}, site_dirs=[str(site)], wheel_dirs=[str(site)])


def loader(site: Path, env: dict[str, str] | None = None) -> dict:
    """What glibc's ld.so does with torch/_C*.so (dlopen, RTLD_NOW) in a child process."""
    full = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"} | (env or {})
    r = subprocess.run([sys.executable, "-c", DLOPEN, str(site / "torch" / f"_C.{SOABI}.so")], capture_output=True, text=True, env=full, timeout=60, check=True)
    return json.loads(r.stdout)


def test_a_healthy_wheel_layout_loads_and_is_predicted_to(wheel_tree):
    res = predict(wheel_tree)
    assert res.checked and res.problems == [] and res.note is None
    assert res.loaded["libcudnn.so.9"] == str(wheel_tree / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    assert res.symbols_checked >= 2  # cudaMalloc@libcudart.so.12 and ncclMemFree (named after libnccl)
    assert loader(wheel_tree)["error"] is None


def test_cudnn_on_no_search_path(wheel_tree, tmp_path):
    site = copy_tree(wheel_tree, tmp_path)
    shutil.rmtree(site / "nvidia" / "cudnn")
    res = predict(site)
    assert [(p.kind, p.library, Path(p.needed_by).name) for p in res.problems] == [("missing", "libcudnn.so.9", "libtorch_cuda.so")]
    assert "libcudnn.so.9: cannot open shared object file" in loader(site)["error"]


def test_a_cudnn_torch_would_preload_from_another_site_dir_is_not_missing(wheel_tree, tmp_path):
    """torch's _load_global_deps preloads nvidia/<name>/lib/<lib> from sys.path when libtorch_global_deps fails."""
    site = copy_tree(wheel_tree, tmp_path)
    other = tmp_path / "user-site"
    (other / "nvidia").mkdir(parents=True)
    shutil.move(str(site / "nvidia" / "cudnn"), str(other / "nvidia" / "cudnn"))
    system = System.from_env().local
    res = check_linkage(system, torch_roots(system, str(site / "torch")), site_dirs=[str(site), str(other)], wheel_dirs=[str(site)])
    assert res.problems == [] and res.loaded["libcudnn.so.9"].startswith(str(other))


def test_an_nccl_copy_lacking_ncclMemFree(wheel_tree, tmp_path):
    site = copy_tree(wheel_tree, tmp_path)
    _nccl(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", with_mem_free=False)
    res = predict(site)
    assert [(p.kind, Path(p.library).name, p.symbol) for p in res.problems] == [("symbol", "libnccl.so.2", "ncclMemFree")]
    assert "undefined symbol: ncclMemFree" in loader(site)["error"]


def test_a_cudart_whose_symbols_carry_another_version(wheel_tree, tmp_path):
    """cudaMalloc is there, but as cudaMalloc@libcudart.so.11 (a copy of another CUDA major under the name
    libcudart.so.12): the file's own name still defines version libcudart.so.12, so ld.so reports the symbol."""
    site = copy_tree(wheel_tree, tmp_path)
    _cudart(site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12", "libcudart.so.11")
    res = predict(site)
    assert [(p.kind, Path(p.library).name, p.symbol, p.version) for p in res.problems] == [("symbol", "libcudart.so.12", "cudaMalloc", "libcudart.so.12")]
    assert "undefined symbol: cudaMalloc, version libcudart.so.12" in loader(site)["error"]


def test_a_version_the_provider_does_not_define(wheel_tree, tmp_path):
    """libtorch_cuda.so needs version CUDART_12.8 of a libcudart that defines only CUDART_12.0: `version not found`."""
    site = copy_tree(wheel_tree, tmp_path)
    rt = site / "nvidia" / "cuda_runtime" / "lib"
    lib = site / "torch" / "lib"
    _cudart(rt / "libcudart.so.12", "CUDART_12.8")
    cc(lib / "libtorch_cuda.so",
       "int cudnnCreate(void **); int ncclMemFree(void *); int cudaMalloc(void **, unsigned long);\n"
       "int torch_cuda_init(void) { void *p; cudaMalloc(&p, 1); cudnnCreate(&p); return ncclMemFree(p); }\n",
       "-Wl,-soname,libtorch_cuda.so", "-Wl,-rpath,$ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/nccl/lib:$ORIGIN/../../nvidia/cuda_runtime/lib",
       f"-L{site / 'nvidia' / 'cudnn' / 'lib'}", f"-L{site / 'nvidia' / 'nccl' / 'lib'}", f"-L{rt}", "-l:libcudnn.so.9", "-l:libnccl.so.2", "-l:libcudart.so.12")
    _cudart(rt / "libcudart.so.12", "CUDART_12.0")
    res = predict(site)
    assert [(p.kind, Path(p.library).name, p.version) for p in res.problems] == [("version", "libcudart.so.12", "CUDART_12.8")]
    assert "version `CUDART_12.8' not found" in loader(site)["error"]


def test_a_system_copy_first_on_ld_library_path_shadows_the_wheels(wheel_tree, tmp_path):
    """libtorch_cuda.so has a RUNPATH (as new linkers write it), so LD_LIBRARY_PATH comes first: the loader
    takes the system copy, and the prediction names it and the wheel's copy it hides."""
    site = copy_tree(wheel_tree, tmp_path)
    system_dir = tmp_path / "usr" / "local" / "cuda-12.1" / "lib64"
    system_dir.mkdir(parents=True)
    shutil.copy2(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", system_dir / "libcudnn.so.9")
    env = {"LD_LIBRARY_PATH": str(system_dir)}
    res = predict(site, env)
    shadow = [p for p in res.problems if p.kind == "shadowed"]
    assert [(p.library, p.detail) for p in shadow] == [(str(system_dir / "libcudnn.so.9"), str(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"))]
    assert loader(site, env)["cudnn"] == [str(system_dir / "libcudnn.so.9")]


def test_a_zero_byte_library_is_unloadable(wheel_tree, tmp_path):
    site = copy_tree(wheel_tree, tmp_path)
    (site / "torch" / "lib" / "libtorch_cuda.so").write_bytes(b"")
    res = predict(site)
    assert [(p.kind, Path(p.library).name) for p in res.problems] == [("unloadable", "libtorch_cuda.so")]
    assert "libtorch_cuda.so" in loader(site)["error"]


def test_the_real_cpu_torch_is_predicted_to_load(torch_python):
    """The suite's torch 2.13.0+cpu venv: everything its _C needs resolves, every versioned symbol is defined."""
    r = subprocess.run([torch_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True)
    site = r.stdout.strip()
    system = System.from_env().local
    res = check_linkage(system, torch_roots(system, os.path.join(site, "torch")), env=dict(os.environ), interpreter=os.path.realpath(torch_python),
                        site_dirs=[site], wheel_dirs=[site])
    assert res.checked and res.problems == [] and res.note is None, res.problems[:3]
    assert "libtorch_cpu.so" in res.loaded and "libc.so.6" in res.loaded and res.symbols_checked > 10  # the wheel's own (libgomp)


def test_check_no_kernels_predicts_the_import_failure(wheel_tree, tmp_path):
    """Through the CLI: `check --no-kernels` on a venv whose cuDNN is on no search path fails (exit 1) with
    torch-import-failed naming libcudnn.so.9, without importing torch; with cuDNN back, that finding is gone."""
    from helpers import machine_env, run_sd
    from test_target_probe import VERSION_2_14_1, make_fake_torch_env

    marker = tmp_path / "imported"
    py = make_fake_torch_env(tmp_path, f"open({str(marker)!r}, 'w').close()\n", version_py=VERSION_2_14_1, dist_version="2.14.1")
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    for item in wheel_tree.iterdir():
        if item.name != "torch":
            shutil.copytree(item, site / item.name, symlinks=True)
    shutil.copytree(wheel_tree / "torch" / "lib", site / "torch" / "lib")
    shutil.copy2(wheel_tree / "torch" / f"_C.{SOABI}.so", site / "torch")
    shutil.rmtree(site / "nvidia" / "cudnn")
    env = machine_env(tmp_path / "bin")
    env.pop("LD_LIBRARY_PATH", None)
    run = run_sd(["check", "--json", "--no-kernels", "--python", py], env=env)
    found = {f["code"]: f for f in run.json()["findings"]}
    assert not marker.exists()
    assert run.rc == 1 and "libcudnn.so.9" in found["torch-import-failed"]["detail"] and "predicted" in found["torch-import-failed"]["detail"]
    shutil.copytree(wheel_tree / "nvidia" / "cudnn", site / "nvidia" / "cudnn")
    again = run_sd(["check", "--json", "--no-kernels", "--python", py], env=env).json()
    assert "torch-import-failed" not in {f["code"] for f in again["findings"]} and again["facts"]["torch"]["linkage_checked"] is True


def test_only_glibcs_loader_is_predicted(wheel_tree):
    """On a macOS or Windows host the libraries are Mach-O or PE: no prediction (never a false import failure)."""
    from stackdoctor.probes.torch_static import read_static_torch
    from stackdoctor.system import Host

    assert read_static_torch(System(), [str(wheel_tree)]).linkage is not None
    for name in ("Darwin", "Windows"):
        assert read_static_torch(System(host_override=Host(system=name)), [str(wheel_tree)]).linkage is None
