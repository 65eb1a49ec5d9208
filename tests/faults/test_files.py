"""File faults: /proc, /sys and /etc entries unreadable (as an unprivileged user), missing, or empty; SYSROOT at nothing."""

from __future__ import annotations

import pytest

from helpers import validate_report
from .conftest import BOUND_S, FAST, assert_others_intact, check, check_as_nobody, probe_status

NV_FILES = ("/proc/driver/nvidia/version", "/sys/module/nvidia/version")


@pytest.mark.headline("unprivileged")
def test_proc_and_sys_entry_unreadable_as_unprivileged_user(nobody_machine, unprivileged_install):
    m = nobody_machine
    for path in NV_FILES:
        (m.sysroot / path.lstrip("/")).chmod(0o000)
    data = check_as_nobody(m, unprivileged_install)
    nv = data["facts"]["nvidia"]
    assert nv["kernel_module_version"] is None  # nothing guessed from a file it could not read
    assert probe_status(data)["nvidia"]["status"] == "ok"
    assert_others_intact(data, faulted={"nvidia"})
    # the same tree readable: the facts come back (so the test above can fail for the right reason)
    for path in NV_FILES:
        (m.sysroot / path.lstrip("/")).chmod(0o644)
    assert check_as_nobody(m, unprivileged_install)["facts"]["nvidia"]["kernel_module_version"] == "550.54.14"


@pytest.mark.headline("unprivileged")
def test_etc_os_release_unreadable_as_unprivileged_user(nobody_machine, unprivileged_install):
    m = nobody_machine
    (m.sysroot / "etc" / "os-release").chmod(0o000)
    data = check_as_nobody(m, unprivileged_install)
    assert data["facts"]["platform"]["os_id"] is None
    assert data["facts"]["platform"]["system"] == "Linux"
    assert_others_intact(data, faulted={"platform"})


def test_proc_and_sys_entry_missing(machine):
    for path in NV_FILES:
        (machine.sysroot / path.lstrip("/")).unlink()
    run, data = check(machine)
    assert data["facts"]["nvidia"]["kernel_module_version"] is None
    assert run.rc == 0  # no NVIDIA module on a machine without one: a fact, not a problem
    assert_others_intact(data, faulted={"nvidia"})


def test_proc_and_sys_entry_empty(machine):
    for path in (*NV_FILES, "/etc/os-release"):
        (machine.sysroot / path.lstrip("/")).write_text("")
    (machine.sysroot / "proc" / "cpuinfo").write_text("")
    (machine.sysroot / "proc" / "meminfo").write_text("")
    run, data = check(machine)
    f = data["facts"]
    assert f["nvidia"]["kernel_module_version"] is None
    assert f["platform"]["os_id"] is None and f["platform"]["memory_total_mib"] is None
    assert_others_intact(data, faulted={"nvidia", "platform"})
    assert f["platform"]["system"] == "Linux"


def test_sysroot_pointing_at_nothing(machine, tmp_path):
    from helpers import run_sd

    nowhere = tmp_path / "no" / "such" / "root"
    run = run_sd(["check", "--json", *FAST, "--python", machine.python], env=machine.env(STACKDOCTOR_SYSROOT=str(nowhere)), timeout=90)
    assert run.elapsed < BOUND_S
    if run.rc == 2:  # bad input: one line naming the path
        lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and str(nowhere) in lines[0], run.stderr
        return
    assert run.rc in (0, 1)
    data = run.json()
    validate_report(data)
    text = " ".join(p.get("error") or "" for p in data["probes"]) + " ".join(f["title"] + " " + f["detail"] for f in data["findings"])
    assert str(nowhere) in text, "nothing says the SYSROOT does not exist"
