"""The accelerator is a complete plug-in (issue 25): a kind that exists only in this test — its plug-in, its probe
and its matrix file under tests/fixtures/plugin — goes through ``check`` (screen, Markdown, JSON), ``install
--dry-run``, ``[tool.stackdoctor] backend = "foo"`` and ``diff`` with no edit anywhere in the package.

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
