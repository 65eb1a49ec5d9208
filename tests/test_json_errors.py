"""A ``--json`` command that could not run still answers in JSON (issue 35, item 11): one document on stdout
(``stackdoctor.error/1``, ``schemas/error.schema.json``; ``install`` its own plan document with ``error`` set), the
exit code of the failure, and one sentence on stderr. A CI preflight that parses stdout never gets an empty or
non-JSON one. Every case is the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import console_script, machine_env, run_sd, schema_validator


def _error_doc(run, command: str, code: int, kind: str = "usage") -> dict:
    assert run.rc == code, (run.rc, run.stdout, run.stderr)
    doc = json.loads(run.stdout)  # the whole of stdout is one document
    schema_validator("error.schema.json").validate(doc)
    assert doc["schema"] == "stackdoctor.error/1"
    assert doc["command"] == command
    assert doc["error"]["kind"] == kind and doc["error"]["exit_code"] == code
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackdoctor: "), run.stderr  # one sentence on stderr, as before
    return doc


def test_check_json_with_a_missing_python_is_an_error_document():
    run = run_sd(["check", "--json", "--python", "/nope"])
    doc = _error_doc(run, "check", 2)
    assert doc["error"]["message"] == "--python /nope: no such file."
    assert "/nope" in run.stderr


@pytest.mark.parametrize("args", [
    ["check", "--format", "json", "--timeout", "soon"],  # click refuses the value before check runs
    ["check", "--format=json", "--no-such-flag"],
    ["check", "--json", "--lang", "xx"],
    ["check", "--json", "--only", "no-such-code-at-all"],
])
def test_check_json_bad_flags_are_error_documents(args):
    _error_doc(run_sd(args), "check", 2)


def test_check_json_with_a_broken_replay_is_an_error_document(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text('{"schema": "stackdoctor.report/1", "facts": {', encoding="utf-8")
    doc = _error_doc(run_sd(["check", "--json", "--replay", str(bad)]), "check", 2)
    assert str(bad) in doc["error"]["message"]


def test_zh_keeps_the_document_machine_readable():
    env = {**os.environ, "LANG": "zh_CN.UTF-8", "LC_ALL": "zh_CN.UTF-8"}
    run = run_sd(["check", "--json", "--python", "/nope"], env=env)
    doc = _error_doc(run, "check", 2)
    assert doc["error"]["kind"] == "usage"


@pytest.mark.parametrize("args,command", [
    (["diff", "--json", "/nope/a.json", "/nope/b.json"], "diff"),
    (["matrix", "show", "--json", "--torch", "9.9"], "matrix"),
    (["kernels", "--json", "--python", "/nope"], "kernels"),
])
def test_other_json_commands_answer_in_json(args, command):
    _error_doc(run_sd(args), command, 2)


def test_install_json_click_error_is_its_plan_document():
    run = run_sd(["install", "--json", "--torch"])  # the value is missing: click stops it before install runs
    assert run.rc == 2
    doc = json.loads(run.stdout)
    schema_validator("plan.schema.json").validate(doc)
    assert doc["schema"] == "stackdoctor.plan/1" and doc["error"]["kind"] == "usage" and doc["error"]["exit_code"] == 2


def test_install_json_that_answered_itself_is_not_answered_twice():
    run = run_sd(["install", "--json", "--dry-run", "--python", "/nope"])
    assert run.rc == 2
    doc = json.loads(run.stdout)  # one document only: install's own, not a second error document after it
    assert doc["schema"] == "stackdoctor.plan/1" and doc["error"]["message"] == "--python /nope: no such file."


def test_without_json_stdout_stays_empty():
    run = run_sd(["check", "--python", "/nope"])
    assert run.rc == 2 and run.stdout == "" and "no such file" in run.stderr
    other = run_sd(["check", "--format", "markdown", "--python", "/nope"])  # another format asked for: no JSON promised
    assert other.rc == 2 and other.stdout == ""


def test_a_check_that_ran_prints_only_its_report(plain_python, tmp_path):
    run = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=machine_env(tmp_path))
    assert run.rc in (0, 1)
    assert json.loads(run.stdout)["schema"] == "stackdoctor.report/1"


def test_sigterm_during_check_json_is_an_error_document(tmp_path):
    """A CI job's timeout (SIGTERM) while check waits on a hanging target: exit 143 and still one JSON document."""
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 60\n", encoding="utf-8")
    slow.chmod(0o755)
    proc = subprocess.Popen([*console_script(), "check", "--json", "--python", str(slow)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=machine_env(tmp_path))
    time.sleep(3.0 if sys.platform == "linux" else 5.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    doc = json.loads(out)
    schema_validator("error.schema.json").validate(doc)
    assert doc["error"]["kind"] == "terminated" and doc["error"]["exit_code"] == 143
    assert "SIGTERM" in err and len(err.strip().splitlines()) == 1
