"""``check`` shows what a stopped install could not print (issue 29): the lines the install transaction kept in
``<env>/.stackdoctor-unprinted.json`` when its output pipe closed (``| tee`` killed by the same Ctrl-C) are a
warning naming the file and quoting them, in en and zh; check reads the file and never removes it (the next
install says and removes it). The file is written by the transaction's own writer (``save_unprinted``), and
each case is the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

from stackdoctor.install.talk import UNPRINTED_FILE, save_unprinted

LINES = [
    "stackdoctor: interrupted; putting back torch 2.12.0+cpu ...",
    "the previous torch 2.12.0+cpu was put back (complete: every file's sha256 checked) and imports.",
]


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    d = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    return d


def _check(env_dir: Path, tmp_path: Path, *extra: str, lang: str | None = None):
    env = machine_env(tmp_path / "bin")
    if lang:
        env["LANG"] = env["LC_ALL"] = lang
    return run_sd(["check", "--no-kernels", "--python", str(env_dir / "bin" / "python"), *extra], env=env)


def test_check_json_shows_the_unprinted_lines(env_dir, tmp_path):
    save_unprinted(str(env_dir), LINES)
    path = env_dir / UNPRINTED_FILE
    run = _check(env_dir, tmp_path, "--json")
    data = json.loads(run.stdout)
    assert data["facts"]["python"]["install_unprinted"] == LINES
    assert data["facts"]["python"]["sources"]["install_unprinted"] == str(path)
    (finding,) = [f for f in data["findings"] if f["code"] == "install-unprinted"]
    assert finding["severity"] == "warn"
    assert str(path) in finding["detail"] and all(line in finding["detail"] for line in LINES)
    assert finding["fix"].startswith(f"rm {path}")
    assert path.is_file()  # check only reads it


def test_check_screen_in_en_and_zh(env_dir, tmp_path):
    save_unprinted(str(env_dir), LINES)
    en = _check(env_dir, tmp_path, "--lang", "en")
    flat = " ".join(en.stdout.split())
    assert "install-unprinted" in flat and "could not print its last lines" in flat
    assert str(env_dir / UNPRINTED_FILE) in flat and "putting back torch 2.12.0+cpu" in flat and "was put back" in flat
    save_unprinted(str(env_dir), LINES)  # kept again (the en check said them, so they were let go)
    zh = _check(env_dir, tmp_path, lang="zh_CN.UTF-8")
    flat_zh = " ".join(zh.stdout.split())
    assert "未能打印它的最后几行" in flat_zh and "内容是" in flat_zh and str(env_dir / UNPRINTED_FILE) in flat_zh
    assert "putting back torch 2.12.0+cpu" in flat_zh  # the install's own words, quoted as it wrote them
    assert "could not print" not in flat_zh


def test_no_file_or_a_broken_one_is_no_finding(env_dir, tmp_path):
    run = _check(env_dir, tmp_path, "--json")
    assert "install-unprinted" not in {f["code"] for f in json.loads(run.stdout)["findings"]}
    (env_dir / UNPRINTED_FILE).write_text('{"lines": [', encoding="utf-8")
    run = _check(env_dir, tmp_path, "--json")
    data = json.loads(run.stdout)
    assert data["facts"]["python"]["install_unprinted"] == []
    assert "install-unprinted" not in {f["code"] for f in data["findings"]}


def test_the_next_install_removes_what_check_showed(env_dir, tmp_path):
    """What check's fix says: the next install run into the environment (here --recover) says the lines and removes the file."""
    save_unprinted(str(env_dir), LINES)
    env = {**machine_env(tmp_path / "bin"), "PIP_CONFIG_FILE": os.devnull}
    rec = run_sd(["install", "--python", str(env_dir / "bin" / "python"), "--recover"], env=env)
    assert rec.rc == 0, rec.stderr
    assert all(line in rec.stderr for line in LINES)
    assert not (env_dir / UNPRINTED_FILE).exists()
    again = _check(env_dir, tmp_path, "--json")
    assert "install-unprinted" not in {f["code"] for f in json.loads(again.stdout)["findings"]}


def test_said_once_then_let_go_strict_fails_only_the_first_time(env_dir, tmp_path):
    """Issue 44: check shows the kept lines once; the next check lets them go (no finding, so --strict passes), the file
    stays for the next install, which still says them; lines kept after that are new and shown again."""
    save_unprinted(str(env_dir), LINES)
    first = _check(env_dir, tmp_path, "--json", "--strict")
    assert first.rc == 1 and "install-unprinted" in {f["code"] for f in json.loads(first.stdout)["findings"]}
    second = _check(env_dir, tmp_path, "--json", "--strict")
    data = json.loads(second.stdout)
    assert "install-unprinted" not in {f["code"] for f in data["findings"]} and data["facts"]["python"]["install_unprinted"] == []
    assert second.rc == 0 or {f["severity"] for f in data["findings"]} & {"warn", "fail"}, second.stderr  # nothing else fails it
    assert (env_dir / UNPRINTED_FILE).is_file()
    from stackdoctor.install.talk import take_unprinted

    assert take_unprinted(str(env_dir), remove=False) == LINES  # what the next install says
    save_unprinted(str(env_dir), ["a new line"])
    third = _check(env_dir, tmp_path, "--json")
    (finding,) = [f for f in json.loads(third.stdout)["findings"] if f["code"] == "install-unprinted"]
    assert "a new line" in finding["detail"]
