"""Libraries as the loader finds them (stackdoctor/binaries/ldcache.py, stackdoctor/binaries/linkage.py), checked against glibc's own tools.

The loader's cache is written by the real ``ldconfig`` (new and compat formats) and read back through ``System``,
a sysroot included; the driver library the CUDA runtime opens (``libcuda.so.1``) and a shadowing cuDNN are tiny
real shared objects compiled here, in the wheel layout of tests/test_linkage.py, and each prediction is compared with
what glibc's ``ld.so`` maps when the same files are ``dlopen``-ed. The findings go through the real CLI on both paths
(``check --no-kernels`` and ``check --no-kernels --import-torch``).
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
from test_linkage import CC, SOABI, cc, copy_tree, predict, wheel_tree  # noqa: F401  (wheel_tree is a fixture)

from stackdoctor.binaries.ldcache import copy_version, parse_ld_cache, read_ld_cache
from stackdoctor.binaries.linkage import check_linkage, torch_roots
from stackdoctor.system import System

LDCONFIG = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
pytestmark = [pytest.mark.posix, pytest.mark.skipif(CC is None or not sys.platform.startswith("linux"), reason="needs a C compiler and glibc's ld.so")]

MAPS = textwrap.dedent(
    """
    import ctypes, json, sys
    for p in sys.argv[1:]:
        ctypes.CDLL(p)
    maps = open("/proc/self/maps").read().split()
    print(json.dumps(sorted({w for w in maps if "/libcuda.so" in w or "libcudnn" in w})))
    """
)


def mapped(env: dict[str, str], *paths: str) -> list[str]:
    """The libcuda/libcudnn files glibc's ld.so maps when a child dlopens ``paths`` in order."""
    full = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"} | env
    r = subprocess.run([sys.executable, "-c", MAPS, *paths], capture_output=True, text=True, env=full, timeout=60, check=True)
    return json.loads(r.stdout)


@pytest.mark.skipif(LDCONFIG is None, reason="needs glibc's ldconfig")
@pytest.mark.parametrize("fmt", ["new", "compat"])
def test_the_cache_ldconfig_writes_is_read_as_ld_so_reads_it(tmp_path, fmt):
    """ldconfig's own cache (both formats glibc writes) of a folder holding a library: the parser gives that
    folder's copy first, as `ldconfig -p` lists it."""
    lib = tmp_path / "opt" / "lib"
    lib.mkdir(parents=True)
    cc(lib / "libfoo.so.3", "int foo(void) { return 3; }\n", "-Wl,-soname,libfoo.so.3")
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{lib}\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run([LDCONFIG, "-X", "-c", fmt, "-C", str(cache), "-f", str(conf)], check=True, capture_output=True, timeout=60)
    parsed = parse_ld_cache(cache.read_bytes())
    assert parsed is not None and parsed["libfoo.so.3"] == [str(lib / "libfoo.so.3")]
    listed = subprocess.run([LDCONFIG, "-p", "-C", str(cache)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"libfoo.so.3 (libc6,x86-64) => {lib / 'libfoo.so.3'}" in listed or "x86-64" not in listed
    assert parse_ld_cache(b"ld.so-1.7.0\0garbage") is None and parse_ld_cache(b"") is None


def test_the_cache_is_read_under_the_sysroot(tmp_path):
    """A captured /etc/ld.so.cache (this machine's own) read through STACKDOCTOR_SYSROOT: the same entries."""
    if not os.path.isfile("/etc/ld.so.cache"):
        pytest.skip("this machine has no /etc/ld.so.cache")
    (tmp_path / "etc").mkdir()
    shutil.copy2("/etc/ld.so.cache", tmp_path / "etc" / "ld.so.cache")
    here = read_ld_cache(System.from_env().local)
    there = read_ld_cache(System.from_env({"STACKDOCTOR_SYSROOT": str(tmp_path)}))
    assert here and there == here and "libc.so.6" in there
    (tmp_path / "empty").mkdir()
    assert read_ld_cache(System.from_env({"STACKDOCTOR_SYSROOT": str(tmp_path / "empty")})) is None


def _stub(folder: Path, link: bool = True) -> Path:
    """The toolkit's stub layout: stubs/libcuda.so (SONAME libcuda.so.1) and the libcuda.so.1 link people add."""
    folder.mkdir(parents=True, exist_ok=True)
    cc(folder / "libcuda.so", "int cuInit(unsigned f) { return 34; }\n", "-Wl,-soname,libcuda.so.1")
    if link:
        (folder / "libcuda.so.1").symlink_to("libcuda.so")
    return folder


def test_a_stub_libcuda_first_on_ld_library_path(wheel_tree, tmp_path):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)
    stubs = _stub(tmp_path / "usr" / "local" / "cuda-12.4" / "lib64" / "stubs")
    env = {"LD_LIBRARY_PATH": str(stubs)}
    res = predict(site, env)
    stub = [p for p in res.problems if p.kind == "stub"]
    assert [(p.library, Path(p.needed_by).name, p.detail) for p in stub] == [(str(stubs / "libcuda.so.1"), "libcudart.so.12", "ld_library_path")]
    assert res.driver == str(stubs / "libcuda.so.1") and res.driver_where == "ld_library_path"
    cudart = site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    assert mapped(env, str(cudart), "libcuda.so.1") == [str(stubs / "libcuda.so")]  # ld.so takes the stub too
    assert [p for p in predict(site).problems if p.kind == "stub"] == []  # without the variable: no stub


@pytest.mark.skipif(LDCONFIG is None, reason="needs glibc's ldconfig")
def test_a_stub_in_the_loaders_cache_under_a_sysroot(wheel_tree, tmp_path):  # noqa: F811
    """/etc/ld.so.conf.d names the toolkit's stubs folder; `ldconfig -r ROOT` writes the cache that maps
    libcuda.so.1 to the stub; the walk, through STACKDOCTOR_SYSROOT, takes it from the cache and says so."""
    if os.geteuid() != 0:
        pytest.skip("ldconfig -r needs root (it changes root into the tree)")
    root = tmp_path / "root"
    _stub(root / "usr" / "local" / "cuda" / "lib64" / "stubs", link=False)  # ldconfig makes the SONAME's link itself
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
    (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (root / "etc" / "ld.so.conf.d" / "cuda-stubs.conf").write_text("/usr/local/cuda/lib64/stubs\n")
    (root / "opt").mkdir()
    shutil.copytree(wheel_tree, root / "opt" / "site-packages", symlinks=True)
    subprocess.run([LDCONFIG, "-r", str(root)], check=True, capture_output=True, timeout=60)
    system = System.from_env({"STACKDOCTOR_SYSROOT": str(root)})
    assert read_ld_cache(system)["libcuda.so.1"] == ["/usr/local/cuda/lib64/stubs/libcuda.so.1"]
    res = check_linkage(system, torch_roots(system, "/opt/site-packages/torch"), site_dirs=["/opt/site-packages"], wheel_dirs=["/opt/site-packages"])
    assert [(p.kind, p.library, p.detail) for p in res.problems] == [("stub", "/usr/local/cuda/lib64/stubs/libcuda.so.1", "ldcache")]


def _versioned_copies(site: Path, system_dir: Path) -> None:
    """A system cuDNN 9.0.0 (libcudnn.so.9 -> libcudnn.so.9.0.0, as NVIDIA's packages lay it out) and the wheel's
    9.1.0.70 (its dist-info), with torch's METADATA pinning nvidia-cudnn-cu12==9.1.0.70."""
    system_dir.mkdir(parents=True)
    shutil.copy2(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9", system_dir / "libcudnn.so.9.0.0")
    (system_dir / "libcudnn.so.9").symlink_to("libcudnn.so.9.0.0")
    d = site / "nvidia_cudnn_cu12-9.1.0.70.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n\n")


def test_a_shadowing_cudnn_names_both_copies_and_their_versions(wheel_tree, tmp_path):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)
    system_dir = tmp_path / "usr" / "local" / "cuda-12.1" / "lib64"
    _versioned_copies(site, system_dir)
    env = {"LD_LIBRARY_PATH": str(system_dir)}
    shadow = [p for p in predict(site, env).problems if p.kind == "shadowed"]
    assert [(p.library, p.found_version, p.wheel_version) for p in shadow] == [
        (str(system_dir / "libcudnn.so.9"), "9.0.0 (libcudnn.so.9.0.0)", "9.1.0.70 (nvidia_cudnn_cu12-9.1.0.70.dist-info)")]
    lib = site / "torch" / "lib" / "libtorch_cuda.so"
    assert mapped(env, str(lib)) == [str(system_dir / "libcudnn.so.9.0.0")]


def test_a_conda_copy_says_its_package_version(tmp_path):
    prefix = tmp_path / "envs" / "work"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "conda-meta").mkdir()
    (prefix / "lib" / "libcudnn.so.8").write_bytes(b"\x7fELF")
    (prefix / "conda-meta" / "cudnn-8.9.2.26-cuda12_0.json").write_text("{}")
    system = System.from_env().local
    assert copy_version(system, str(prefix / "lib" / "libcudnn.so.8")) == "8.9.2.26 (conda-meta/cudnn-8.9.2.26-cuda12_0.json)"
    assert copy_version(system, str(tmp_path / "nowhere" / "libcudnn.so.9")) is None


def _cli_venv(wheel_tree: Path, tmp_path: Path) -> tuple[str, Path]:  # noqa: F811
    """A venv whose stand-in torch imports (CUDA 13.0, initialisation fails) over the wheel layout's real libraries."""
    from test_target_probe import FAKE_CU130_TORCH_OLD_DRIVER, VERSION_2_14_1, make_fake_torch_env

    py = make_fake_torch_env(tmp_path, FAKE_CU130_TORCH_OLD_DRIVER.replace("is too old (found version 12040). Please update your GPU driver.",
                                                                            "cuDNN version incompatibility"), version_py=VERSION_2_14_1, dist_version="2.14.1")
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    for item in wheel_tree.iterdir():
        if item.name != "torch":
            shutil.copytree(item, site / item.name, symlinks=True)
    shutil.copytree(wheel_tree / "torch" / "lib", site / "torch" / "lib")
    shutil.copy2(wheel_tree / "torch" / f"_C.{SOABI}.so", site / "torch")
    return py, site


def test_both_paths_report_a_stub_libcuda_from_the_files(wheel_tree, tmp_path):  # noqa: F811
    """Through the CLI: the toolkit's stubs folder first on LD_LIBRARY_PATH is libcuda-stub on the fast path and on the
    import path alike, naming the file and the variable; the fix drops that folder and keeps the others."""
    from helpers import machine_env, run_sd

    py, _ = _cli_venv(wheel_tree, tmp_path)
    stubs = _stub(tmp_path / "usr" / "local" / "cuda-12.4" / "lib64" / "stubs")
    env = machine_env(tmp_path / "bin")
    env["LD_LIBRARY_PATH"] = f"{stubs}:/opt/other/lib"
    for args in (["--no-kernels"], ["--no-kernels", "--import-torch"]):
        found = {f["code"]: f for f in run_sd(["check", "--json", *args, "--python", py], env=env).json()["findings"]}
        assert "libcuda-stub" in found, (args, sorted(found))
        f = found["libcuda-stub"]
        assert str(stubs / "libcuda.so.1") in f["detail"] and "LD_LIBRARY_PATH" in f["detail"] and "libcudart.so.12" in f["detail"]
        assert f["fix"] == "export LD_LIBRARY_PATH=/opt/other/lib"


def test_both_paths_report_the_shadowing_copy_from_the_files(wheel_tree, tmp_path):  # noqa: F811
    """Through the CLI, on a venv whose torch imports (a stand-in) and whose files hold the shadowing copy: the fast
    path and the import path both fail with lib-path-shadowing naming the variable, both copies, both versions and
    torch's pin; the fix keeps the other entries of LD_LIBRARY_PATH, quoted."""
    from helpers import machine_env, run_sd

    py, site = _cli_venv(wheel_tree, tmp_path)
    meta = site / "torch-2.14.1.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace("\n\n", "\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Linux\"\n\n", 1))
    system_dir = tmp_path / "usr" / "local" / "cuda 12.1" / "lib64"
    _versioned_copies(site, system_dir)
    env = machine_env(tmp_path / "bin")
    env["LD_LIBRARY_PATH"] = f"{system_dir}:/opt/other/lib"
    for args, detail in ((["--no-kernels"], "predicted"), (["--no-kernels", "--import-torch"], "read from the files")):
        run = run_sd(["check", "--json", *args, "--python", py], env=env)
        found = {f["code"]: f for f in run.json()["findings"]}
        assert "lib-path-shadowing" in found, sorted(found)
        f = found["lib-path-shadowing"]
        assert f["severity"] == "fail" and detail in f["detail"]
        for word in ("9.0.0 (libcudnn.so.9.0.0)", "9.1.0.70 (nvidia_cudnn_cu12-9.1.0.70.dist-info)", "torch pins nvidia-cudnn-cu12==9.1.0.70", str(system_dir)):
            assert word in f["detail"], f["detail"]
        assert f["fix"] == "export LD_LIBRARY_PATH=/opt/other/lib"


@pytest.mark.parametrize("how, fix", [("ld_library_path", "export LD_LIBRARY_PATH=/opt/my/lib"),
                                      ("ldcache", "grep -rl '/usr/local/cuda 12/lib64/stubs' /etc/ld.so.conf /etc/ld.so.conf.d")])
def test_the_stub_finding_names_how_it_was_found(how, fix):
    """The rule from the walk's "stub" problem: fail where a driver is witnessed, the fix for the way it was found, quoted."""
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts, LinkProblem, NvidiaFacts, PlatformFacts, TorchFacts
    from stackdoctor.rules.diagnose import diagnose

    stub = "/usr/local/cuda 12/lib64/stubs/libcuda.so.1"
    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64")
    f.nvidia = NvidiaFacts(driver_version="550.54.15")
    f.environment = {"LD_LIBRARY_PATH": "/usr/local/cuda 12/lib64/stubs:/opt/my/lib"}
    f.torch = TorchFacts(installed=True, version="2.4.0+cu121", variant="cu121", cuda="12.1", imported=False,
                         linkage_checked=True, linkage=[LinkProblem("stub", stub, "/site/nvidia/cuda_runtime/lib/libcudart.so.12", detail=how)])
    found = {x.code: x for x in diagnose(f, load_matrix([]))}
    assert found["libcuda-stub"].severity == "fail" and stub in found["libcuda-stub"].detail
    assert found["libcuda-stub"].fix.startswith(fix)
