"""Nothing hostile reaches the terminal, and every output survives the machine it describes (issue 21).

One real venv at a path that is not UTF-8 (``venv-\\xff``), whose ``torch`` (a stand-in, NOT PyTorch: a
package of two files) says its ``__version__`` is ``2.14.1`` followed by an OSC title sequence, a BEL and a
clear-screen (``\\x1b]0;owned\\x07\\x1b[2J``), and whose ``git_version`` holds CR/LF and a fake line. Through
the real CLI: the screen and Markdown show the sequences as escapes, never obey them; ``--json`` is valid
UTF-8 with the undecodable byte written ``\\xff``; ``-o F`` and ``report -o D`` work at such paths; a closed
or full stdout is one sentence and exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import console_script, run_stackdoctor, venv_bin  # noqa: E402

HOSTILE = "2.14.1\x1b]0;owned\x07\x1b[2J"
INIT = f"__version__ = {HOSTILE!r}\nclass version:\n    cuda = None\n    hip = None\n    git_version = 'abc\\r\\n[ok] everything is fine'\n"
VERSION_PY = f"__version__ = {HOSTILE!r}\ncuda = None\nhip = None\ngit_version = 'abc\\r\\n[ok] everything is fine'\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    venv = Path(os.fsdecode(os.fsencode(str(base)) + b"/venv-\xff"))
    made = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(made)], check=True)
    os.rename(made, os.fsencode(str(venv)))  # venv cannot write a non-UTF-8 path into its files; Python runs from one
    site = next(p for p in venv.glob("lib/python3*/site-packages") if p.is_dir())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(INIT)
    (site / "torch" / "version.py").write_text(VERSION_PY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "CONDA_"))}
    env.update(NO_COLOR="1", COLUMNS="120", PIP_CONFIG_FILE=os.devnull, STACKDOCTOR_CACHE_DIR=str(base / "cache"))
    return base, venv, env


def sd(args: list, env: dict, **kw) -> subprocess.CompletedProcess:
    p = run_stackdoctor([*console_script(), *args], env=env, timeout=180, stdin=subprocess.DEVNULL, **kw)
    assert b"Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def shows_escaped(out: bytes) -> None:
    assert b"\x1b" not in out and b"\x07" not in out and b"\r" not in out, out[-2000:]
    text = out.decode("utf-8")  # valid UTF-8, whatever the paths
    assert "2.14.1\\x1b]0;owned" in text, text[-3000:]


def test_escape_sequences_and_cr_lf_are_shown_not_obeyed(hostile):
    base, venv, env = hostile
    target = ["--python", os.fsencode(str(venv_bin(venv)))]
    screen = sd(["check", *target, "-v"], env)
    assert screen.returncode in (0, 1), screen.stderr[-2000:]
    shows_escaped(screen.stdout)
    assert b"[ok] everything is fine" not in screen.stdout.replace(b"\\r\\n[ok] everything is fine", b"")  # never a line of its own
    md_file = Path(os.fsdecode(os.fsencode(str(base)) + b"/out-\xff.md"))
    md = sd(["check", *target, "--format", "markdown", "-o", os.fsencode(str(md_file))], env)
    assert md.returncode in (0, 1), md.stderr[-2000:]
    shows_escaped(md_file.read_bytes())


def test_json_is_valid_utf8_and_files_are_written_at_non_utf8_paths(hostile):
    base, venv, env = hostile
    target = ["--python", os.fsencode(str(venv_bin(venv)))]
    p = sd(["check", *target, "--json"], env)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    data = json.loads(p.stdout.decode("utf-8"))  # strict UTF-8: no lone surrogate, no raw byte
    assert data["facts"]["python"]["executable"].endswith("/venv-\\xff/bin/python"), data["facts"]["python"]["executable"]
    assert data["facts"]["torch"]["version"].startswith("2.14.1\x1b"), "JSON keeps the value itself (escaped by JSON)"
    folder = os.fsencode(str(base)) + b"/bundle-\xff"
    r = sd(["report", *target, "--no-kernels", "-o", folder], env)
    assert r.returncode == 0, r.stderr[-2000:]
    bundle = Path(os.fsdecode(folder))
    json.loads((bundle / "report.json").read_bytes().decode("utf-8"))
    shows_escaped((bundle / "report.md").read_bytes())
    assert b"bundle-\\xff" in r.stderr and b"\xff" not in r.stderr  # the message names the folder visibly


@pytest.mark.parametrize(
    "args",
    [["check", "--json"], ["check"], ["explain", "driver-too-old"], ["install", "--dry-run", "--torch", "2.13.0", "--variant", "cpu", "--no-index"]],
    ids=["check-json", "check", "explain", "install-dry-run"],
)
@pytest.mark.parametrize("how", ["closed", "full"])
def test_closed_or_full_stdout_is_one_sentence_and_exit_2(hostile, args, how):
    base, venv, env = hostile
    argv = [*console_script(), *args]
    if args[0] in ("check", "install"):
        argv += ["--python", os.fsencode(str(venv_bin(venv)))]
    if args[0] == "install":
        wheels = base / "wheels"
        wheels.mkdir(exist_ok=True)
        (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
        argv += ["--find-links", str(wheels)]
    if how == "closed":
        p = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", *argv], env=env, stderr=subprocess.PIPE, timeout=180, stdin=subprocess.DEVNULL)
        why = "it is closed"
    else:
        with open("/dev/full", "wb") as full:
            p = subprocess.run(argv, env=env, stdout=full, stderr=subprocess.PIPE, timeout=180, stdin=subprocess.DEVNULL)
        why = "no space left on device"
    lines = [ln for ln in p.stderr.decode("utf-8").splitlines() if ln.startswith("stackdoctor: ")]
    assert p.returncode == 2, p.stderr[-2000:]
    assert lines == [f"stackdoctor: cannot write to standard output: {why}."], p.stderr[-2000:]
    assert b"Traceback" not in p.stderr and b"internal error" not in p.stderr
