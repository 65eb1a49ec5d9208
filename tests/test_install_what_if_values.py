"""A kind's what-if values of its host (:attr:`Accelerator.what_if_values`): install takes each as a flag right after
``--gfx`` (AMD's ``--rocm-userspace``; the test-only plug-in's ``--foo-firmware``, tests/fixtures/plugin/sdfoo), checks
it with the kind's pattern (one sentence, exit 2) and hands it to the kind's fit through ``fit_host`` and the resolver's
``Target.hosts``, with no edit inside ``stackdoctor/`` for a plug-in's."""

from __future__ import annotations

import json

from helpers import machine_env, run_sd
from test_accelerator_plugin import MATRIX, PLUGIN, foo_tree


def _options(help_text: str) -> list[str]:
    return [line.split()[0].rstrip(",") for line in help_text.splitlines() if line.startswith("  -")]


def test_the_kinds_values_follow_gfx_in_the_help(tmp_path):
    env = machine_env(tmp_path / "bin", None, COLUMNS="200")
    opts = _options(run_sd(["install", "--help"], env=env).stdout)
    assert opts[opts.index("--gpu"):opts.index("--remove-leftovers")] == ["--gpu", "--gfx", "--rocm-userspace"], opts
    assert "--foo-firmware" not in opts
    text = " ".join(run_sd(["install", "--help"], env=env).stdout.split())  # click folds the help at 80 columns
    assert "--rocm-userspace VERSION What-if: the host's ROCm user space release (6.3.1). Implies --dry-run." in text, text
    assert "What-if AMD GPU arch gfxNNNN (repeatable). Implies --dry-run." in text and "What-if NVIDIA driver version." in text
    assert "auto, cpu, cu126, cu130, rocm7.2, xpu, ..." in text and "clone, submodules, deps, mkl, amd, build." in text
    plug = {**env, "PYTHONPATH": str(PLUGIN)}
    opts = _options(run_sd(["install", "--help"], env=plug).stdout)
    assert opts[opts.index("--gfx"):opts.index("--remove-leftovers")] == ["--gfx", "--rocm-userspace", "--foo-firmware"], opts


def test_a_plugin_kinds_value_reaches_its_fit(tmp_path, plain_python):
    root = foo_tree(tmp_path / "root", "1.2.3")
    env = machine_env(tmp_path / "bin", root, PYTHONPATH=str(PLUGIN), COLUMNS="200")
    base = ["install", "--offline", "--json", "--matrix", str(MATRIX), "--python", plain_python]
    plan = run_sd([*base, "--foo-firmware", " 2.1 "], env=env).json()  # a what-if: implies --dry-run
    assert plan["variant"] == "foo1" and plan["machine"], plan
    assert "foo1 runs on Foo firmware 2.1 (stated by --foo-firmware)" in plan["reasons"], plan["reasons"]
    plain = run_sd([*base, "--dry-run"], env=env).json()
    assert not any("Foo firmware" in r for r in plain["reasons"]), plain["reasons"]


def test_a_value_that_is_not_one_exits_2_with_the_kinds_sentence(tmp_path):
    env = machine_env(tmp_path / "bin", None, PYTHONPATH=str(PLUGIN))
    run = run_sd(["install", "--dry-run", "--offline", "--foo-firmware", "two"], env=env)
    assert run.rc == 2 and run.stderr.strip().splitlines() == ["stackdoctor: --foo-firmware two is not a Foo firmware release (expected like 2.1)."], run.stderr
    run = run_sd(["install", "--dry-run", "--offline", "--json", "--gfx", "gfx1100", "--rocm-userspace", "6.x"], env=env)
    assert run.rc == 2 and json.loads(run.stdout)["error"]["message"] == "--rocm-userspace 6.x is not a ROCm release (expected like 6.3.1 or 7.2).", run.stdout


def test_an_empty_value_is_a_usage_error_as_every_options(tmp_path):
    env = machine_env(tmp_path / "bin", None, PYTHONPATH=str(PLUGIN))
    for flag in ("--rocm-userspace", "--foo-firmware"):
        run = run_sd(["install", "--dry-run", "--offline", flag, " "], env=env)
        assert run.rc == 2 and f"Invalid value for '{flag}': the value is empty" in run.stderr, run.stderr
