"""``stackdoctor report``: the ticket bundle, redacted, replayable, previewable, never clobbering.

Runs the real CLI in a subprocess: on the planted synthetic machine of test_redact.py through
``--replay``, and live on this machine with secrets planted in the environment and a fake
``nvidia-smi`` on PATH that prints a GPU UUID and a serial number.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_redact import assert_clean, planted_report

from stackdoctor.commands.report import default_dir
from stackdoctor.model.report import load_report

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, **(env or {})}
    e.pop("GITHUB_STEP_SUMMARY", None)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def planted(tmp_path) -> Path:
    p = tmp_path / "planted.json"
    p.write_text(planted_report().to_json(), encoding="utf-8")
    return p


def pairs(stdout: str) -> list[tuple[str, str]]:
    return [(f["code"], f["severity"]) for f in json.loads(stdout)["findings"]]


def test_bundle_is_redacted_and_replays_to_the_same_findings_and_plan(tmp_path, planted):
    out = tmp_path / "bundle"
    r = run("report", "--replay", str(planted), "-o", str(out), cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert sorted(x.name for x in out.iterdir()) == ["report.html", "report.json", "report.md"]
    js, md = (out / "report.json").read_text(encoding="utf-8"), (out / "report.md").read_text(encoding="utf-8")
    assert_clean(js, "report.json")
    assert_clean(md, "report.md")
    assert "Redacted (" in r.stderr
    load_report(out / "report.json")  # a valid report
    from helpers import validate_report

    validate_report(json.loads(js))  # jsonschema is a declared test dependency: never a skip
    assert md.index("| Status | Check | Finding |") < md.index("<details>")
    # the same findings on replay, original vs redacted
    a = run("check", "--replay", str(planted), "--json", cwd=tmp_path)
    b = run("check", "--replay", str(out / "report.json"), "--json", cwd=tmp_path)
    assert a.returncode == b.returncode and a.returncode in (0, 1), (a.stderr, b.stderr)
    assert pairs(a.stdout) == pairs(b.stdout) and pairs(a.stdout)
    # the same install plan
    pa = run("install", "--replay", str(planted), "--offline", "--json", cwd=tmp_path)
    pb = run("install", "--replay", str(out / "report.json"), "--offline", "--json", cwd=tmp_path)
    assert pa.returncode == pb.returncode, (pa.stderr, pb.stderr)
    ja, jb = json.loads(pa.stdout), json.loads(pb.stdout)
    keys = ("torch_version", "variant", "index_url", "packages")
    assert {k: ja.get(k) for k in keys} == {k: jb.get(k) for k in keys}


def test_redacted_replay_with_visible_devices_prefix(tmp_path):
    """CUDA_VISIBLE_DEVICES holding a UUID prefix still selects the same GPU after redaction."""
    rep = planted_report()
    rep.facts.environment["CUDA_VISIBLE_DEVICES"] = "GPU-5f8a0c2d"
    p = tmp_path / "r.json"
    p.write_text(rep.to_json(), encoding="utf-8")
    out = tmp_path / "b"
    assert run("report", "--replay", str(p), "-o", str(out), cwd=tmp_path).returncode in (0, 1)
    assert json.loads((out / "report.json").read_text())["facts"]["environment"]["CUDA_VISIBLE_DEVICES"] == "GPU-<gpu-uuid-1>"
    a = run("check", "--replay", str(p), "--json", cwd=tmp_path)
    b = run("check", "--replay", str(out / "report.json"), "--json", cwd=tmp_path)
    assert pairs(a.stdout) == pairs(b.stdout)


def test_requirements_recorded_in_the_report_win_on_replay(tmp_path, planted):
    """--replay uses the requirements the report recorded, not a config lying where it is replayed."""
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nmin_gpus = 64\n', encoding="utf-8")
    r = run("check", "--replay", str(planted), "--json", cwd=tmp_path)
    assert ("requirement-unmet", "fail") not in pairs(r.stdout)
    r = run("check", "--replay", str(planted), "--json", "--config", str(tmp_path / "pyproject.toml"), cwd=tmp_path)
    assert r.returncode == 1 and ("requirement-unmet", "fail") in pairs(r.stdout)
    assert json.loads(r.stdout)["requirements"]["values"]["min_gpus"] == 64


def test_preview_prints_exactly_what_would_be_written(tmp_path, planted):
    out = tmp_path / "bundle"
    p = run("report", "--replay", str(planted), "-o", str(out), "--preview", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    assert not out.exists()
    w = run("report", "--replay", str(planted), "-o", str(out), cwd=tmp_path)
    assert w.returncode == p.returncode
    expected = f"==> {out / 'report.json'} <==\n" + (out / "report.json").read_text() + f"\n==> {out / 'report.md'} <==\n" + (out / "report.md").read_text()
    assert p.stdout == expected


def test_no_redact_is_loud(tmp_path, planted):
    out = tmp_path / "raw"
    r = run("report", "--replay", str(planted), "-o", str(out), "--no-redact", cwd=tmp_path)
    assert "--no-redact" in r.stderr and "warning" in r.stderr
    assert "gpu-node-17.corp.example.com" in (out / "report.json").read_text()
    assert "**not redacted**" in (out / "report.md").read_text()


def test_never_overwrites_without_saying(tmp_path, planted):
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "report.json").write_text("mine", encoding="utf-8")
    r = run("report", "--replay", str(planted), "-o", str(out), cwd=tmp_path)
    assert r.returncode == 2 and "--force" in r.stderr and "Traceback" not in r.stderr
    assert (out / "report.json").read_text() == "mine"
    r = run("report", "--replay", str(planted), "-o", str(out), "--force", cwd=tmp_path)
    assert r.returncode in (0, 1) and (out / "report.json").read_text() != "mine"
    # default folder: a fresh one when today's exists and is not empty
    today = dt.date(2026, 11, 29)
    first = default_dir(tmp_path, today)
    assert first.name == "stackdoctor-report-2026-11-29"
    first.mkdir()
    assert default_dir(tmp_path, today) == first  # empty: reuse
    (first / "x").write_text("x")
    assert default_dir(tmp_path, today).name == "stackdoctor-report-2026-11-29-2"


def test_default_folder_live_run_with_planted_secrets(tmp_path, fake_bin):
    """A live run on this machine: secrets in the environment, a UUID and serial in a tool's output."""
    uuid, serial = "GPU-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0324918051234"
    fake_bin("nvidia-smi", stdout=f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {uuid})\n    Serial Number : {serial}\n")
    env = {
        "PATH": os.environ["PATH"],
        "PIP_INDEX_URL": "https://alicezhang:pipS3cretPw@pypi.corp.example.com/simple",
        "TORCH_HUB_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "CUDA_HOME": "/home/alicezhang/cuda-12.4",
        "NCCL_SOCKET_IFNAME": "eth0",
        "UV_INDEX_PASSWORD": "hunter2hunter2",
    }
    r = run("report", "--no-kernels", "--timeout", "5", cwd=tmp_path, env=env)
    assert r.returncode in (0, 1), r.stderr
    (folder,) = [d for d in tmp_path.iterdir() if d.name.startswith("stackdoctor-report-")]
    text = (folder / "report.json").read_text() + (folder / "report.md").read_text()
    data = json.loads((folder / "report.json").read_text())
    assert any("nvidia-smi" in " ".join(x["argv"]) for x in data["raw_outputs"]), "the fake tool ran"
    for secret in (uuid, uuid[4:], serial, "pipS3cretPw", "alicezhang", "hf_AbCdEfGh", "hunter2hunter2"):
        assert secret not in text, secret
    host = data["facts"]["platform"]["hostname"]
    assert host is None or host.startswith("<host-")
    assert data["facts"]["environment"]["NCCL_SOCKET_IFNAME"] == "eth0"
