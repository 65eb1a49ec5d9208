"""What a new user trips over, third pass (issue 35): each item through the real console script, README's
examples executed as README writes them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


# ---------------------------------------------------------------- item 2: README's CI example can pass


def readme_ci_requirements() -> list[str]:
    """The `key = value` pairs of README's CI preflight sentence, as written there."""
    section = README.split("## CI preflight", 1)[1].split("\n## ", 1)[0]
    sentence = section.split("for example", 1)[1].split("`stackdoctor check` gates", 1)[0]
    pairs = [p for p in re.findall(r"`([a-z_]+ = [^`]+)`", sentence) if "..." not in p]
    assert any(p.startswith("kernels = ") for p in pairs) and any(p.startswith("min_busbw = ") for p in pairs), pairs
    return pairs


@pytest.fixture(scope="module")
def readme_ci_run(tmp_path_factory, torch_python):
    """`check` in a project folder whose pyproject.toml is README's CI example, on the suite's real torch."""
    project = tmp_path_factory.mktemp("ci-project")
    (project / "pyproject.toml").write_text("[tool.stackdoctor]\n" + "\n".join(readme_ci_requirements()) + "\n", encoding="utf-8")
    r = run_sd(["check", "--python", torch_python, "--json"], env=env(project), cwd=project, timeout=300)
    return r, json.loads(r.stdout)


@pytest.mark.slow
@pytest.mark.headline("gloo")
def test_readme_ci_example_runs_the_allreduce_it_asks_for(readme_ci_run):
    """README's example asks for the allreduce kernel and min_busbw: `check` runs the allreduce sweep itself, so
    what is left unmet on this CPU-only machine is the hardware it names (CUDA, 2 GPUs, compute capability, the
    bandwidth a GPU interconnect gives), never "no allreduce result" with a fix a later `check` could not see."""
    r, data = readme_ci_run
    ar = data["facts"]["kernels"]["allreduce"]
    assert ar and ar["status"] == "ok" and ar["world_size"] == 2 and ar["backend"] == "gloo", ar
    assert ar["max_busbw_gbs"] > 0
    unmet = [f for f in data["findings"] if f["code"] == "requirement-unmet"]
    assert unmet, "README's example asks for CUDA and 2 GPUs: a CPU-only machine cannot meet it"
    for f in unmet:
        assert "no allreduce" not in f["detail"] and "did not run" not in f["detail"] and "no allreduce measurement" not in f["detail"], f["detail"]
        assert "stackdoctor kernels allreduce" not in (f["fix"] or "") or "NCCL_DEBUG" in (f["fix"] or ""), f["fix"]
    assert r.rc == 1


@pytest.mark.slow
@pytest.mark.headline("gloo")
def test_readme_ci_example_kernels_line_passes_on_a_machine_that_meets_it(tmp_path, torch_python):
    """README's `kernels = [...]` requirement alone is met by one `check` on this machine: exit 0, the requirement
    met with the allreduce that ran, and the screen shows the allreduce sweep as one row with its bus bandwidth."""
    kernels = next(p for p in readme_ci_requirements() if p.startswith("kernels = "))
    (tmp_path / "pyproject.toml").write_text(f"[tool.stackdoctor]\n{kernels}\n", encoding="utf-8")
    r = run_sd(["check", "--python", torch_python, "--json"], env=env(tmp_path), cwd=tmp_path, timeout=300)
    assert r.rc == 0, r.stdout[-2000:]
    ok = [f for f in r.json()["findings"] if f["code"] == "requirements-ok"]
    assert ok and "allreduce passed" in ok[0]["detail"], r.json()["findings"]
    (tmp_path / "report.json").write_text(r.stdout, encoding="utf-8")
    screen = run_sd(["check", "--replay", str(tmp_path / "report.json")], env=env(tmp_path), cwd=tmp_path)
    rows = [ln for ln in screen.stdout.splitlines() if ln.startswith("allreduce ")]
    assert len(rows) == 1 and re.search(r"busbw \d", rows[0]), screen.stdout


# ---------------------------------------------------------------- item 1: a fix acts on the environment it is about


def test_fix_for_a_python_given_by_flag_names_it(tmp_path):
    """`check --python X` on an interpreter without torch: the fix installs into X, not into the active env."""
    import sys

    r = run_sd(["check", "--python", sys.executable, "--no-kernels"], env=env(tmp_path))
    fixes = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith("fix: stackdoctor ")]
    assert fixes, r.stdout
    for fix in fixes:
        assert f"--python {sys.executable}" in fix, fix


def test_fix_keeps_the_target_through_replay_and_quotes_it(tmp_path):
    """Every `stackdoctor install|kernels|check` fix of a report whose target was chosen by --python carries it
    (quoted where the shell needs it), in en and zh; a report of the active env's interpreter gets none."""
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.report import Report

    path = "/home/someone/my envs/proj/bin/python"

    def report(selected_by: str) -> str:
        f = Facts()
        f.platform.system, f.platform.machine = "Linux", "x86_64"
        f.python.executable, f.python.version, f.python.env_kind, f.python.selected_by = path, "3.12.3", "venv", selected_by
        f.python.unfinished_install = None
        p = tmp_path / f"{selected_by}.json"
        p.write_text(Report(facts=f).to_json(), encoding="utf-8")
        return str(p)

    for lang in ("en", "zh"):
        data = run_sd(["check", "--replay", report("--python"), "--json", "--lang", lang], env=env(tmp_path)).json()
        fixes = [f["fix"] for f in data["findings"] if f["fix"] and "stackdoctor " in f["fix"] and "explain" not in f["fix"]]
        assert fixes, data["findings"]
        for fix in fixes:
            assert "--python '/home/someone/my envs/proj/bin/python'" in fix, fix
    data = run_sd(["check", "--replay", report("VIRTUAL_ENV"), "--json"], env=env(tmp_path)).json()
    assert all("--python" not in (f["fix"] or "") for f in data["findings"]), data["findings"]


def test_a_fix_with_a_what_if_python_version_still_gets_the_target():
    """``--python-version`` (a what-if's flag) is not ``--python``: the fix still names the diagnosed interpreter,
    and one that already names ``--python`` is kept as it is."""
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.view import MachineView
    from stackdoctor.rules.core import for_target

    f = Facts()
    f.python.selected_by, f.python.executable = "--python", "/s/bin/python"
    f = MachineView(facts=f)  # type: ignore[assignment]  # what a rule's ctx.view holds
    assert for_target("stackdoctor install --dry-run --python-version 3.12", f) == "stackdoctor install --python /s/bin/python --dry-run --python-version 3.12"
    assert for_target("stackdoctor install --python /x", f) == "stackdoctor install --python /x"
    assert for_target("stackdoctor install --python=/x", f) == "stackdoctor install --python=/x"
