"""The backup worker alone (stackdoctor/_worker/sd_backup.py), run by a real venv's interpreter on a real
(synthetic) torch family installed by real pip: save, damage, restore, and the copy fallback with its cap.

The copy fallback is forced for real: the backup folder is on /dev/shm (tmpfs), another filesystem than the
venv, so ``os.link`` fails with EXDEV.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_install import BEFORE, backups_left, family, family_files, imports_fake_torch, py, seeded, server, venv  # noqa: E402,F401  (fixtures)

from stackdoctor._worker import worker_path  # noqa: E402

MARK = "@@stackdoctor-backup@@ "
NAMES = json.dumps(["torch", "torchvision", "torchaudio"])


def worker(venv: Path, *args: str) -> dict:
    p = subprocess.run([py(venv), "-I", str(worker_path("sd_backup.py")), *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(MARK)]
    assert len(lines) == 1, p.stdout
    return json.loads(lines[0][len(MARK) :])


def site(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def damage(venv: Path) -> None:
    """What a failed install can leave: torch's files half gone, torchvision's dist-info gone."""
    s = site(venv)
    (s / "torch" / "__init__.py").unlink()
    (s / "torch" / "version.py").unlink()  # replaced as pip and uv replace a file: a new file, not the old one rewritten
    (s / "torch" / "version.py").write_text("__version__ = 'overwritten'\n")
    shutil.rmtree(s / "torchvision-0.27.0+cu126.dist-info")


@pytest.fixture
def other_fs(venv):
    """A folder on another filesystem than the venv (tmpfs), so hard links are refused."""
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(venv).st_dev:
        pytest.skip("no tmpfs on /dev/shm apart from the venv's filesystem here")
    d = tempfile.mkdtemp(prefix="sd-backup-test-", dir="/dev/shm")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_save_damage_restore_gives_the_same_files(venv):
    before = family_files(venv)
    d = venv / ".stackdoctor-backup-test"
    d.mkdir()
    saved = worker(venv, "save", str(d), NAMES)
    assert saved["saved"] == BEFORE and saved["missing"] == {} and saved["error"] is None
    assert saved["linked"] == len(before) and saved["copied"] == 0  # every RECORD entry, hard-linked
    assert saved["linked_bytes"] == sum(saved["bytes"].values()) > 0
    manifest = json.loads((d / "manifest.json").read_text())
    assert {m["name"]: m["version"] for m in manifest["dists"]} == BEFORE
    assert all(m["site"] == str(site(venv)) for m in manifest["dists"])

    damage(venv)
    assert family_files(venv) != before and "torchvision" not in family(venv)

    got = worker(venv, "restore", str(d), NAMES)
    assert got["restored"] == BEFORE and got["mismatch"] == [] and got["missing"] == [] and got["errors"] == []
    assert got["linked"] == len(before)
    assert family_files(venv) == before
    assert family(venv) == BEFORE and imports_fake_torch(venv) == "2.12.0+cu126"


def test_restore_reports_a_file_that_differs_from_its_record(venv):
    """A saved file changed in place (a hard link shares it): the restore names it instead of calling it good."""
    d = venv / ".stackdoctor-backup-test"
    d.mkdir()
    worker(venv, "save", str(d), NAMES)
    with open(site(venv) / "torchvision" / "__init__.py", "a") as f:  # in place: the backup's link sees it too
        f.write("# changed\n")
    got = worker(venv, "restore", str(d), NAMES)
    assert got["mismatch"] == ["torchvision/__init__.py"]
    assert got["restored"] == {"torch": BEFORE["torch"]}


def test_copy_fallback_when_links_are_refused(venv, other_fs):
    before = family_files(venv)
    saved = worker(venv, "save", str(other_fs), NAMES, str(10 * 1024 * 1024))
    assert saved["saved"] == BEFORE and saved["missing"] == {} and saved["error"] is None
    assert saved["linked"] == 0 and saved["copied"] == len(before)
    assert saved["copied_bytes"] == sum(saved["bytes"].values()) > 0
    damage(venv)
    got = worker(venv, "restore", str(other_fs), NAMES)
    assert got["restored"] == BEFORE and got["mismatch"] == [] and got["copied"] == len(before) and got["linked"] == 0
    assert family_files(venv) == before and imports_fake_torch(venv) == "2.12.0+cu126"


def test_a_backup_past_the_copy_cap_is_not_made(venv, other_fs):
    """Copies stop at the cap: the backup is complete or it is not made (and says why), so nothing may change."""
    probe = other_fs / "probe"
    probe.mkdir()
    sizes = worker(venv, "save", str(probe), NAMES)["bytes"]
    cap = sizes["torch"] - 1  # torch does not fit
    d = other_fs / "capped"
    d.mkdir()
    saved = worker(venv, "save", str(d), NAMES, str(cap))
    assert saved["error"].startswith("torch/") and f"over the copy cap of {cap} bytes (a hard link was refused: [Errno 18]" in saved["error"]
    assert not (d / "manifest.json").exists()  # no manifest: nothing can be "restored" from a partial backup


def test_the_worker_never_raises(venv, tmp_path):
    got = worker(venv, "restore", str(tmp_path / "no-such-backup"))
    assert got["error"].startswith("FileNotFoundError:") and "manifest.json" in got["error"]
    got = worker(venv, "save", str(tmp_path / "no" / "such"), "not json")
    assert got["error"].startswith("JSONDecodeError:")
    assert worker(venv, "frobnicate")["error"].startswith("usage: sd_backup.py save DIR NAMES_JSON")
    assert family(venv) == BEFORE and backups_left(venv) == []


def test_clearing_the_family_never_removes_folders_at_or_above_the_site_directory(venv):
    """The restore clears the installed family and prunes the folders that clearing emptied, but only inside the
    site directory: a RECORD entry outside it (a console script in the venv's bin/) leaves its folder in place even
    when it was the only file there."""
    s = site(venv)
    record = next(s.glob("torchvision-*.dist-info")) / "RECORD"
    lonely = venv / "only-torchvision"  # a folder beside site-packages' ancestors that holds one RECORD file
    lonely.mkdir()
    lonely.chmod(0o710)  # a folder the restore would make anew gets the default mode: this one must be the same folder
    (lonely / "tool").write_text("#!/bin/sh\n")
    rel = os.path.relpath(lonely / "tool", s)
    record.write_text(record.read_text() + f"{rel},,\n")
    d = venv / ".stackdoctor-backup-test"
    d.mkdir()
    worker(venv, "save", str(d), NAMES)
    got = worker(venv, "restore", str(d), NAMES)
    assert got["restored"] == BEFORE and got["errors"] == []
    assert (lonely / "tool").is_file() and (lonely.stat().st_mode & 0o777) == 0o710  # put back; its folder never pruned
    assert s.is_dir() and (venv / "lib").is_dir()
