"""Apple probe: sw_vers / sysctl parsers on real captures; the probe with fake tools via gather(system_name)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import real_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.apple import probe as apple
from stackdoctor.model.facts import AppleFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.system import Host, System

CATALINA = "r-sw_vers-catalina-ruby-build-1451"
HIGH_SIERRA = "r-sw_vers-high-sierra-kernelpop-17"


def ctx_for(root: Path | str = "/", system: str | None = None, machine: str | None = None) -> ProbeContext:
    """A probe context; ``system``/``machine`` inject the OS identity (no monkeypatching)."""
    host = Host(system=system, machine=machine, source="test") if system else None
    return ProbeContext(system=System(sysroot=str(root), env={"PATH": os.environ.get("PATH", "")}, host_override=host), target=Target(sys.executable, "self"))


def fake_sysctl(fake_bin, values: dict[str, str]) -> None:
    """Synthetic sysctl: prints the value of a known key, or macOS's unknown-oid error (exit 1) otherwise."""
    cases = "\n".join(f'  {key}) echo "{value}" ;;' for key, value in values.items())
    fake_bin("sysctl", script=f'case "$2" in\n{cases}\n  *) echo "sysctl: unknown oid \'$2\'" >&2; exit 1 ;;\nesac\n')


@pytest.mark.parametrize(
    "case, expected",
    [
        (CATALINA, {"ProductName": "Mac OS X", "ProductVersion": "10.15.5", "BuildVersion": "19F101"}),
        (HIGH_SIERRA, {"ProductName": "Mac OS X", "ProductVersion": "10.13", "BuildVersion": "17A405"}),
    ],
)
def test_parse_sw_vers_real(case: str, expected: dict[str, str]) -> None:
    assert apple.parse_sw_vers(real_fixture(case, "sw_vers.txt")) == expected


def test_parse_sysctl() -> None:
    assert apple.parse_sysctl_value("Apple M2 Max\n") == "Apple M2 Max"
    assert apple.parse_sysctl_value("\n\n") is None
    assert apple.parse_sysctl_flag("1\n") is True
    assert apple.parse_sysctl_flag("0") is False
    assert apple.parse_sysctl_flag("sysctl: unknown oid") is None


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_apple_parsers_never_raise(text: str) -> None:
    apple.parse_sw_vers(text)
    apple.parse_sysctl_value(text)
    apple.parse_sysctl_flag(text)


def test_not_darwin_is_skipped_and_runs_nothing(fake_bin) -> None:
    fake_bin("sw_vers", script="echo ran > \"$0.ran\"\n")
    facts, status, error = apple.gather(ctx_for(system="Linux"))
    assert status == "skipped" and error is None
    assert facts == AppleFacts()
    assert not (fake_bin.dir / "sw_vers.ran").exists()


def test_probe_on_linux_is_skipped() -> None:
    out = apple.probe(ctx_for())
    if sys.platform != "darwin":
        assert out.status == "skipped" and out.facts["apple"].is_macos is False


def test_apple_silicon_python_under_rosetta(fake_bin) -> None:
    fake_bin("sw_vers", real_fixture(CATALINA, "sw_vers.txt"))
    fake_sysctl(fake_bin, {"machdep.cpu.brand_string": "Apple M2 Max", "hw.optional.arm64": "1", "sysctl.proc_translated": "1"})
    facts, status, error = apple.gather(ctx_for(system="Darwin", machine="x86_64"))
    assert status == "ok" and error is None
    assert facts.is_macos is True
    assert (facts.macos_version, facts.build, facts.chip) == ("10.15.5", "19F101", "Apple M2 Max")
    assert facts.rosetta is True
    assert facts.arch == "arm64"  # the hardware, although this (translated) process sees x86_64
    assert facts.sources["rosetta"] == "sysctl -n sysctl.proc_translated"


def test_intel_mac_has_no_translation_key(fake_bin) -> None:
    fake_bin("sw_vers", real_fixture(HIGH_SIERRA, "sw_vers.txt"))
    fake_sysctl(fake_bin, {"machdep.cpu.brand_string": "Intel(R) Core(TM) i7-8559U CPU @ 2.70GHz"})
    facts, status, _ = apple.gather(ctx_for(system="Darwin", machine="x86_64"))
    assert status == "ok"
    assert facts.macos_version == "10.13"
    assert facts.rosetta is False  # key absent (unknown oid) on Intel Macs counts as not translated
    assert facts.arch == "x86_64"


def test_missing_tools_are_facts_not_crashes(tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    facts, status, error = apple.gather(ctx_for(system="Darwin", machine="arm64"))
    assert facts.is_macos is True and facts.macos_version is None and facts.rosetta is None and facts.arch is None
    assert status == "error" and error is not None and "sw_vers is not installed" in error


def test_moved_sysroot_skips(tmp_path: Path) -> None:
    out = apple.probe(ctx_for(tmp_path))
    assert out.status == "skipped"
