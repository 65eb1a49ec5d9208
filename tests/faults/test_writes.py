"""Write faults: ``--output`` into a folder that does not exist, onto a read-only file (as an unprivileged
user: root ignores file modes), onto ``/dev/full``; ``install`` interrupted with SIGINT halfway.

A write that cannot happen is bad input: exit 2, one line naming the path and why.
"""

from __future__ import annotations

import os

import pytest

from helpers import run_sd
from .conftest import FAST, assert_usage_error, run_cli_as_nobody


def check_to(m, output: str, fmt: str = "json"):
    return run_sd(["check", "--format", fmt, *FAST, "--python", m.python, "--output", output], env=m.env(), timeout=90)


def test_output_into_a_directory_that_does_not_exist(machine, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "report.json"
    line = assert_usage_error(check_to(machine, str(target)), str(target), "does not exist")
    assert not (tmp_path / "no").exists()  # nothing half-created


def test_output_onto_a_read_only_file_as_unprivileged_user(nobody_machine):
    m = nobody_machine
    out_dir = m.root / "out"
    out_dir.mkdir()
    target = out_dir / "report.json"
    target.write_text("the user's previous report\n")
    target.chmod(0o444)
    out_dir.chmod(0o555)
    run = run_cli_as_nobody(["check", "--json", *FAST, "--python", m.python, "--output", str(target)], env=m.env(), cwd=m.root)
    assert_usage_error(run, str(target), "read-only")
    assert target.read_text() == "the user's previous report\n"  # untouched


def test_output_onto_dev_full(machine):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    assert_usage_error(check_to(machine, "/dev/full"), "/dev/full", "no space left")
    assert_usage_error(check_to(machine, "/dev/full", fmt="markdown"), "/dev/full", "no space left")
