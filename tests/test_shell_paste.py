"""Every command printed for a user to paste is quoted for its shell (issue 44, item 8): a probed path or value with a
space, a quote, ``;``, ``$()``, a backtick or a newline stays one word. POSIX lines are run through a real ``sh -c``
(and ``bash -c``, which reads ``$'...'``) with a marker command hidden in the value: the marker never runs, and bash
gets the value back exactly. PowerShell's lines are checked as strings (no PowerShell here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stackdoctor.accelerators.ascend.rules import _set_env_line
from stackdoctor.core.shell import export, format_command
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import CudaToolkit, Facts, PlatformFacts, PythonFacts, TorchFacts
from stackdoctor.rules.diagnose import diagnose

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")


def hostile(tmp: Path) -> list[str]:
    """Paths each hiding `touch <marker>` behind another way of ending a word or a command."""
    m = tmp / "MARKER"
    return [
        f"/opt/my dir/x; touch {m}",
        f"/opt/it's/$(touch {m})",
        f'/opt/"q"/`touch {m}`',
        f"/opt/a\ntouch {m}\n",
        f"/opt/$HOME && touch {m} #",
        f"/opt/x'; touch {m}; echo '",
    ]


def run_posix(line: str, shell: str, tail: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([shell, "-c", line + tail], capture_output=True, text=True, timeout=20)


def words_of(line: str, shell: str) -> list[str]:
    """The words a shell makes of ``line`` (printed by printf put before it, the program word too)."""
    p = run_posix("printf '%s\\0' " + line, shell)
    return p.stdout.split("\0")[:-1]


def _facts(python: str, *, system: str = "Linux") -> Facts:
    f = Facts()
    f.platform = PlatformFacts(system=system, machine="x86_64")
    f.python = PythonFacts(executable=python)
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6")
    return f


def _fix(f: Facts, code: str) -> str:
    hit = next(x for x in diagnose(f, load_matrix([])) if x.code == code)
    assert hit.fix
    return hit.fix


def test_argv_lines_keep_every_hostile_word_whole(tmp_path):
    for path in hostile(tmp_path):
        argvs = [
            ["source", path + "/set_env.sh"],
            [path + "/bin/python", "-m", "pip", "install", "--force-reinstall", "torch==2.13.0", "--index-url", "https://x.org/" + path],
            ["stackdoctor", "install", "--python", path, "--recover"],
        ]
        lines = [_set_env_line({"cann": {"set_env": path + "/set_env.sh"}}), *(format_command(a) for a in argvs[1:])]
        for argv, line in zip(argvs, lines, strict=True):
            assert "\n" not in line  # a newline is spelled, never printed
            for sh in ("sh", "bash"):
                run_posix(line, sh)
                assert not (tmp_path / "MARKER").exists(), (sh, line)
            assert words_of(line, "bash") == argv, line  # bash reads it back exactly


def test_export_lines_set_exactly_the_value_and_run_nothing_else(tmp_path):
    for path in hostile(tmp_path):
        line = export({"CUDA_HOME": path, "PATH": path + "/bin"}, prepend_to="PATH")
        assert "\n" not in line
        run_posix(line, "sh")
        p = run_posix(line, "bash", '; printf "%s\\0%s" "$CUDA_HOME" "$PATH"')
        assert not (tmp_path / "MARKER").exists(), line
        home, search = p.stdout.split("\0")
        assert home == path and search.startswith(path + "/bin:"), (line, p.stdout, p.stderr)


def test_rules_fix_lines_quote_the_probed_paths(tmp_path):
    for path in hostile(tmp_path):
        f = _facts(path + "/bin/python")  # torch reinstall / pip lines name the target's interpreter
        f.torch.version, f.torch.variant, f.torch.cuda = "2.13.0+cu126", "cu126", "12.6"
        f.cuda_toolkit.nvcc_version, f.cuda_toolkit.nvcc_path = "11.8", "/usr/bin/nvcc"
        f.cuda_toolkit.toolkits = [CudaToolkit(path=path + "/bin/nvcc", nvcc_version="12.6")]
        line = _fix(f, "nvcc-mismatch")
        run_posix(line, "sh")
        p = run_posix(line, "bash", '; printf "%s" "$CUDA_HOME"')
        assert not (tmp_path / "MARKER").exists(), line
        assert p.stdout == path, (line, p.stdout)


def test_powershell_forms_are_literals():
    assert export({"CUDA_HOME": "C:\\a b\\$(calc)'x"}, windows=True) == "$env:CUDA_HOME = 'C:\\a b\\$(calc)''x'"
    assert export({"A": "C:\\a\nb`$(calc)"}, windows=True) == '$env:A = "C:\\a`nb```$(calc)"'
    assert format_command(["C:\\My Py\\python.exe", "-m", "pip"], windows=True) == "& 'C:\\My Py\\python.exe' -m pip"
    assert format_command(["C:\\x$(calc)\\python.exe"], windows=True) == "& 'C:\\x$(calc)\\python.exe'"
