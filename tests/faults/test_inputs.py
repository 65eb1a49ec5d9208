"""Input faults: bad --matrix YAML, bad --replay reports, a bad [tool.stackdoctor] config.

Bad input is exit 2 with exactly one ``stackdoctor: ...`` line on stderr naming the file
(and, for YAML, the line), nothing on stdout, quickly.
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest
from helpers import run_sd

from .conftest import BOUND_S, FAST, assert_usage_error, check

HEAD = "schema: stackdoctor.matrix/1\nreleases:\n"


def run_check(m, *args: str, cwd=None):
    return run_sd(["check", "--json", *FAST, "--python", m.python, *args], env=m.env(), timeout=90, cwd=cwd or m.root)


def test_matrix_yaml_malformed(machine):
    f = machine.root / "bad.yaml"
    f.write_text(HEAD + '- version: "2.13.0"\n  variants: [cpu\n  pythons: ["3.11"\n')
    line = assert_usage_error(run_check(machine, "--matrix", str(f)), str(f), "line")
    # the line number is the real one (the unclosed flow sequence is reported at or after line 4)
    import re

    n = int(re.search(r"line (\d+)", line).group(1))
    assert 3 <= n <= 6, line


def test_matrix_unknown_variant(machine):
    f = machine.root / "variant.yaml"
    f.write_text(HEAD + '- version: "2.13.0"\n  source: "synthetic"\n  variants:\n    - {name: banana42, platforms: [manylinux_2_28_x86_64], source: "synthetic"}\n')
    assert_usage_error(run_check(machine, "--matrix", str(f)), str(f), "line 6", "banana42")


def test_matrix_version_does_not_parse(machine):
    f = machine.root / "version.yaml"
    f.write_text(HEAD + '- version: "two.thirteen"\n  pythons: ["3.11"]\n  variants: []\n')
    assert_usage_error(run_check(machine, "--matrix", str(f)), str(f), "line 3", "two.thirteen")


def test_matrix_yaml_alias_bomb(machine):
    """Billion laughs: 9 levels x 10 aliases = 10**9 strings if expanded. Refused quickly, in bounded memory."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join(f"*a{i - 1}" for _ in range(10))
        lines.append(f"a{i}: &a{i} [{refs}]")
    f = machine.root / "bomb.yaml"
    f.write_text("schema: stackdoctor.matrix/1\n" + "\n".join(lines) + "\nreleases: *a9\n")
    run = run_check(machine, "--matrix", str(f))
    line = assert_usage_error(run, str(f))
    assert "alias" in line.lower(), line
    assert run.elapsed < 10, run.elapsed  # never expanded


def _saved_report(m, tmp_path) -> dict:
    run, data = check(m)
    return data


def test_replay_file_truncated(machine, tmp_path):
    data = _saved_report(machine, tmp_path)
    text = json.dumps(data, indent=2)
    f = tmp_path / "truncated.json"
    f.write_text(text[: len(text) // 2])
    assert_usage_error(run_sd(["check", "--json", "--replay", str(f)], env=machine.env()), str(f), "truncated")


def test_replay_from_a_newer_schema(machine, tmp_path):
    data = _saved_report(machine, tmp_path)
    data["schema"] = "stackdoctor.report/2"
    f = tmp_path / "newer.json"
    f.write_text(json.dumps(data))
    line = assert_usage_error(run_sd(["check", "--json", "--replay", str(f)], env=machine.env()), str(f), "stackdoctor.report/2")
    assert "upgrade" in line.lower() or "newer" in line.lower(), line


def test_replay_json_nested_100000_deep(machine, tmp_path):
    f = tmp_path / "deep.json"
    depth = 100_000
    f.write_text('{"schema": "stackdoctor.report/1", "facts": ' + "[" * depth + "]" * depth + "}")
    start = time.monotonic()
    run = run_sd(["check", "--json", "--replay", str(f)], env=machine.env())
    assert time.monotonic() - start < BOUND_S
    assert_usage_error(run, str(f))


def test_config_file_malformed_toml(machine):
    (machine.root / "pyproject.toml").write_text('[tool.stackdoctor]\nmin_gpus = 1\nbackend = "cuda\n')
    assert_usage_error(run_check(machine), "pyproject.toml", "TOML")


def test_config_file_bad_key(machine):
    (machine.root / "pyproject.toml").write_text(textwrap.dedent('[project]\nname = "x"\n\n[tool.stackdoctor]\nbakend = "cuda"\n'))
    assert_usage_error(run_check(machine), "pyproject.toml", "bakend")


def test_config_file_bad_value(machine):
    (machine.root / "pyproject.toml").write_text('[tool.stackdoctor]\nmin_gpus = "many"\n')
    assert_usage_error(run_check(machine), "pyproject.toml", "min_gpus")


@pytest.mark.parametrize(
    "args,says",
    [
        pytest.param(["check", "--no-such-flag"], "No such option: --no-such-flag", id="unknown-option"),
        pytest.param(["no-such-command"], "No such command 'no-such-command'", id="unknown-command"),
        pytest.param(["check", "--timeout", "soon"], "Invalid value for '--timeout'", id="unparsable-value"),
        pytest.param(["install", "--installer"], "requires an argument", id="missing-value"),
    ],
)
def test_bad_command_line_is_one_sentence_and_exit_2(args, says):
    run = run_sd(args)
    assert run.rc == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stackdoctor: ") and says in lines[0], run.stderr
    assert "--help" in lines[0]
    assert run.stdout == ""
