"""A manylinux (glibc) torch wheel on a musl system (issue 33): the fast path predicts the failed import and names
musl, from the files: the platform probe reads musl's loader (``/lib/ld-musl-x86_64.so.1``) in a constructed Alpine
sysroot, and the linkage reader finds no ``libc.so.6`` for torch's libraries there."""

from __future__ import annotations

from test_diagnose import by_code, codes, healthy
from test_probe_platform import ctx_for, write

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import LinkProblem
from stackdoctor.probes import platform as plat
from stackdoctor.rules.diagnose import diagnose

LIBTORCH = "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so"


def alpine(tmp_path):
    root = tmp_path / "alpine"
    write(root, "/etc/os-release", 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.20.3\nPRETTY_NAME="Alpine Linux v3.20"\n')
    write(root, "/lib/ld-musl-x86_64.so.1", "\x7fELF musl loader stand-in")
    write(root, "/lib/libc.musl-x86_64.so.1", "\x7fELF")
    return root


def read_only_torch_on(f, *problems: LinkProblem):
    t = f.torch
    t.imported, t.import_error, t.import_error_kind = False, None, None
    t.cuda_available, t.device_count, t.devices = None, None, []
    t.linkage_checked, t.linkage = 12, list(problems)
    return f


def test_the_musl_loader_is_read_from_the_sysroot(tmp_path):
    f = plat.probe(ctx_for(alpine(tmp_path))).facts["platform"]
    assert f.libc == "musl" and f.glibc_version is None
    assert f.sources["libc"].endswith("/lib/ld-musl-x86_64.so.1")


def test_a_manylinux_wheel_on_musl_is_a_predicted_import_failure_naming_musl(tmp_path):
    matrix = load_matrix([])
    platform = plat.probe(ctx_for(alpine(tmp_path))).facts["platform"]
    f = read_only_torch_on(healthy(matrix), LinkProblem(kind="missing", library="libc.so.6", needed_by=LIBTORCH))
    f.platform.libc, f.platform.glibc_version = platform.libc, None
    f.platform.sources["libc"] = platform.sources["libc"]
    out = diagnose(f, matrix)
    hit = by_code(out, "torch-import-failed")
    assert hit.severity == "fail"
    assert "musl" in hit.detail and "ld-musl-x86_64.so.1" in hit.detail and "libc.so.6" in hit.detail
    assert "musllinux" in hit.fix and "glibc" in hit.fix
    assert "glibc-too-old" not in codes(out)


def test_the_same_missing_library_on_glibc_is_the_plain_prediction():
    matrix = load_matrix([])
    f = read_only_torch_on(healthy(matrix), LinkProblem(kind="missing", library="libcudnn.so.9", needed_by=LIBTORCH))
    f.platform.libc = "musl"  # musl, but what is missing is no glibc library: the plain "on no search path"
    hit = by_code(diagnose(f, matrix), "torch-import-failed")
    assert "musl" not in hit.detail and "libcudnn.so.9" in hit.detail
