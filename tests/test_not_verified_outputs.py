"""Issue 42, "unverified is a verdict", on every output of `check`: a CUDA torch (2.7.0+cu126, from the public thread
in tests/fixtures/real/e-802-c10-torch270-llamafactory-7888) on the recorded H200 machine's driver and GPU
(tests/fixtures/real/d01-h200-driver580-open-kernel-module-lent-device: 580.159.04, CUDA 13.0) read on the fast path
(torch from its files, not started) is replayed through the real CLI in each format: every other layer verified. runtime-not-verified fails nothing (exit 0,
--strict too) yet no output shows it as a passed check: JUnit skips it with the command that verifies it, GitHub
gives a ::notice and a "not verified" summary, Markdown and HTML mark it not verified, and no summary is all-ok.
The same machine with torch's recorded error on the import path is the control: a failed layer, no skip."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import machine_env, run_sd
from test_recorded_error_codes import HERE, machine

from stackdoctor.model.facts import NvidiaGpu
from stackdoctor.model.report import Report

CASE = HERE / "fixtures" / "real" / "e-802-c10-torch270-llamafactory-7888"
VERIFY = "stackdoctor check --no-kernels --import-torch"


def replay(tmp_path: Path, fmt: str, *, imported: bool = False, strict: bool = False, **extra: str):
    path = tmp_path / f"{'imported' if imported else 'fast'}.json"
    facts = machine(CASE, imported=imported)
    if not imported:  # the recorded H200's nvidia-smi (d01): a driver that runs torch's CUDA 12.6, one GPU
        facts.nvidia.driver_version, facts.nvidia.smi_state, facts.nvidia.cuda_driver_version = "580.159.04", "ok", "13.0"
        facts.nvidia.gpus = [NvidiaGpu(index=0, name="NVIDIA H200")]
    path.write_text(Report(facts=facts).to_json(), encoding="utf-8")
    args = ["check", "--replay", str(path), "--format", fmt, *(["--strict"] if strict else [])]
    return run_sd(args, env=machine_env(tmp_path / "bin", None, COLUMNS="200", **extra))


@pytest.mark.parametrize("strict", [False, True])
def test_json_counts_it_apart_and_it_fails_nothing(tmp_path, strict):
    run = replay(tmp_path, "json", strict=strict)
    data = json.loads(run.stdout)
    (nv,) = [f for f in data["findings"] if f["code"] == "runtime-not-verified"]
    assert nv["severity"] == "ok"  # the exit axis: it fails nothing
    runtime = {v["layer"]: v for v in data["layers"]}["runtime"]
    assert runtime["status"] == "not-verified" and runtime["by"] == ["runtime-not-verified"]
    assert {f["severity"] for f in data["findings"]} == {"ok"}, data["findings"]  # every other layer verified
    assert run.rc == 0, (strict, run.stderr)  # what was not verified is said, it fails nothing (--strict neither)
    assert {v["layer"]: v["status"] for v in data["layers"]}["driver"] == "verified"


def test_junit_skips_it_with_the_command_that_verifies_it(tmp_path):
    run = replay(tmp_path, "junit")
    root = ET.fromstring(run.stdout)
    suite = root.find("testsuite[@name='stackdoctor.findings']")
    (case,) = suite.findall("testcase[@name='runtime-not-verified']")
    skipped = case.find("skipped")
    assert skipped is not None and VERIFY in skipped.get("message"), ET.tostring(case, encoding="unicode")
    assert case.find("failure") is None
    assert suite.get("skipped") == "1" and int(root.get("skipped")) >= 1
    control = ET.fromstring(replay(tmp_path, "junit", imported=True).stdout)
    assert not control.findall(".//testcase[@name='runtime-not-verified']")
    assert control.find(".//testcase[@name='runtime-error-code']/failure") is not None


def test_github_says_not_verified_in_the_log_and_the_summary(tmp_path):
    summary = tmp_path / "summary.md"
    run = replay(tmp_path, "github", GITHUB_STEP_SUMMARY=str(summary))
    notices = [line for line in run.stdout.splitlines() if line.startswith("::notice title=stackdoctor runtime-not-verified")]
    assert len(notices) == 1 and VERIFY in notices[0], run.stdout
    last = run.stdout.strip().splitlines()[-1]
    assert last == "stackdoctor: 0 failed, 0 warnings, 4 ok; not verified: the GPU runtime (stackdoctor check --import-torch)", last
    assert run.rc == 0
    page = summary.read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if "`runtime-not-verified`" in line and line.startswith("|")]
    assert rows and all("❔ not verified" in r and "✅" not in r for r in rows), rows
    assert re.search(r"### ❔ not verified · `runtime-not-verified`", page), page
    assert "not verified: the GPU runtime" in page


def test_markdown_and_html_mark_it_not_verified(tmp_path):
    md = replay(tmp_path, "markdown").stdout
    assert "| ❔ not verified | `runtime-not-verified` |" in md
    assert "✅ ok | `runtime-not-verified`" not in md and VERIFY in md
    page = replay(tmp_path, "html").stdout
    assert '<section class="finding not-verified" id="runtime-not-verified">' in page
    oks = re.search(r'<p class="oks">(.*?)</p>', page, re.S)
    assert oks is None or "runtime-not-verified" not in oks.group(1)
    assert 'title="not-verified">?</span>' in page  # the runtime layer's mark in the stack


def test_the_screen_marks_the_runtime_layer_not_verified_in_chinese_too(tmp_path):
    out = replay(tmp_path, "human").stdout
    assert "not verified: the GPU runtime" in out and "? runtime-not-verified" in out, out
    zh = replay(tmp_path, "markdown", LANG="zh_CN.UTF-8").stdout
    assert "| ❔ 未验证 | `runtime-not-verified` |" in zh, zh


def h200_driver(case: str, *, imported: bool):
    """A recorded error text's machine with the recorded H200's driver and GPU as witnesses (d01, see above)."""
    facts = machine(HERE / "fixtures" / "real" / case, imported=imported)
    facts.nvidia.driver_version, facts.nvidia.smi_state, facts.nvidia.cuda_driver_version = "580.159.04", "ok", "13.0"
    facts.nvidia.gpus = [NvidiaGpu(index=0, name="NVIDIA H200")]
    return facts


@pytest.mark.parametrize(("case", "layer", "drawn_on"), [
    ("e-046-c10-exclusive-mode-timm-1033", "gpu", "gpu"),  # 46: a device in exclusive-process mode, busy
    ("e-802-c10-torch270-llamafactory-7888", "fabric-manager", "driver"),  # 802: the fabric manager not started
    ("e-034-c10-stub-libcuda-sd-docker-22", "runtime", "runtime"),  # 34: a stub libcuda loaded, as lib-path-shadowing
])
def test_an_error_numbers_layer_is_its_rows_not_the_drivers(tmp_path, case, layer, drawn_on):
    """runtime-error-code fails the layer its row points to (compat_matrix/runtime_errors.yaml), in the report's
    ``layers`` and on the screen's stack; the driver that answered is not marked failed by it."""
    path = tmp_path / "r.json"
    path.write_text(Report(facts=h200_driver(case, imported=True)).to_json(), encoding="utf-8")
    env = machine_env(tmp_path / "bin", None, COLUMNS="200")
    data = run_sd(["check", "--replay", str(path), "--json"], env=env).json()
    (hit,) = [f for f in data["findings"] if f["code"] == "runtime-error-code"]
    layers = {v["layer"]: v for v in data["layers"]}
    assert hit["layer"] == layer and layers[layer]["status"] == "failed" and "runtime-error-code" in layers[layer]["by"]
    assert layers["driver"]["status"] == ("verified" if layer != "driver" else "failed"), layers["driver"]
    assert "runtime-error-code" not in layers["driver"]["by"]
    screen = run_sd(["check", "--replay", str(path)], env=env).stdout
    marks = {m.group(2): m.group(1) for m in re.finditer(r"([✓✗!?·]) (driver|gpu|runtime) ", screen)}
    assert marks[drawn_on] == "✗", screen
    assert marks["driver"] == ("✓" if drawn_on != "driver" else "✗"), screen


def test_the_catalogues_listings_say_not_verified(tmp_path):
    env = machine_env(tmp_path / "bin", None, COLUMNS="200")
    assert "severity: not verified" in run_sd(["explain", "runtime-not-verified"], env=env).stdout
    listing = run_sd(["check", "--list-checks"], env=env).stdout
    assert re.search(r"^runtime-not-verified\s+not verified\s+runtime\b", listing, re.M), listing


def test_diff_says_not_verified_where_a_report_only_states_it(tmp_path):
    """`diff` of the fast-path report (runtime-not-verified) and the import-path one: the finding is "not verified"
    on the side that states it, in the table and in --json, never "ok" (the diff once showed its severity)."""
    fast, imported = tmp_path / "fast", tmp_path / "imported"
    fast.mkdir()
    imported.mkdir()
    a = replay(fast, "json")
    b = replay(imported, "json", imported=True)
    (tmp_path / "a.json").write_text(a.stdout, encoding="utf-8")
    (tmp_path / "b.json").write_text(b.stdout, encoding="utf-8")
    env = machine_env(tmp_path / "bin", None, COLUMNS="200")
    data = run_sd(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"], env=env).json()
    (nv,) = [d for d in data["differences"] if d["key"] == "findings.runtime-not-verified"]
    assert nv["a"] == "not-verified" and nv["b"] is None, nv
    for lang, word in (("en", "not verified"), ("zh", "未验证")):
        screen = run_sd(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--lang", lang], env=env).stdout
        (row,) = [ln for ln in screen.splitlines() if "runtime-not-verified" in ln]
        assert word in row and not re.search(r"\bok\b", row), row
