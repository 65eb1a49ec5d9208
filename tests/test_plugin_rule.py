"""A kind brings its own finding through the accelerator seam (issue 31): the test-only plug-in kind's
``foo-driver-too-old`` (tests/fixtures/plugin/sdfoo/rules.py, named by ``Foo.rules``; its en and zh sentences in
that module's ``TEXTS``, read by ``Accelerator.texts()``) is judged by ``check`` in both languages and known to
``explain``, with no file inside ``stackdoctor/`` naming it. The plug-in is found as an installed one would be: its
``entry_points.txt`` on ``PYTHONPATH``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

PLUGIN = Path(__file__).parent / "fixtures" / "plugin"
CODE = "foo-driver-too-old"


@pytest.fixture(scope="module", autouse=True)
def plugin_texts():
    """The suite checks every report a command prints against the catalogue of this process (tests/conftest.py:
    each finding explained in every language): while these tests run it knows the plug-in's sentences. The rule
    itself is taken back out of this process's registry at once (the rule tests count the package's own)."""
    from stackdoctor.core import texts
    from stackdoctor.rules import REGISTRY

    spec = importlib.util.spec_from_file_location("_sdfoo_rules_for_the_catalogue", PLUGIN / "sdfoo" / "rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    REGISTRY.pop(CODE, None)
    texts.add_texts(module.TEXTS)
    yield
    texts._EXTRA_TEXTS.remove(module.TEXTS)
    texts.texts.cache_clear()


def foo_tree(root: Path, *, driver: str) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    (root / "sys/class/foo/npu0").mkdir(parents=True)
    (root / "sys/class/foo/npu0/name").write_text("Foo N1 NPU\n")
    (root / "sys/module/foo").mkdir(parents=True)
    (root / "sys/module/foo/version").write_text(driver + "\n")
    return root


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    base = tmp_path_factory.mktemp("foo-rule")
    (base / "bin").mkdir()
    bare = machine_env(base / "bin", foo_tree(base / "bare", driver="0.9.1"), PYTHONPATH=str(PLUGIN), COLUMNS="200")
    driven = machine_env(base / "bin", foo_tree(base / "driven", driver="1.2.3"), PYTHONPATH=str(PLUGIN), COLUMNS="200")
    return bare, driven


def test_check_judges_the_plugin_kinds_own_rule_in_english_and_chinese(machines, plain_python):
    bare, driven = machines
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=bare).json()
    (f,) = [x for x in data["findings"] if x["code"] == CODE]
    assert f["severity"] == "warn" and f["layer"] == "driver", f
    assert f["title"] == "The Foo NPU's driver is too old for torch.foo" and f["detail"] == "Foo NPU(s) Foo N1 NPU run driver 0.9.1; torch.foo needs 1.0 or newer.", f
    assert f["fix"] == "sudo apt install foo-driver  # 1.0 or newer"
    zh = run_sd(["check", "--json", "--no-kernels", "--lang", "zh", "--python", plain_python], env=bare).json()
    (z,) = [x for x in zh["findings"] if x["code"] == CODE]
    assert z["title"] == "Foo NPU 的驱动太旧，torch.foo 无法使用" and z["detail"] == "Foo NPU Foo N1 NPU 的驱动是 0.9.1；torch.foo 需要 1.0 或更新的版本。", z
    screen = run_sd(["check", "--no-kernels", "--lang", "zh", "--python", plain_python], env=bare).stdout
    assert "Foo NPU 的驱动太旧" in screen, screen
    # the same kind with its driver loaded: the rule is silent
    ok = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=driven).json()
    assert CODE not in {x["code"] for x in ok["findings"]}


def test_explain_knows_the_plugin_kinds_rule(machines):
    bare, _ = machines
    en = run_sd(["explain", CODE], env=bare)
    assert en.rc == 0 and "The Foo NPU's driver is too old for torch.foo" in en.stdout and "from 1.0 on" in en.stdout, en.stdout + en.stderr
    zh = run_sd(["explain", CODE, "--lang", "zh"], env=bare)
    assert zh.rc == 0 and "Foo NPU 的驱动太旧" in zh.stdout, zh.stdout + zh.stderr
    listed = run_sd(["explain"], env=bare)
    assert CODE in listed.stdout, listed.stdout
    # without the plug-in on the path, stackdoctor has no such code
    alone = run_sd(["explain", CODE], env={k: v for k, v in bare.items() if k != "PYTHONPATH"})
    assert alone.rc != 0 and "too old for torch.foo" not in alone.stdout


def test_no_file_in_the_package_names_the_plugin_rule():
    pkg = Path(__file__).resolve().parent.parent / "stackdoctor"
    named = [p for p in pkg.rglob("*") if p.is_file() and p.suffix in (".py", ".yaml") and CODE in p.read_text(encoding="utf-8", errors="replace")]
    assert not named, named
