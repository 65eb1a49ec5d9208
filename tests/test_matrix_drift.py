"""benchmarks/matrix_drift.py per artifact (issue 30): a (release, variant, platform) an index serves that the shipped
matrix lacks is named; a variant index that does not answer is said and skipped. Against a 127.0.0.1 index in the
PyTorch layout serving stand-in wheels (file names only are read)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from learnserver import standin_wheel
from test_install_witness import VariantIndex

from stackdoctor.install.index import IndexClient
from stackdoctor.matrix import load_matrix

REPO = Path(__file__).resolve().parent.parent


def _drift():
    spec = importlib.util.spec_from_file_location("matrix_drift", REPO / "benchmarks" / "matrix_drift.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("matrix_drift", mod)
    spec.loader.exec_module(mod)
    return mod


def test_the_artifacts_a_variant_index_serves_and_the_matrix_lacks_are_named(tmp_path):
    d = _drift()
    tag = "cp312-cp312-manylinux_2_28_x86_64"
    standin_wheel(tmp_path, "torch", "2.15.0+cpu", tag, ">=3.10")  # the matrix knows 2.15.0's CPU build for macOS / Windows only
    standin_wheel(tmp_path, "torch", "2.14.0+cpu", tag, ">=3.10")  # known
    standin_wheel(tmp_path, "torch", "2.16.0+cpu", tag, ">=3.10")  # a release nobody knows
    m = load_matrix()
    client = IndexClient(timeout_s=5)
    try:
        with VariantIndex(sorted(tmp_path.glob("*.whl"))) as idx:
            drift, silent = d.pytorch_drift(idx.base, ["cpu", "cu999"], m, "2.0", client)
        dead, dead_silent = d.pytorch_drift("http://127.0.0.1:9/whl", ["cpu"], m, "2.0", client)
    finally:
        client.close()
    assert drift == [
        f"{idx.base}/cpu: torch 2.15.0 cpu linux x86_64: not in the matrix (torch-2.15.0+cpu-{tag}.whl)",
        f"{idx.base}/cpu: torch 2.16.0: not in the matrix (torch-2.16.0+cpu-{tag}.whl)",
    ], drift
    assert len(silent) == 1 and silent[0].startswith(f"{idx.base}/cu999: not read (")  # its page is a 404
    assert dead == [] and len(dead_silent) == 1 and dead_silent[0].startswith("http://127.0.0.1:9/whl/cpu: not read (")


def test_pypis_label_less_wheels_are_compared_by_platform():
    d = _drift()
    m = load_matrix()

    class F:
        def __init__(self, name: str) -> None:
            self.filename, self.yanked = name, False

    served = d.artifacts([F("torch-2.15.0-cp313-cp313-manylinux_2_28_x86_64.whl"), F("torch-2.15.0-cp313-cp313-win_amd64.whl"),
                          F("torch-2.15.0-cp313-cp313-musllinux_1_2_x86_64.whl"), F("torch-2.16.0rc1-cp313-cp313-win_amd64.whl")])
    assert d.artifact_drift(served, m) == ["torch 2.15.0 musllinux x86_64: no build for it in the matrix (torch-2.15.0-cp313-cp313-musllinux_1_2_x86_64.whl)"]
