"""The accelerator is a complete plug-in (issue 25): a kind that exists only in this test — its plug-in, its probe
and its matrix file under tests/fixtures/plugin — goes through ``check`` (screen, Markdown, JSON), ``install
--dry-run``, ``[tool.stackdoctor] backend = "foo"`` and ``diff`` with no edit anywhere in the package; its
``torch_api`` is asked of a stand-in torch (``torch.foo.is_available()``) in ``check`` and after an install, and
the install verdict for a ``foo1`` build is the plug-in's ``verify``.

The plug-in is found as any installed one would be: an ``entry_points.txt`` in the ``stackdoctor.accelerators``
group of a distribution on the path (here ``PYTHONPATH``). The machine is a captured tree whose ``/sys/class/foo``
lists one device and whose ``/sys/module/foo/version`` names its driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

PLUGIN = Path(__file__).parent / "fixtures" / "plugin"
MATRIX = PLUGIN / "foo-matrix.yaml"


def foo_tree(root: Path, driver: str) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    (root / "sys/class/foo/npu0").mkdir(parents=True)
    (root / "sys/class/foo/npu0/name").write_text("Foo N1 NPU\n")
    (root / "sys/module/foo").mkdir(parents=True)
    (root / "sys/module/foo/version").write_text(driver + "\n")
    return root


@pytest.fixture(scope="module")
def foo_machine(tmp_path_factory):
    base = tmp_path_factory.mktemp("foo")
    (base / "bin").mkdir()
    root = foo_tree(base / "root", "1.2.3")
    return base, machine_env(base / "bin", root, PYTHONPATH=str(PLUGIN), COLUMNS="200")


def test_check_screen_markdown_and_json_show_the_plugin_kind(foo_machine, plain_python):
    _, env = foo_machine
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env).json()
    assert data["facts"]["plugins"]["foo"]["driver"] == "1.2.3"
    assert data["facts"]["reconciled"]["accelerator"] == "foo"
    (g,) = data["facts"]["reconciled"]["gpus"]
    assert (g["vendor"], g["name"], g["witnesses"]) == ("foo", "Foo N1 NPU", ["/sys/class/foo"])
    screen = run_sd(["check", "-v", "--no-kernels", "--python", plain_python], env=env).stdout
    assert "Foo driver 1.2.3" in screen and "0: Foo N1 NPU (Foo NPU)" in screen, screen
    (row,) = [ln for ln in screen.splitlines() if ln.startswith("foo ")]  # its probe ran, in -v's probes table
    assert "ok" in row and "file:/sys/class/foo" in row, row
    md = run_sd(["check", "--format", "markdown", "--no-kernels", "--python", plain_python], env=env).stdout
    assert "| driver | Foo driver 1.2.3 |" in md and "| GPU | 0: Foo N1 NPU (Foo NPU) |" in md


def test_install_dry_run_plans_the_plugin_kinds_build(foo_machine, plain_python):
    _, env = foo_machine
    run = run_sd(["install", "--dry-run", "--offline", "--json", "--matrix", str(MATRIX), "--python", plain_python], env=env)
    plan = run.json()
    assert (plan["torch_version"], plan["variant"]) == ("99.0.0", "foo1"), plan
    assert any("FOO build for GPU 0 Foo N1 NPU" in r for r in plan["reasons"]), plan["reasons"]
    assert plan["index_url"].endswith("/foo1")


def test_project_backend_names_the_plugin_kind(foo_machine, plain_python, tmp_path):
    _, env = foo_machine
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nbackend = "foo"\n')
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env, cwd=tmp_path).json()
    (unmet,) = [f for f in data["findings"] if f["code"] == "requirement-unmet"]
    assert "backend foo" in unmet["detail"] and "torch" in unmet["detail"]  # a known backend, not torch here
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nbackend = "bar"\n')  # still one sentence for a kind no plug-in declares
    bad = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env, cwd=tmp_path)
    assert bad.rc == 2 and "foo" in bad.stderr and "bar" in bad.stderr


def test_diff_compares_the_plugin_kinds_facts(foo_machine, plain_python, tmp_path):
    base, env = foo_machine
    a = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env).json()
    other = machine_env(base / "bin", foo_tree(tmp_path / "root", "2.0.0"), PYTHONPATH=str(PLUGIN))
    b = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=other).json()
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    diff = run_sd(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"], env=env).json()
    assert {"key": "foo.driver", "a": "1.2.3", "b": "2.0.0"} in diff["differences"], diff


def test_a_plugin_that_does_not_load_is_a_finding_not_a_crash(foo_machine, plain_python):
    """An entry point naming a module that is not there (tests/fixtures/plugin-broken): check still runs the other
    kinds, and the failure is a probe-failed finding naming the plug-in."""
    base, env = foo_machine
    both = {**env, "PYTHONPATH": f"{PLUGIN}:{PLUGIN.parent / 'plugin-broken'}"}
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=both).json()
    assert data["facts"]["reconciled"]["accelerator"] == "foo"
    (failed,) = [f for f in data["findings"] if f["code"] == "probe-failed"]
    assert "sdbroken_missing" in failed["detail"] and "ModuleNotFoundError" in failed["detail"], failed


# ---------------------------------------------------------------------------- torch is asked about the plug-in's torch_api

STANDIN_TORCH = '''"""A stand-in torch for tests/test_accelerator_plugin.py: a foo build whose torch.foo answers is_available()."""
__version__ = "99.0.0+foo1"


class version:
    cuda = None
    hip = None
    debug = False


class _Api:
    def __init__(self, answer):
        self.answer = answer

    def is_available(self):
        if isinstance(self.answer, str):
            raise RuntimeError(self.answer)
        return self.answer

    def device_count(self):
        return 0


cuda = _Api(False)
foo = _Api(ANSWER)
'''


def foo_torch_venv(root: Path, answer: bool | str) -> str:
    """A venv whose torch is the stand-in above: ``torch.foo.is_available()`` returns ``answer``, or raises it."""
    import subprocess
    import sys

    from helpers import venv_bin

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    py = str(venv_bin(root))
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(STANDIN_TORCH.replace("ANSWER", repr(answer)))
    dist = site / "torch-99.0.0+foo1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 99.0.0+foo1\n")
    return py


@pytest.mark.parametrize("answer", [True, False, "foo runtime not loaded"], ids=["available", "unavailable", "raises"])
def test_torch_is_asked_about_the_plugins_torch_api(answer, tmp_path):
    """The target worker answers ``torch.foo.is_available()`` (the plug-in's torch_api) into torch.available; the
    plug-in's usable() consults it (no driver file here: torch's True is what says the device is driven), and the
    project's ``backend = "foo"`` is met or unmet by the same answer."""
    py = foo_torch_venv(tmp_path / "venv", answer)
    (tmp_path / "bin").mkdir()
    root = foo_tree(tmp_path / "root", "")
    (root / "sys/module/foo/version").unlink()  # no driver file: only torch can say the device is driven
    env = machine_env(tmp_path / "bin", root, PYTHONPATH=str(PLUGIN), COLUMNS="200")
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nbackend = "foo"\n')
    data = run_sd(["check", "--json", "--no-kernels", "--import-torch", "--python", py], env=env, cwd=tmp_path).json()
    t = data["facts"]["torch"]
    assert (t["version"], t["imported"]) == ("99.0.0+foo1", True), t
    assert t["available"] == {"foo": answer is True}, t
    codes = {f["code"]: f for f in data["findings"]}
    if answer is True:
        assert t["available_errors"] == {}
        assert data["facts"]["reconciled"]["accelerator"] == "foo"
        assert not {"requirement-unmet", "torch-backend-mismatch", "torch-cpu-only"} & set(codes), sorted(codes)  # a foo build, not a CPU one
    else:
        assert data["facts"]["reconciled"]["accelerator"] is None  # a device, and nothing says it is driven
        unmet = codes["requirement-unmet"]
        assert "torch.foo" in unmet["detail"] and "torch.available.foo" in unmet["facts"], unmet
        if isinstance(answer, str):
            assert t["available_errors"] == {"foo": "RuntimeError: foo runtime not loaded"}, t
            assert "foo runtime not loaded" in unmet["detail"], unmet


def test_no_plugin_no_question(tmp_path, plain_python):
    """Without the plug-in on the path nothing is asked: the facts carry no plug-in answer."""
    py = foo_torch_venv(tmp_path / "venv", True)
    (tmp_path / "bin").mkdir()
    env = machine_env(tmp_path / "bin", foo_tree(tmp_path / "root", "1.2.3"))
    t = run_sd(["check", "--json", "--no-kernels", "--import-torch", "--python", py], env=env).json()["facts"]["torch"]
    assert t["version"] == "99.0.0+foo1" and t["available"] == {} and t["available_errors"] == {}, t


VERDICT = """
import json, sys
from stackdoctor import kinds
from stackdoctor.install.verify import judge, verify
from stackdoctor.model.plan import Plan, PlannedPackage
from stackdoctor.system import System
plan = Plan(torch_version="99.0.0", variant="foo1", index_url=None,
            packages=[PlannedPackage(name="torch", version="99.0.0", variant="foo1", index_url=None)])
v = verify(System(), sys.argv[1])
print(json.dumps({"available": v.available, "errors": v.available_errors, "asked": kinds.torch_questions(),
                  "verdict": judge(plan, v, sys.argv[2] or None)}))
"""


@pytest.mark.parametrize(("answer", "accelerator", "verdict"), [
    (True, "foo", [True, "torch 99.0.0+foo1 imports in the target and sees the Foo NPU"]),
    (False, "foo", [False, "torch 99.0.0+foo1 imports in the target, but torch.foo.is_available() is False; run `stackdoctor check`"]),
    ("no device node", "foo", [False, "torch 99.0.0+foo1 imports in the target, but torch.foo.is_available() is False (RuntimeError: no device node);"
                                      " run `stackdoctor check`"]),
    (True, "", [True, "torch 99.0.0+foo1 imports in the target (no matching GPU on this machine, so the accelerator was not tried)"]),
], ids=["available", "unavailable", "raises", "no-foo-here"])
def test_the_install_verdict_for_a_foo_build_is_the_plugins(answer, accelerator, verdict, tmp_path):
    """install.verify asks the target's torch the plug-in's question (sd_verify.py), and judge's sentence for a foo1
    build is the plug-in's verify(): "sees the Foo NPU", or why not; with no foo device seen, the build's kind is
    still known (the variant pattern), so the accelerator was just not tried."""
    import subprocess
    import sys

    py = foo_torch_venv(tmp_path / "venv", answer)
    env = {**machine_env(tmp_path / "bin"), "PYTHONPATH": str(PLUGIN)}
    out = subprocess.run([sys.executable, "-c", VERDICT, py, accelerator], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["asked"]["foo"] == "foo" and got["asked"]["ascend"] == {"api": "npu", "needs": "torch_npu"}  # the bundled kind asks only beside torch_npu
    assert got["available"] == {"foo": answer is True}, got
    assert got["verdict"] == verdict, got


def test_a_cuda_build_on_the_foo_machine_is_a_backend_mismatch(foo_machine, plain_python, tmp_path):
    """torch-backend-mismatch is derived from the registry: a CUDA build where only a foo device is (a replayed
    report of the foo machine, its torch replaced) names the plug-in's vendor and devices."""
    _, env = foo_machine
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env).json()
    data["facts"]["torch"] = {"installed": True, "imported": False, "version": "2.13.0+cu130", "variant": "cu130", "cuda": "13.0",
                              "distributions": {"torch": "2.13.0+cu130"}}
    (tmp_path / "cuda.json").write_text(json.dumps(data))
    out = run_sd(["check", "--replay", str(tmp_path / "cuda.json"), "--json"], env=env).json()
    (hit,) = [f for f in out["findings"] if f["code"] == "torch-backend-mismatch"]
    assert "CUDA build" in hit["detail"] and "Foo" in hit["detail"] and "Foo N1 NPU" in hit["detail"], hit["detail"]
