"""File faults: /proc, /sys and /etc entries unreadable (as an unprivileged user), missing, or empty; SYSROOT at nothing.

A /proc, /sys or /etc file that cannot be read is an absent fact, never a guess and never a problem by itself
(exit 0; the only warning is the torch-less target's). A SYSROOT that does not exist is bad input (exit 2).
"""

from __future__ import annotations

import pytest

from .conftest import FAST, NO_TORCH, assert_others_intact, assert_usage_error, check, check_as_nobody, pin, probe_status

NV_FILES = ("/proc/driver/nvidia/version", "/sys/module/nvidia/version")


@pytest.mark.headline("unprivileged")
def test_proc_and_sys_entry_unreadable_as_unprivileged_user(nobody_machine, unprivileged_install):
    m = nobody_machine
    for path in NV_FILES:
        (m.sysroot / path.lstrip("/")).chmod(0o000)
    run, data = check_as_nobody(m, unprivileged_install)
    pin(run, data, 0, NO_TORCH)
    nv = data["facts"]["nvidia"]
    assert nv["kernel_module_version"] is None  # nothing guessed from a file it could not read
    assert probe_status(data)["nvidia"]["status"] == "ok"
    assert_others_intact(data, faulted={"nvidia"})
    # the same tree readable: the facts come back (so the test above can fail for the right reason)
    for path in NV_FILES:
        (m.sysroot / path.lstrip("/")).chmod(0o644)
    assert check_as_nobody(m, unprivileged_install)[1]["facts"]["nvidia"]["kernel_module_version"] == "550.54.14"


@pytest.mark.headline("unprivileged")
def test_etc_os_release_unreadable_as_unprivileged_user(nobody_machine, unprivileged_install):
    m = nobody_machine
    (m.sysroot / "etc" / "os-release").chmod(0o000)
    run, data = check_as_nobody(m, unprivileged_install)
    pin(run, data, 0, NO_TORCH)
    assert data["facts"]["platform"]["os_id"] is None
    assert data["facts"]["platform"]["system"] == "Linux"
    assert_others_intact(data, faulted={"platform"})


def test_proc_and_sys_entry_missing(machine):
    for path in NV_FILES:
        (machine.sysroot / path.lstrip("/")).unlink()
    run, data = check(machine)
    assert data["facts"]["nvidia"]["kernel_module_version"] is None
    pin(run, data, 0, NO_TORCH)  # no NVIDIA module on a machine without one: a fact, not a problem
    assert_others_intact(data, faulted={"nvidia"})


def test_proc_and_sys_entry_empty(machine):
    for path in (*NV_FILES, "/etc/os-release"):
        (machine.sysroot / path.lstrip("/")).write_text("")
    (machine.sysroot / "proc" / "cpuinfo").write_text("")
    (machine.sysroot / "proc" / "meminfo").write_text("")
    run, data = check(machine)
    pin(run, data, 0, NO_TORCH)
    f = data["facts"]
    assert f["nvidia"]["kernel_module_version"] is None
    assert f["platform"]["os_id"] is None and f["platform"]["memory_total_mib"] is None
    assert_others_intact(data, faulted={"nvidia", "platform"})
    assert f["platform"]["system"] == "Linux"


def test_sysroot_pointing_at_nothing(machine, tmp_path):
    """A SYSROOT that does not exist is bad input: exit 2 and one line naming it (never a report of an empty machine)."""
    from helpers import run_sd

    nowhere = tmp_path / "no" / "such" / "root"
    run = run_sd(["check", "--json", *FAST, "--python", machine.python], env=machine.env(STACKDOCTOR_SYSROOT=str(nowhere)), timeout=90)
    line = assert_usage_error(run, f"STACKDOCTOR_SYSROOT={nowhere} does not exist")
    assert line == f"stackdoctor: STACKDOCTOR_SYSROOT={nowhere} does not exist (or is not a directory).", line
