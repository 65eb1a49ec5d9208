"""The commit point is a rename (issue 29): the journal folder, with the backup of the replaced torch, is set aside in
the prefix and removed after `done:`; a later run removes one whose owner is gone, never one whose owner still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from stackdoctor.install.journal import ASIDE, JOURNAL_DIR, Journal, remove_aside, sweep_aside
from stackdoctor.system import process_start


def _journal_with_backup(prefix) -> Journal:
    j = Journal(prefix=str(prefix), python=sys.executable)
    j.create()
    os.makedirs(os.path.join(j.backup, "files"))
    for i in range(50):
        (prefix / JOURNAL_DIR / "backup" / "files" / f"torch-{i}").write_text("x")
    return j


def test_set_aside_moves_the_whole_journal_in_one_rename_and_remove_aside_deletes_it(tmp_path):
    j = _journal_with_backup(tmp_path)
    aside, err = j.set_aside()
    assert err is None and aside is not None
    assert not (tmp_path / JOURNAL_DIR).exists()  # committed: no journal for the next run to finish
    assert os.path.basename(aside).startswith(ASIDE) and len(os.listdir(os.path.join(aside, "backup", "files"))) == 50
    remove_aside(aside)
    assert sorted(os.listdir(tmp_path)) == []


def _aside_of(tmp_path, pid: int, start: str | None, name: str) -> str:
    d = tmp_path / f"{ASIDE}{name}"
    (d / "backup").mkdir(parents=True)
    (d / "journal.json").write_text(json.dumps({"prefix": str(tmp_path), "python": "p", "pid": pid, "pid_start": start}))
    return str(d)


def test_a_later_run_removes_a_set_aside_backup_whose_owner_is_gone_and_keeps_a_live_ones(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = _aside_of(tmp_path, dead.pid, "0", "1-1")
    live_pid = os.getppid()  # the test's parent runs on while the sweep looks
    live = _aside_of(tmp_path, live_pid, process_start(live_pid), "2-2")
    unreadable = tmp_path / f"{ASIDE}3-3"
    unreadable.mkdir()
    (tmp_path / "unrelated").mkdir()
    assert sorted(p for p, _size in sweep_aside(str(tmp_path))) == sorted([gone, str(unreadable)])
    assert os.path.isdir(live) and os.path.isdir(tmp_path / "unrelated")
