"""The guarantee: an unexpected exception is one line and exit 3; the traceback only with --debug.

A command that raises (a bug) goes through ``stackdoctor.cli.main``'s one top-level handler;
a probe that raises is contained by the engine (that probe's status is ``error``, the rest of
the report stands).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

from helpers import validate_report

from .conftest import BOUND_S, NO_TORCH, assert_others_intact, finding, pin

BOOM = "import stackdoctor.cli as c; c.app.command('boom')(lambda: 1/0); c.main({args!r})"
LINE = (
    "stackdoctor: internal error: ZeroDivisionError: division by zero; "
    "please attach `stackdoctor report` to a bug report (re-run with --debug for the traceback)."
)


def boom(args: list[str], **env: str) -> subprocess.CompletedProcess:
    import os

    e = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_DEBUG"}
    e.update(env)
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", BOOM.format(args=args)], capture_output=True, text=True, env=e, timeout=60)
    assert time.monotonic() - start < BOUND_S
    return p


def test_internal_error_is_one_line_and_exit_3():
    p = boom(["boom"])
    assert p.returncode == 3
    assert p.stdout == ""
    assert p.stderr.splitlines() == [LINE], p.stderr
    assert "Traceback" not in p.stderr


def test_internal_error_traceback_only_with_debug():
    p = boom(["--debug", "boom"])
    assert p.returncode == 3
    assert "Traceback (most recent call last)" in p.stderr and "ZeroDivisionError" in p.stderr
    assert p.stderr.rstrip().splitlines()[-1] == LINE
    env_debug = boom(["boom"], STACKDOCTOR_DEBUG="1")
    assert env_debug.returncode == 3 and "Traceback" in env_debug.stderr


def test_internal_error_in_one_probe_is_contained(machine):
    """A probe bug: that probe is 'error' with the exception named, and a probe-failed finding says so;
    every other probe's facts stay; a finding (exit 0/1: a non-target probe failing is a warning), no traceback."""
    code = textwrap.dedent(
        f"""
        import stackdoctor.accelerators.amd.probe as r
        def broken(ctx):
            raise KeyError("simulated bug in the rocm probe")
        r.probe = broken
        import stackdoctor.cli as c
        c.main(["check", "--json", "--no-kernels", "--timeout", "1", "--torch-timeout", "5", "--python", {machine.python!r}])
        """
    )
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=machine.env(), timeout=90)
    assert time.monotonic() - start < BOUND_S
    assert "Traceback" not in p.stderr + p.stdout
    data = json.loads(p.stdout)
    validate_report(data)
    rocm = next(x for x in data["probes"] if x["name"] == "rocm")
    assert (rocm["status"], rocm["error"]) == ("error", "internal error in rocm probe: KeyError: 'simulated bug in the rocm probe'"), rocm
    from helpers import Run

    pin(Run(p.returncode, p.stdout, p.stderr, 0.0), data, 0, ("warn", "probe-failed"), NO_TORCH)
    finding(data, "probe-failed", "KeyError: 'simulated bug in the rocm probe'")
    assert_others_intact(data, faulted={"rocm"})
