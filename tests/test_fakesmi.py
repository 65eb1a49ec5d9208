"""The fake nvidia-smi (tests/fakesmi.py) answers each argument list the way the recorded machine did, and
never invents a value: what it composes for stackdoctor's query comes from the machine's own recordings."""

from __future__ import annotations

import subprocess

from conftest import FIXTURES
from fakesmi import (
    NA,
    QUERY_FORMAT,
    RecordedMachine,
    fake_nvidia_smi,
    from_list,
    from_query_csv,
    from_table,
)

from stackdoctor.accelerators.nvidia.probe import QUERY_FIELDS

REAL = FIXTURES / "real"
C14 = REAL / "c14-rtx4070-driver550-linux"
TRITON = REAL / "r-titanv-rtx5880ada-driver570-query-triton-8070"
SNAP470 = REAL / "r-rtxpro-snap-smi470-driver580-compute-cap-rejected-inference-snaps-89"


def smi(tool, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool), *args], check=False, capture_output=True, text=True, timeout=20)


def test_each_argument_list_gets_its_recording(tmp_path):
    tool = fake_nvidia_smi(tmp_path / "bin", TRITON)
    listing = smi(tool, "-L")
    assert listing.returncode == 0 and listing.stdout == (TRITON / "nvidia-smi-L.txt").read_text().split("\n", 1)[1]
    query = smi(tool, "--query-gpu=" + ",".join(QUERY_FIELDS), QUERY_FORMAT)
    assert query.returncode == 0 and query.stdout.splitlines()[1].startswith("1, NVIDIA RTX 5880 Ada Generation, GPU-7518f6b0-")
    unrecorded = smi(tool)  # no table of this machine was posted
    assert unrecorded.returncode == 2 and unrecorded.stdout == "" and "nothing was recorded" in unrecorded.stderr
    assert smi(tool, "--query-gpu=name", "--format=csv").returncode == 2  # only what stackdoctor sends is answered


def test_table_machine_answers_the_table_and_a_query_from_it(tmp_path):
    tool = fake_nvidia_smi(tmp_path / "bin", C14)
    table = smi(tool)
    assert table.returncode == 0 and "NVIDIA-SMI 550.40.07" in table.stdout and not table.stdout.startswith("$")
    row = smi(tool, "--query-gpu=" + ",".join(QUERY_FIELDS), QUERY_FORMAT).stdout.strip()
    # index, name, uuid, compute_cap, memory, bus, driver, gen, width, power, mig, persistence: only what the table shows
    assert row.split(", ") == ["0", "NVIDIA GeForce RTX 4070", NA, NA, "12282", "00000000:2D:00.0", "550.40.07", NA, NA, "200.00", NA, "Disabled"]
    assert smi(tool, "-L").returncode == 2


def test_old_tool_rejects_compute_cap_like_the_recording(tmp_path):
    tool = fake_nvidia_smi(tmp_path / "bin", SNAP470)
    r = smi(tool, "--query-gpu=" + ",".join(QUERY_FIELDS), QUERY_FORMAT)
    assert (r.returncode, r.stdout) == (2, 'Field "compute_cap" is not a valid field to query.\n')
    fallback = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
    assert smi(tool, "--query-gpu=" + ",".join(fallback), QUERY_FORMAT).stdout == "0, [N/A], [N/A], 8151, 00000000:01:00.0, 580.95.05, [N/A], [N/A], 60.00, [N/A], Disabled\n"


def test_sources_are_read_field_by_field():
    q = from_query_csv((TRITON / "nvidia-smi-query.csv").read_text())
    assert q[1] == {"compute_cap": "8.9", "compute_mode": "Default", "driver_version": "570.86.15", "name": "NVIDIA RTX 5880 Ada Generation", "index": "1"}
    assert from_list((TRITON / "nvidia-smi-L.txt").read_text())[0]["uuid"] == "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd"
    driver, gpus = from_table((SNAP470 / "nvidia-smi.txt").read_text())
    assert driver == "580.95.05" and "name" not in gpus[0]  # "NVIDIA RTX PRO ..." is cut short: never used
    assert RecordedMachine(TRITON).gpus[0]["compute_cap"] == "7.0"
