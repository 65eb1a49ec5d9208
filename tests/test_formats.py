"""Output formats: github (annotations + step summary), junit, markdown, json; --output; redaction.

Reports here are the synthetic planted machine of test_redact.py, with hand-made findings for
the renderer tests, and the real CLI (``python -m stackdoctor check --replay``) end to end.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import run_stackdoctor
from rich.console import Console
from test_redact import HOST, assert_clean, planted_report

from stackdoctor.core.errors import UsageError
from stackdoctor.model.report import Finding, ProbeStatus
from stackdoctor.render.github import escape_data, escape_property, format_annotation
from stackdoctor.render.junit import render_junit
from stackdoctor.render.markdown import render_markdown
from stackdoctor.render.output import format_report, write_output, write_text_file

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, **(env or {})}
    e.pop("GITHUB_STEP_SUMMARY", None) if env is None or "GITHUB_STEP_SUMMARY" not in env else None
    return run_stackdoctor([sys.executable, "-m", "stackdoctor", *args], cwd=cwd or REPO, env=e, text=True, timeout=timeout)


def mixed_report():
    rep = planted_report()
    rep.findings.append(
        Finding(
            "odd-chars",
            "warn",
            "50% of: things, broken",
            detail="line one\r\nline two with | pipe and <b>html</b> and ``` fence and \x1b[31mansi\x00",
            fix="pip install 'torch==2.6.0' --index-url https://download.pytorch.org/whl/cu124",
            layer="torch",
        )
    )
    return rep


def unescape(s: str) -> str:
    return s.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


# ---------------------------------------------------------------------------- github


def test_github_escaping_round_trips():
    f = Finding("x-y", "fail", "a: b, c 100%", detail="50%\r\nnext", fix="do it")
    line = format_annotation(f)
    assert line is not None and line.startswith("::error title=")
    m = re.fullmatch(r"::error title=([^:]*)::(.*)", line)
    assert m, line
    assert unescape(m.group(1)) == "stackdoctor x-y: a: b, c 100%"
    assert unescape(m.group(2)) == "50%\r\nnext\nFix: do it"
    assert "\n" not in line and "\r" not in line
    assert escape_data("%0A") == "%250A" and escape_property("a:b,c") == "a%3Ab%2Cc"
    assert format_annotation(Finding("ok-thing", "ok", "fine")) is None


def test_github_format_writes_annotations_and_step_summary(tmp_path, capsys):
    summary = tmp_path / "step_summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    os.environ["GITHUB_STEP_SUMMARY"] = str(summary)
    try:
        write_output(mixed_report(), "github", None, console=Console(file=io.StringIO()), redact_default=False)
    finally:
        del os.environ["GITHUB_STEP_SUMMARY"]
    out = capsys.readouterr().out
    lines = out.splitlines()
    errors = [ln for ln in lines if ln.startswith("::error ")]
    warnings = [ln for ln in lines if ln.startswith("::warning ")]
    assert len(errors) == 1 and "gpu-ecc" in errors[0]
    assert len(warnings) == 2 and {"nvcc-mismatch", "odd-chars"} == {re.match(r"::warning title=stackdoctor ([\w-]+)%3A", w).group(1) for w in warnings}
    assert all(re.fullmatch(r"::(error|warning) title=[^:\n]*::[^\n\r]*", ln) for ln in errors + warnings)
    assert lines[-1] == "stackdoctor: 1 failed, 2 warnings, 1 ok"
    assert "\x00" not in out and "\x1b" not in out
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n"), "the summary is appended, not overwritten"
    assert "| Status | Check | Finding |" in text and "`gpu-ecc`" in text and "`odd-chars`" in text
    assert "Raw tool outputs" not in text  # the summary stays small
    assert "<b>" not in text and "&lt;b&gt;html&lt;/b&gt;" in text
    assert_clean(out, "github annotations")
    assert_clean(text, "step summary")


def test_github_cli_run_in_a_workspace(tmp_path):
    """A GitHub-format run as a workflow step would do it: exit code gates, annotations on stdout."""
    rep = planted_report()
    rpath = tmp_path / "report.json"
    rpath.write_text(rep.to_json(), encoding="utf-8")
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.stackdoctor]\nmin_gpus = 4\nbackend = "cuda"\n', encoding="utf-8")
    summary = tmp_path / "summary.md"
    r = run_cli("check", "--replay", str(rpath), "--config", str(cfg), "--format", "github", cwd=tmp_path, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.returncode == 1, r.stderr
    errs = [ln for ln in r.stdout.splitlines() if ln.startswith("::error ")]
    assert any("requirement-unmet" in ln and "4 GPU" in unescape(ln) for ln in errs), r.stdout
    body = summary.read_text(encoding="utf-8")
    assert "requirement-unmet" in body and "## stackdoctor check" in body
    assert_clean(r.stdout, "github CLI stdout")
    assert_clean(body, "github CLI summary")


# ---------------------------------------------------------------------------- junit


def test_junit_parses_and_counts_match():
    rep = mixed_report()
    xml = render_junit(rep)
    root = ET.fromstring(xml.encode("utf-8"))
    findings = root.find("testsuite[@name='stackdoctor.findings']")
    probes = root.find("testsuite[@name='stackdoctor.probes']")
    assert findings is not None and probes is not None
    cases = findings.findall("testcase")
    assert len(cases) == len(rep.findings) == int(findings.get("tests"))
    n_fail = sum(f.severity == "fail" for f in rep.findings)
    assert int(findings.get("failures")) == n_fail == len(findings.findall("testcase/failure"))
    assert [c.get("name") for c in cases] == [f.code for f in rep.findings]
    assert int(probes.get("skipped")) == sum(p.status == "skipped" for p in rep.probes) == len(probes.findall("testcase/skipped"))
    assert int(root.get("tests")) == len(rep.findings) + len(rep.probes)
    assert int(root.get("failures")) == n_fail
    warn = next(c for c in cases if c.get("name") == "odd-chars")
    assert warn.find("failure") is None and warn.find("system-out").text.startswith("WARNING: ")
    assert "\x00" not in xml and "\x1b" not in xml


def test_junit_duplicate_codes_get_distinct_names():
    rep = planted_report()
    rep.findings = [Finding("kernel-failed", "fail", "a"), Finding("kernel-failed", "fail", "b")]
    rep.probes = [ProbeStatus("nvidia", "timeout", 5.0, "nvidia probe did not finish")]
    root = ET.fromstring(render_junit(rep))
    assert [c.get("name") for c in root.iter("testcase")] == ["kernel-failed", "kernel-failed [2]", "nvidia"]
    assert root.get("failures") == "2" and root.get("skipped") == "0"


# ---------------------------------------------------------------------------- markdown and redaction


def test_markdown_structure():
    md = render_markdown(mixed_report(), redacted=True)
    assert md.index("| Status | Check | Finding |") < md.index("### Stack") < md.index("### Findings") < md.index("### Raw tool outputs")
    assert md.count("<details>") == md.count("</details>") >= 10
    # a fence inside a detail does not close the report's own fences
    assert "``` fence" not in md and "\\`\\`\\` fence" in md
    assert "\x1b" not in md and "\x00" not in md
    for line in md.splitlines():
        if line.startswith("| ") and "Status" not in line and "---" not in line:
            assert line.count(" | ") + 2 == line.count("|") - line.count("\\|"), line


@pytest.mark.parametrize("fmt", ["markdown", "github", "junit"])
def test_ci_formats_are_redacted(fmt, tmp_path):
    out = tmp_path / f"out.{fmt}"
    write_output(mixed_report(), fmt, str(out), console=Console(file=io.StringIO()), redact_default=False)
    assert_clean(out.read_text(encoding="utf-8"), fmt)


def test_json_is_unredacted_unless_asked():
    rep = planted_report()
    assert HOST in format_report(rep, "json")
    assert_clean(format_report(rep, "json", redact=True), "redacted json")


def test_check_json_stays_unredacted_and_markdown_does_not(tmp_path):
    rpath = tmp_path / "report.json"
    rpath.write_text(planted_report().to_json(), encoding="utf-8")
    r = run_cli("check", "--replay", str(rpath), "--json")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["facts"]["platform"]["hostname"] == HOST
    r = run_cli("check", "--replay", str(rpath), "--format", "markdown")
    assert r.returncode in (0, 1), r.stderr
    assert "| Status | Check | Finding |" in r.stdout
    assert_clean(r.stdout, "check --format markdown")


# ---------------------------------------------------------------------------- --output


def test_output_file_is_written_whole(tmp_path):
    p = tmp_path / "r.xml"
    p.write_text("old", encoding="utf-8")
    write_output(planted_report(), "junit", str(p), console=Console(file=io.StringIO()), redact_default=False)
    ET.parse(p)
    assert [x.name for x in tmp_path.iterdir()] == ["r.xml"], "no temporary file left behind"


@pytest.mark.parametrize("case", ["missing-dir", "read-only", "directory", "dev-full"])
def test_output_errors_are_one_sentence_and_leave_nothing_half_written(tmp_path, case):
    if case == "missing-dir":
        target, needle = tmp_path / "nope" / "r.json", "does not exist"
    elif case == "read-only":
        target, needle = tmp_path / "r.json", "read-only"
        target.write_text("keep me", encoding="utf-8")
        target.chmod(0o444)
    elif case == "directory":
        target, needle = tmp_path, "is a directory"
    else:
        target, needle = Path("/dev/full"), "no space left"
        if not target.exists():
            pytest.skip("no /dev/full here")
    with pytest.raises(UsageError, match=needle) as ei:
        write_text_file(target, "x" * 100_000)
    assert str(target) in str(ei.value) and "\n" not in str(ei.value)
    if case == "read-only":
        assert target.read_text(encoding="utf-8") == "keep me"
    if case != "dev-full":
        assert not [x for x in tmp_path.rglob(".*.tmp")]


def test_output_error_exit_code_via_cli(tmp_path):
    rpath = tmp_path / "report.json"
    rpath.write_text(planted_report().to_json(), encoding="utf-8")
    r = run_cli("check", "--replay", str(rpath), "--format", "junit", "-o", str(tmp_path / "missing" / "out.xml"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("check", "--replay", str(rpath), "--format", "junit", "-o", str(tmp_path / "out.xml"))
    assert r.returncode in (0, 1) and r.stdout == ""
    ET.parse(tmp_path / "out.xml")


# ---------------------------------------------------------------------------- action.yml


def test_action_check_step_runs_as_a_workflow_would(tmp_path):
    """action.yml parses; its check step, run by bash with a runner's variables, annotates and gates."""
    import yaml

    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    assert {"args", "python-version", "config"} <= set(action["inputs"])
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "check")
    assert "${{" not in step["run"], "inputs must reach the script through env, not be pasted into it"
    rpath = tmp_path / "report.json"
    rpath.write_text(planted_report().to_json(), encoding="utf-8")
    cfg = tmp_path / "gpu.toml"
    cfg.write_text("min_gpus = 8\n", encoding="utf-8")
    out, summary = tmp_path / "github_output", tmp_path / "summary.md"
    env = {
        **os.environ,
        "STACKDOCTOR_ACTION_PY": sys.executable,
        "SD_ARGS": f"--replay {rpath}",
        "SD_CONFIG": str(cfg),
        "SD_TARGET": "",
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    r = subprocess.run(["bash", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert out.read_text() == "exit-code=1\n"
    assert any(ln.startswith("::error title=stackdoctor requirement-unmet") for ln in r.stdout.splitlines()), r.stdout
    assert "requirement-unmet" in summary.read_text()


def test_markdown_stays_under_githubs_issue_limit():
    rep = planted_report()
    big = "GPU 0 line of a very long nvidia-smi -q output\n" * 2000
    rep.raw_outputs = [{"argv": ["nvidia-smi", "-q", "-i", str(i)], "returncode": 0, "status": "ok", "stdout": big, "stderr": ""} for i in range(12)]
    md = render_markdown(rep)
    assert len(md) < 65_536
    assert "more characters in report.json" in md and "more tool output(s) are in report.json" in md
    assert "`nvidia-smi -q -i 11`" in md  # left-out runs are still named


def test_human_format_to_a_file(tmp_path):
    rpath = tmp_path / "report.json"
    rpath.write_text(planted_report().to_json(), encoding="utf-8")
    out = tmp_path / "screen.txt"
    r = run_cli("check", "--replay", str(rpath), "--format", "human", "-o", str(out))
    assert r.returncode in (0, 1), r.stderr
    text = out.read_text(encoding="utf-8")
    assert "\x1b[" not in text and ("ok" in text or "fail" in text)


def test_shipped_schema_is_the_generated_one():
    """``stackdoctor/schemas/report.schema.json`` is ``python -m stackdoctor._schema``'s output, never stale."""
    import stackdoctor

    shipped = Path(stackdoctor.__file__).parent / "schemas" / "report.schema.json"
    made = subprocess.run([sys.executable, "-m", "stackdoctor._schema"], capture_output=True, text=True, check=True).stdout
    assert json.loads(made) == json.loads(shipped.read_text(encoding="utf-8"))
