"""The screen on a console that cannot encode every character: a Chinese (cp936) or Western
(cp1252) Windows code page. Through the real CLI: a readable screen, the same exit code as on
UTF-8, never ``UnicodeEncodeError``."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import console_script, machine_env

from stackdoctor.core.console import ASCII_MARKS, UNICODE_MARKS, SafeStream, can_encode, make_console, marks
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, KernelFacts, from_data
from stackdoctor.model.report import Finding, Report
from stackdoctor.reconcile import reconcile

MACHINES = Path(__file__).parent / "fixtures" / "machines"
BROKEN = MACHINES / "c14-rtx4070-driver550.json"  # a real RTX 4070 on 550.40.07: fails and warnings


def stream(encoding: str) -> io.TextIOWrapper:
    """A text stream with a legacy code page, as Python opens a redirected Windows console."""
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding, newline="\n")


def text_of(s: io.TextIOWrapper) -> str:
    s.flush()
    return s.buffer.getvalue().decode(s.encoding)  # type: ignore[attr-defined]


def report_with_every_mark() -> Report:
    facts = from_data(Facts, json.loads(BROKEN.read_text())["facts"])  # no torch: the tree has ok, warn and none marks
    facts = reconcile(facts, load_matrix([]))  # as the pipeline hands them to the screen
    return Report(facts=facts, findings=[
        Finding(code="driver-too-old", severity="fail", title="The NVIDIA driver is too old", detail="d", fix="f", layer="driver"),
        Finding(code="torch-missing", severity="warn", title="PyTorch is not installed", detail="d", fix="f", layer="torch"),
        Finding(code="gpu-ok", severity="ok", title="GPU", layer="gpu"),
    ])


@pytest.mark.parametrize("encoding", ["cp936", "cp1252", "ascii"])
def test_marks_fall_back_to_ascii_where_the_glyphs_cannot_be_encoded(encoding):
    console = make_console(file=stream(encoding), width=100)
    mk = marks(console)
    assert {k: mk[k] for k in ASCII_MARKS} == ASCII_MARKS
    assert mk["bar"] == ("█" if can_encode("█", encoding) else "#")
    assert mk["spinner"] == "line"
    assert len({len(mk[k][0]) for k in ASCII_MARKS}) == 1  # one width: the tree's columns stay aligned


def test_utf8_keeps_the_glyphs():
    mk = marks(make_console(file=stream("utf-8"), width=100))
    assert {k: mk[k] for k in UNICODE_MARKS} == UNICODE_MARKS and mk["bar"] == "█" and mk["spinner"] == "dots"
    assert marks(make_console(file=io.StringIO()))["ok"] == UNICODE_MARKS["ok"]  # StringIO: no encoding, UTF-8 text


@pytest.mark.parametrize("encoding", ["cp936", "cp1252"])
def test_the_check_screen_renders_on_a_legacy_code_page(encoding):
    from stackdoctor.render.human import render_report

    out = stream(encoding)
    render_report(report_with_every_mark(), make_console(file=out, width=100), verbose=True)
    screen = text_of(out)
    assert "ok python" in screen or "ok torch" in screen or "ok gpu" in screen
    assert "x  driver-too-old" in screen and "!! torch-missing" in screen
    assert "`--" in screen  # rich drew the tree with ASCII guides for this encoding
    assert "NVIDIA GeForce RTX 4070" in screen


def test_chinese_prints_on_cp936_and_is_replaced_on_cp1252():
    from stackdoctor.render.human import render_report

    report = report_with_every_mark()
    gbk = stream("cp936")
    render_report(report, make_console(file=gbk, width=100), lang="zh")
    assert "项" in text_of(gbk)  # GBK encodes CJK: the summary line is Chinese
    western = stream("cp1252")
    render_report(report, make_console(file=western, width=100), lang="zh")
    last = text_of(western).strip().splitlines()[-1]
    assert "?" in last and "1" in last  # the codec's replacement, not a crash


def test_safe_stream_replaces_instead_of_raising():
    raw = stream("cp1252")
    safe = SafeStream(raw)
    assert safe.write("ok ✓ 中\n") == len("ok ✓ 中\n")
    assert text_of(raw) == "ok ? ?\n"
    assert safe.encoding == "cp1252" and safe.isatty() is False


def test_busbw_chart_uses_hash_bars_on_cp1252(monkeypatch):
    from stackdoctor.render.kernel_screens import print_kernels

    summary = {"status": "ok", "backend": "gloo", "world_size": 2, "device": "cpu", "avg_busbw_gbs": 1.0, "max_busbw_gbs": 2.0,
               "rows": [{"bytes": n, "count": n // 4,
                         "ip": {"time_us": 5.0, "algbw": bw, "busbw": bw, "wrong": 0},
                         "oop": {"time_us": 5.0, "algbw": bw, "busbw": bw, "wrong": 0}} for n, bw in ((1024, 1.0), (2048, 2.0))]}
    out = stream("cp1252")
    monkeypatch.setattr("sys.stdout", out)
    print_kernels(KernelFacts(ran=True, mode="full", allreduce=summary), [])
    screen = text_of(out)
    assert "#" * 30 in screen and "█" not in screen


# ---------------------------------------------------------------------------- the real CLI


def run_bytes(args: list[str], encoding: str, tmp_path: Path, **env: str) -> tuple[int, str, str]:
    """The console script with stdout/stderr in ``encoding``: (exit code, stdout, stderr) decoded with it."""
    full = machine_env(tmp_path / "bin", None, PATH=os.environ.get("PATH", ""), HOME=str(tmp_path), PYTHONIOENCODING=encoding, **env)
    proc = subprocess.run([*console_script(), *args], capture_output=True, env=full, timeout=120)
    out, err = proc.stdout.decode(encoding), proc.stderr.decode(encoding)
    assert "Traceback" not in err and "UnicodeEncodeError" not in err, err
    return proc.returncode, out, err


@pytest.fixture
def broken_report(tmp_path) -> Path:
    """c14's real RTX 4070 on driver 550.40.07 with a cu130 torch that cannot initialise CUDA there."""
    facts = json.loads(BROKEN.read_text())["facts"]
    facts["torch"] = {"installed": True, "version": "2.13.0+cu130", "variant": "cu130", "cuda": "13.0", "cuda_available": False}
    p = tmp_path / "report.json"
    p.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    return p


@pytest.mark.parametrize("encoding", ["cp936", "cp1252"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_check_on_a_legacy_console_prints_the_screen_and_exits_as_on_utf8(encoding, lang, broken_report, tmp_path):
    want_rc, utf8, _ = run_bytes(["check", "--replay", str(broken_report), "--lang", lang], "utf-8", tmp_path)
    rc, screen, err = run_bytes(["check", "--replay", str(broken_report), "--lang", lang], encoding, tmp_path)
    assert rc == want_rc == 1, err  # the machine has failing findings
    assert "internal error" not in err
    assert "x  driver-too-old" in screen and "✗ driver-too-old" in utf8
    assert "NVIDIA GeForce RTX 4070" in screen and "\x1b[" not in screen  # redirected + NO_COLOR: no escapes
    assert len(screen.splitlines()) == len(utf8.splitlines())  # the same screen, line for line
    if lang == "zh" and encoding == "cp936":
        assert screen.strip().splitlines()[-1] == utf8.strip().splitlines()[-1]  # GBK prints the Chinese summary as is


def test_live_check_on_cp936_exits_as_on_utf8(tmp_path, torch_python):
    want_rc, _, _ = run_bytes(["check", "--no-kernels", "--python", torch_python], "utf-8", tmp_path)
    rc, screen, err = run_bytes(["check", "--no-kernels", "--python", torch_python], "cp936", tmp_path)
    assert rc == want_rc and rc in (0, 1), err
    assert screen.startswith(("ok python", "!! python", "x  python")) and "torch 2.13.0" in screen


@pytest.mark.parametrize("encoding", ["cp936", "cp1252"])
def test_machine_formats_stay_utf8_on_a_legacy_console(encoding, broken_report, tmp_path):
    full = machine_env(tmp_path / "bin", None, PATH=os.environ.get("PATH", ""), HOME=str(tmp_path), PYTHONIOENCODING=encoding)
    proc = subprocess.run([*console_script(), "check", "--replay", str(broken_report), "--json", "--lang", "zh"],
                          capture_output=True, env=full, timeout=120)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout.decode("utf-8"))  # UTF-8 bytes whatever the code page: nothing lost
    assert any("驱动" in f["title"] for f in data["findings"])


@pytest.mark.parametrize("args", [["explain", "driver-too-old", "--lang", "zh"], ["explain", "--lang", "zh"], ["check", "--list-checks", "--lang", "zh"]])
def test_plain_text_commands_do_not_crash_on_cp1252(args, tmp_path):
    rc, out, err = run_bytes(args, "cp1252", tmp_path)
    assert rc == 0 and out.strip(), err
