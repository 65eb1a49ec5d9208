"""benchmarks/matrix_drift.py per artifact (issue 30): a (release, variant, platform) an index serves that the shipped
matrix lacks is named; a variant index that does not answer is said and skipped. Against a 127.0.0.1 index in the
PyTorch layout serving stand-in wheels (file names only are read)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from learnserver import standin_wheel
from test_install_witness import VariantIndex

from stackdoctor.matrix import load_matrix
from stackdoctor.wheels.index import IndexClient

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
    standin_wheel(tmp_path, "torch", "2.15.0+cpu", tag, ">=3.10")  # the matrix announces 2.15.0's Linux CPU build
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
    # 2.15.0's Linux CPU build is announced by its build matrix (issue 43): the artifact confirms it, no drift
    assert drift == [
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


def test_the_drift_check_runs_end_to_end_and_is_quiet_on_a_correct_matrix(tmp_path):
    """Issue 43: benchmarks/matrix_drift.py against a 127.0.0.1 index (PEP 658 metadata, range requests) serving a
    release the shipped matrix does not know, with its learned layer over the matrix: exit 0, no false alarm; the
    same layer with a wrong aarch64 arch list, or a runtime range pin the wheels do not write: exit 1, each named.
    The wheels: stand-ins with GPU code for Linux x86_64 and aarch64 and a range pin (as PyPI's torch 2.12 wheels
    pin nvidia-cublas>=13.1.0.3,<=13.1.1.3)."""
    import io
    import json
    from contextlib import redirect_stdout

    import yaml
    from learnserver import LearnIndex
    from test_learn_ranges import ARM, X86, _cli, _libtorch_cuda

    pins = ["cuda-toolkit[cudart]==13.2.2; platform_system == 'Linux'", "nvidia-cublas>=13.1.0.3,<=13.1.1.3; platform_system == 'Linux'"]
    wheels = [
        standin_wheel(tmp_path, "torch", "2.16.0", f"cp312-cp312-manylinux_2_28_{arch}", ">=3.11", pins, members={"torch/lib/libtorch_cuda.so": _libtorch_cuda(sms, 1)})
        for arch, sms in (("x86_64", X86), ("aarch64", ARM))
    ]
    layer = tmp_path / "learned.yaml"
    d = _drift()
    with LearnIndex(wheels) as idx:
        r = _cli("matrix", "learn", "--index", idx.url, "--out", str(layer), "--gpu-code", "--no-companions", "--torch", "2.16.0", home=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        doc = yaml.safe_load(layer.read_text())
        (cu,) = next(x for x in doc["releases"] if x["version"] == "2.16.0")["variants"]
        assert cu["runtime"]["nvidia-cublas"] == "<=13.1.1.3,>=13.1.0.3", cu["runtime"]  # the range is kept, not dropped
        out = io.StringIO()
        with redirect_stdout(out):
            rc = d.main(["--index", idx.url, "--since", "2.16", "--gpu-code", "--matrix", str(layer)])
        assert rc == 0, out.getvalue()
        cu["arch_by_platform"]["manylinux_2_28_aarch64"] = ["sm_90"]
        cu["runtime"]["nvidia-cublas"] = "==13.1.0.3"
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text(yaml.safe_dump(doc), encoding="utf-8")
        out = io.StringIO()
        with redirect_stdout(out):
            rc = d.main(["--index", idx.url, "--since", "2.16", "--gpu-code", "--matrix", str(wrong)])
    said = out.getvalue()
    assert rc == 1, said
    assert "cu132 manylinux_2_28_aarch64 arch list: index sm_80 sm_90 sm_100 sm_110 sm_120, matrix sm_90" in said, said
    assert "cu132 runtime pin nvidia-cublas: index <=13.1.1.3,>=13.1.0.3, matrix ==13.1.0.3" in said, said
    json.dumps(said)  # plain text, printable


def test_the_release_day_refresh_learns_and_reports_against_a_local_index(tmp_path):
    """The script the scheduled workflow runs (benchmarks/release_day.py): learns a release the shipped matrix does
    not know from a 127.0.0.1 index into a layer file, checks it (no drift: exit 0) and writes the report."""
    from learnserver import LearnIndex

    spec = importlib.util.spec_from_file_location("release_day", REPO / "benchmarks" / "release_day.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    wheels = [standin_wheel(tmp_path, "torch", "2.16.0", f"cp312-cp312-{tag}", ">=3.11") for tag in ("win_amd64", "macosx_14_0_arm64")]
    layer, report = tmp_path / "learned.yaml", tmp_path / "drift.md"
    with LearnIndex(wheels) as idx:
        rc = mod.main(["--index", idx.url, "--out", str(layer), "--since", "2.16", "--report", str(report)])
    text = report.read_text(encoding="utf-8")
    assert rc == 0, text
    assert "version: 2.16.0" in layer.read_text(encoding="utf-8")
    assert "`benchmarks/matrix_drift.py --since 2.16`: exit 0" in text and "0 release(s) missing, 0 disagreeing" in text, text


def test_the_refresh_workflow_is_valid_and_runs_the_tested_script():
    import subprocess

    import yaml

    wf = REPO / ".github" / "workflows" / "matrix-refresh.yml"
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(wf)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = yaml.safe_load(wf.read_text(encoding="utf-8"))
    on = doc.get("on") or doc.get(True)  # YAML 1.1 reads the key `on` as True
    assert on["schedule"] and "workflow_dispatch" in on
    steps = doc["jobs"]["refresh"]["steps"]
    assert any("benchmarks/release_day.py" in (s.get("run") or "") for s in steps)
    pr = next(s for s in steps if str(s.get("uses", "")).startswith("peter-evans/create-pull-request"))
    assert pr["with"]["add-paths"] == "compat_matrix/learned.yaml" and "drift.md" in pr["with"]["body-path"]
