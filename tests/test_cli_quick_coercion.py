"""The quick option coercion (issue 33: ``stackdoctor check`` no longer imports pydantic through typer's
adapters): for every option of every command, what it returns is what typer's own coercion returns, and
what it does not know goes to typer's, with typer's error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stackdoctor import cli

coercion = pytest.importorskip("typer._coercion", reason="a typer without pydantic coercion has nothing to shortcut")

SAMPLES = (None, "", "abc", "0", "7", "-3", "0.05", "0.1", "2.5", ".5", "1.", "1e3", " 4", "4 ", "+4", "1_0", "0x10", "nan", "inf",
           5, 0, -1, 2.5, 0.05, True, False, ("a", "b"), ["x"], (), ("a", 1))


def params() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def walk(command: object, path: str) -> None:
        for p in getattr(command, "params", []):
            out.append((f"{path} {p.opts[0] if p.opts else p.name}", p))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}")

    walk(cli.command(), "stackdoctor")
    return out


def real(p: object, value: object) -> tuple[str, object]:
    rp = coercion.build_runtime_param(p.type_descriptor)  # type: ignore[attr-defined]
    try:
        return "ok", rp.coerce(value, param=p, ctx=None)
    except Exception as exc:
        return "error", type(exc).__name__


def test_every_option_coerces_as_typer_does() -> None:
    checked = shortcut = 0
    for where, p in params():
        multi = bool(p.multiple or p.nargs == -1)  # type: ignore[attr-defined]
        for value in SAMPLES:
            done, out = cli._quick_value(p.type_descriptor, value, multi)  # type: ignore[attr-defined]
            if not done:
                continue
            shortcut += 1
            said = real(p, value)
            assert said == ("ok", out) and type(said[1]) is type(out), (where, value, out, said)
            checked += 1
    assert checked == shortcut and checked > 100  # every command's options were met, most values shortcut


def test_what_it_does_not_know_is_typers() -> None:
    desc = dict(params())["stackdoctor check --timeout"].type_descriptor  # type: ignore[attr-defined]
    for value in ("abc", "0.05", "1e3", "nan", 0.01, "1_0"):
        assert cli._quick_value(desc, value, False) == (False, None)


def test_check_runs_without_pydantic_and_typer_errors_stay() -> None:
    code = ("import sys; from stackdoctor import cli\n"
            "try:\n    cli.command().main(args=sys.argv[1:], prog_name='stackdoctor', standalone_mode=False)\n"
            "except Exception as exc:\n    print('ERR', exc)\n"
            "print('pydantic' in sys.modules)")
    ok = subprocess.run([sys.executable, "-c", code, "check", "--list-checks", "--timeout", "3", "--only", "torch-ok"], capture_output=True, text=True, timeout=120)
    assert ok.stdout.strip().splitlines()[-1] == "False", ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--timeout", "0.01"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "greater than or equal to 0.1" in bad.stderr, bad.stderr
