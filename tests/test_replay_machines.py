"""Every machine in tests/fixtures/machines (real cases and the issue's list) replays through the
real `check` and `install` commands: screen and JSON, exit 0 or 1, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

MACHINES = sorted((Path(__file__).parent / "fixtures" / "machines").glob("*.json"))


def as_report(case: Path, tmp_path: Path) -> Path:
    facts = json.loads(case.read_text())["facts"]
    out = tmp_path / "report.json"
    out.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    return out


@pytest.mark.parametrize("case", MACHINES, ids=[m.stem for m in MACHINES])
def test_machine_replays_through_check_and_install(case, tmp_path):
    report = as_report(case, tmp_path)
    screen = run_sd(["check", "--replay", str(report)], env=machine_env(tmp_path / "bin", None, PATH="/usr/bin:/bin", HOME=str(tmp_path), COLUMNS="100"))
    assert screen.rc in (0, 1), screen.stderr
    assert "python" in screen.stdout and ("ok" in screen.stdout.splitlines()[-1])
    data = run_sd(["check", "--replay", str(report), "--json"]).json()  # checked against the contract by conftest
    assert screen.rc == (1 if any(f["severity"] == "fail" for f in data["findings"]) else 0)
    plan = run_sd(["install", "--replay", str(report), "--offline", "--json"])
    assert plan.rc in (0, 1), plan.stderr
    p = plan.json()
    assert p["schema"] == "stackdoctor.plan/1"
    assert (p["variant"] is None) == (plan.rc == 1)
    assert p["reasons"], "every plan says why"
