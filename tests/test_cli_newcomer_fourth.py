"""What a new user trips over, fourth pass (issue 46): each item through the real console script; the terminal
items on a real pseudo-terminal (Python's ``pty``), the pipe items through a real shell pipe."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import console_script, machine_env, new_venv, run_sd
from test_install_transaction import seeded_old, venv, wheels  # noqa: F401  (fixtures: a real venv with a stand-in torch)


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


def sd(*args: str) -> str:
    return shlex.join([*console_script(), *args])


# ---------------------------------------------------------------- item 5: a closed pipe keeps the exit code


def piped_codes(command: str, tmp_path: Path, runs: int) -> list[str]:
    """``command | head -1`` and ``command | head -n 0`` (a reader gone before the first line: the race the first
    one loses now and then, every time) under ``set -o pipefail``, ``runs`` times each: the pipeline's exit codes."""
    script = (f"set -o pipefail; for i in $(seq {runs}); do for n in 1 0; do {command} 2>/dev/null | head -n $n >/dev/null; echo $?; done; done")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env(tmp_path), timeout=300)
    return r.stdout.split()


@pytest.mark.posix
def test_list_checks_into_head_exits_as_if_read_whole(tmp_path):
    """The reader leaves after one line; stackdoctor's exit code stays the one a full read gets (0), every run."""
    assert piped_codes(sd("check", "--list-checks"), tmp_path, 3) == ["0"] * 6


@pytest.mark.posix
def test_a_dry_run_plan_into_head_exits_with_the_plans_own_code(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cmd = sd("install", "--dry-run", "--offline", "--python", str(venv / "bin" / "python"))
    whole = run_sd(shlex.split(cmd), env=env(tmp_path))
    assert len(whole.stdout.splitlines()) > 4, whole.stdout
    assert piped_codes(cmd, tmp_path, 2) == [str(whole.rc)] * 4


# ---------------------------------------------------------------- item 4: a typo'd version is bad input


def fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def newest_known():
    from stackdoctor.matrix import load_matrix

    return max(r.version for r in load_matrix([]).releases)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_version_no_release_can_have_is_one_sentence_with_the_nearest_releases(tmp_path, lang):
    r = run_sd(["install", "--torch", "2.31", "--dry-run", "--offline", "--python", str(fresh_venv(tmp_path)), "--lang", lang], env=env(tmp_path))
    assert r.rc == 2 and r.stdout == "", (r.rc, r.stdout)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "2.3.1" in r.stderr and "2.13.0" in r.stderr and str(newest_known()) in r.stderr, r.stderr  # the dot, the swap, the newest
    assert ("没有任何 torch 版本" if lang == "zh" else "no torch release has this version") in r.stderr, r.stderr


def test_far_beyond_the_newest_minor_is_refused_and_the_next_minors_go_to_the_sources(tmp_path):
    """The matrix is a snapshot: the next two minors after its newest (and the next major's first) may be real and are
    asked of the sources (an unmet plan, exit 1, when none serves them); one more minor than that is a typo (exit 2)."""
    from stackdoctor.install.locate import MINORS_AHEAD

    new = newest_known()
    python = str(fresh_venv(tmp_path))
    for version in (f"{new.major}.{new.minor + MINORS_AHEAD}.0", f"{new.major + 1}.0", f"{new.major}.{new.minor}.7", "1.13.1"):
        r = run_sd(["install", "--torch", version, "--dry-run", "--offline", "--python", python], env=env(tmp_path))
        assert r.rc == 1 and "no torch release has" not in r.stderr, (version, r.rc, r.stderr)
        assert f"torch {version} is not in the compatibility matrix" in r.stdout, (version, r.stdout)
    r = run_sd(["install", "--torch", f"{new.major}.{new.minor + MINORS_AHEAD + 1}", "--dry-run", "--offline", "--python", python], env=env(tmp_path))
    assert r.rc == 2 and "no torch release has this version" in r.stderr, r.stderr


# ---------------------------------------------------------------- item 2: folder hints name the right thing


@pytest.mark.posix
def test_a_venvs_bin_folder_is_answered_with_its_python(tmp_path):
    python = fresh_venv(tmp_path)
    r = run_sd(["check", "--python", str(python.parent)], env=env(tmp_path))
    assert r.rc == 2 and r.stderr.strip() == f"stackdoctor: --python {python.parent} is a folder; did you mean {python}?", r.stderr


@pytest.mark.posix
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_venv_whose_python_is_a_broken_link_names_the_link_and_its_target(tmp_path, lang):
    python = fresh_venv(tmp_path)
    gone = tmp_path / "removed-base" / "python3.11"
    python.unlink()
    python.symlink_to(gone)
    (python.parent / "python3").unlink(missing_ok=True)
    r = run_sd(["check", "--python", str(python.parent.parent), "--lang", lang], env=env(tmp_path))
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(python) in r.stderr and str(gone) in r.stderr, r.stderr
    assert ("失效的链接" if lang == "zh" else "is a broken link") in r.stderr, r.stderr


# ---------------------------------------------------------------- item 3: a satisfied venv shows its plan and files


def satisfied_run(tmp_path: Path, torch_python: str, *extra: str):
    # --torch 2.13.0 --offline: the suite's real torch venv has exactly this build, and no index is asked
    return run_sd(["install", "--dry-run", "--torch", "2.13.0", "--offline", "--python", torch_python, *extra], env=env(tmp_path))


def test_a_satisfied_dry_run_prints_its_plan_and_says_what_it_checked(tmp_path, torch_python):
    r = satisfied_run(tmp_path, torch_python)
    assert r.rc == 0, r.stderr
    assert f"Plan for {torch_python}: torch 2.13.0 (cpu)" in r.stdout and "2.13.0+cpu" in r.stdout, r.stdout
    assert "command: none, the target already has this build." in r.stdout, r.stdout
    assert "complete by its RECORD's file sizes (a dry run;" in r.stderr, r.stderr  # what was checked, not "every sha256"


@pytest.mark.parametrize("emit", ["requirements", "uv", "environment.yml"])
def test_a_satisfied_target_emits_a_file_of_every_kind(tmp_path, torch_python, emit):
    r = satisfied_run(tmp_path, torch_python, "--emit", emit)
    assert r.rc == 0 and r.stdout.strip(), (emit, r.stdout, r.stderr)
    assert "Plan for" not in r.stdout and "Plan for" in r.stderr  # the file alone on stdout
    if emit == "environment.yml":
        assert "dependencies:" in r.stdout and "pytorch=2.13.0" in r.stdout, r.stdout
    if emit == "requirements":
        lines = r.stdout.splitlines()
        assert "torch==2.13.0+cpu" in lines and "--extra-index-url https://download.pytorch.org/whl/cpu" in lines, lines


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheel is cp311")
def test_emitted_requirements_name_the_public_index_not_this_machines_folder(tmp_path):
    """A +cpu build found in a folder of this machine (pip's find-links): the file a teammate gets says where the
    build comes from for anyone (PyTorch's CPU index), and names the folder only in a comment."""
    from indexserver import WheelSpec, build_wheel

    folder = tmp_path / "wheels"
    folder.mkdir()
    spec = WheelSpec("torch", "2.13.0+cpu", "cp311-cp311-manylinux_2_28_x86_64")
    (folder / spec.filename).write_bytes(build_wheel(spec))
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {folder}\n", encoding="utf-8")
    r = run_sd(["install", "--emit", "requirements", "--torch", "2.13.0", "--offline", "--python", str(fresh_venv(tmp_path))],
               env=env(tmp_path, PIP_CONFIG_FILE=str(conf)))
    assert r.rc == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert "torch==2.13.0+cpu" in lines and "--extra-index-url https://download.pytorch.org/whl/cpu" in lines, lines
    assert not any(ln.startswith("--find-links") for ln in lines) and any(ln.startswith("#") and str(folder) in ln for ln in lines), lines


def test_a_dry_runs_size_check_and_an_installs_sha256_check(venv, tmp_path):
    """What each decision needs, on a real venv: a file of the same size with other bytes passes the dry run's size
    check (which says that is all it checked) and fails the install's sha256 check; a missing file fails both."""
    from test_install import isolated_env
    from test_install_transaction import site_of

    from stackdoctor.install import verify as install_verify
    from stackdoctor.system import System

    system, python = System(env=isolated_env(tmp_path)), str(venv / "bin" / "python")
    f = site_of(venv) / "torch" / "part5" / "m5.py"
    f.write_bytes(bytes(b ^ 1 for b in f.read_bytes()))
    assert install_verify.intact(system, python, ["torch"], sizes_only=True) is None
    assert install_verify.intact(system, python, ["torch"]) == "torch: torch/part5/m5.py differs from its RECORD"
    f.unlink()
    assert install_verify.intact(system, python, ["torch"], sizes_only=True) == "torch: torch/part5/m5.py is missing"


# ---------------------------------------------------------------- item 11: -o follows the extension and says so


def test_output_file_format_follows_its_extension_and_one_line_says_where(tmp_path, torch_python):
    import json
    import xml.etree.ElementTree as ET

    out = tmp_path / "x.json"
    r = run_sd(["check", "--no-kernels", "--python", torch_python, "-o", str(out)], env=env(tmp_path), cwd=tmp_path)
    assert r.rc in (0, 1) and r.stdout == "", r.stdout
    assert json.loads(out.read_text(encoding="utf-8"))["schema"] == "stackdoctor.report/1"
    assert r.stderr.strip().splitlines()[-1] == f"stackdoctor: wrote the report (json) to {out}.", r.stderr
    for name, fmt, given, first in (("x.md", "markdown", [], "## "), ("x.xml", "junit", [], "<?xml"), ("x.txt", "human", [], ""),
                                    ("y.json", "markdown", ["--format", "markdown"], "## ")):
        r = run_sd(["check", "--replay", str(out), "-o", str(tmp_path / name), *given], env=env(tmp_path), cwd=tmp_path)
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert text.startswith(first) and r.stderr.strip().endswith(f"wrote the report ({fmt}) to {tmp_path / name}."), (name, text[:80], r.stderr)
        if fmt == "junit":
            ET.fromstring(text.encode("utf-8"))
    r = run_sd(["check", "--replay", str(out), "-o", str(tmp_path / "z.md"), "--lang", "zh"], env=env(tmp_path), cwd=tmp_path)
    assert r.stderr.strip().endswith(f"已将报告（markdown）写入 {tmp_path / 'z.md'}。"), r.stderr


# ---------------------------------------------------------------- item 12: habits from other CLIs


@pytest.mark.parametrize(("argv", "first"), [
    (["-h"], "Usage: stackdoctor [OPTIONS] COMMAND"), (["help"], "Usage: stackdoctor [OPTIONS] COMMAND"),
    (["check", "-h"], "Usage: stackdoctor check [OPTIONS]"), (["help", "check"], "Usage: stackdoctor check [OPTIONS]"),
    (["help", "matrix", "show"], "Usage: stackdoctor matrix show [OPTIONS]"),
    (["version"], "stackdoctor "), (["-V"], "stackdoctor "),
])
def test_help_and_version_as_other_clis_spell_them(tmp_path, argv, first):
    r = run_sd(argv, env=env(tmp_path))
    assert r.rc == 0 and r.stdout.startswith(first), (argv, r.rc, r.stdout[:200], r.stderr)


def test_a_common_option_before_the_command_is_taken_as_after_it(tmp_path):
    before = run_sd(["--lang", "zh", "explain", "driver-too-old"], env=env(tmp_path))
    after = run_sd(["explain", "driver-too-old", "--lang", "zh"], env=env(tmp_path))
    assert before.rc == after.rc == 0 and before.stdout == after.stdout and "驱动" in before.stdout
    r = run_sd(["--lang=zh", "matrix", "show", "--torch", "9.9"], env=env(tmp_path))
    assert r.rc == 2 and "兼容性矩阵中没有 torch 9.9" in r.stderr, r.stderr


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_config_key_one_letter_off_gets_did_you_mean(tmp_path, lang):
    (tmp_path / "pyproject.toml").write_text("[tool.stackdoctor]\nmin_gpu = 2\n", encoding="utf-8")
    r = run_sd(["check", "--no-kernels", "--python", sys.executable, "--lang", lang], env=env(tmp_path), cwd=tmp_path)
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert ("您是指 `min_gpus` 吗" if lang == "zh" else "did you mean `min_gpus`?") in r.stderr, r.stderr


# ---------------------------------------------------------------- item 6: Ctrl-C keeps the finished work


def ctrl_c_in_pty(argv: list[str], env_: dict[str, str], after: str, columns: int = 100, timeout: float = 240) -> tuple[int, str]:
    """Run ``argv`` on a real pseudo-terminal; once ``after`` has been drawn, press Ctrl-C (the terminal's ^C, so
    the foreground process group gets SIGINT as from a keyboard): (exit code, everything drawn)."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))

    def own_terminal() -> None:  # the child leads a session whose controlling terminal is the pty: ^C reaches it
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env={**env_, "COLUMNS": str(columns), "TERM": "xterm"},
                            close_fds=True, preexec_fn=own_terminal)
    os.close(slave)
    drawn, pressed = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                drawn += data
            elif proc.poll() is not None:
                break
            if not pressed and after.encode() in drawn:
                os.write(master, b"\x03")
                pressed = True
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert pressed, drawn.decode("utf-8", "replace")[-3000:]
    return rc, drawn.decode("utf-8", "replace")


@pytest.mark.posix
@pytest.mark.linux
def test_ctrl_c_during_kernels_shows_the_sizes_measured_then_interrupted(tmp_path, torch_python):
    argv = [*console_script(), "kernels", "matmul", "--device", "cpu", "--sizes", "32,48,2048,3072,4096", "--python", torch_python, "--lang", "en"]
    rc, drawn = ctrl_c_in_pty(argv, env(tmp_path), after="2 done: matmul cpu fp32 48")
    assert rc == 130, drawn[-3000:]
    assert "1 done: matmul cpu fp32 32³" in drawn  # the per-size progress on the terminal
    table = drawn.split("interrupted")[0]
    assert "32³" in table and "48³" in table and "│ ok" in table, drawn[-3000:]
    assert drawn.rstrip().endswith("stackdoctor: interrupted."), drawn[-500:]


@pytest.mark.posix
@pytest.mark.linux
def test_ctrl_c_during_allreduce_full_shows_the_sizes_done_then_interrupted(tmp_path, torch_python):
    argv = [*console_script(), "kernels", "allreduce", "--full", "--nproc", "2", "--iters", "2", "--python", torch_python, "--lang", "en"]
    rc, drawn = ctrl_c_in_pty(argv, env(tmp_path), after="allreduce 3/")
    assert rc == 130, drawn[-3000:]
    import re

    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.split("^C")[-1])  # after the key: what the screen keeps
    kept = re.split(r"[\r\n]", plain.split("stackdoctor: interrupted.")[0])
    done = [ln for ln in kept if ln.startswith("allreduce ") and " done, " in ln]  # whole lines (the status line has a spinner)
    assert any(ln.startswith("allreduce 1/26: 8 B done") for ln in done) and any(ln.startswith("allreduce 3/26") for ln in done), drawn[-3000:]


# ---------------------------------------------------------------- item 7: narrow terminals


@pytest.mark.posix
@pytest.mark.linux
@pytest.mark.parametrize("columns", [60, 80])
def test_the_kernels_table_keeps_the_size_of_a_sweep_on_a_narrow_terminal(tmp_path, torch_python, columns):
    import re

    from test_cli_second_pass import run_in_pty, screen_lines

    argv = [*console_script(), "kernels", "matmul", "--device", "cpu", "--sizes", "32,48", "--python", torch_python, "--lang", "en"]
    rc, drawn = run_in_pty(argv, env(tmp_path), columns=columns)
    assert rc == 0, drawn[-3000:]
    rows = [ln for ln in screen_lines(drawn) if ln.startswith("matmul ")]
    assert rows and len(rows) == len(set(rows)), rows  # no two rows alike: the size tells them apart
    assert all(re.search(r"│ (32|48)³ ", ln) for ln in rows), rows
    assert "size" in " ".join(ln for ln in screen_lines(drawn) if "┃" in ln)


@pytest.mark.parametrize("where", ["pipe", "pty"])
@pytest.mark.parametrize("columns", ["60", "80"])
def test_a_tree_row_with_a_long_path_stays_one_line_in_a_pipe(tmp_path, torch_python, columns, where):
    """In a pipe, and on a real terminal (where rich alone folded the path inside a name and put its note at column 0)."""
    import json

    long = tmp_path / "a-rather-long-folder-name-for-projects" / "another-level-of-nesting-here" / "and-one-more-level"
    long.mkdir(parents=True)
    (long / "venv").symlink_to(Path(torch_python).parent.parent)
    python = long / "venv" / "bin" / "python"
    saved = tmp_path / "r.json"
    run_sd(["check", "--no-kernels", "--python", str(python), "-o", str(saved)], env=env(tmp_path))
    assert json.loads(saved.read_text(encoding="utf-8"))["facts"]["python"]["executable"]
    if where == "pipe":
        lines = run_sd(["check", "--replay", str(saved)], env=env(tmp_path, COLUMNS=columns)).stdout.splitlines()
    else:
        from test_cli_second_pass import run_in_pty, screen_lines

        _, drawn = run_in_pty([*console_script(), "check", "--replay", str(saved)], env(tmp_path), columns=int(columns))
        lines = [ln.rstrip("\r") for ln in screen_lines(drawn)]
    assert all(len(ln) <= int(columns) for ln in lines), lines  # folded to the width ...
    first = next(i for i, ln in enumerate(lines) if ln.startswith("✓ python"))
    row = [lines[first], *[ln for ln in lines[first + 1:] if ln.startswith(" " * 11)]]
    # the row ends with the path, its kind and which rule chose the target ("venv, from --python", issue 47)
    assert "".join(ln.strip() for ln in row).replace(" ", "").endswith(f"{python}venv,from--python".replace(" ", "")), row
    in_path = row[: next(i for i, ln in enumerate(row) if "bin/python" in ln)]
    assert all(ln.rstrip().endswith("/") for ln in in_path), row  # ... the path folded after a /, the words after it between words
    assert not any(ln.startswith(("venv", "-", "/", "a-rather", "another")) for ln in lines), lines  # nothing of it at column 0


# ---------------------------------------------------------------- item 8: a spread says what it means


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_checks_quick_kernel_table_notes_a_noisy_spread_as_kernels_does(tmp_path, torch_python, lang):
    import json

    saved = tmp_path / "r.json"
    run_sd(["check", "--python", torch_python, "-o", str(saved)], env=env(tmp_path), timeout=300)
    data = json.loads(saved.read_text(encoding="utf-8"))
    compute = [r for r in data["facts"]["kernels"]["results"] if r["kernel"] != "allreduce"]
    assert compute, data["facts"]["kernels"]
    for r in compute:  # steady runs ...
        r.update(tflops=0.004, tflops_min=0.004, tflops_max=0.004, runs=5)
    saved.write_text(json.dumps(data), encoding="utf-8")
    calm = run_sd(["check", "--replay", str(saved), "--lang", lang], env=env(tmp_path))
    compute[0].update(tflops_min=0.001, tflops_max=0.16)  # ... then one 3.94 GFLOP/s ±1988% run
    saved.write_text(json.dumps(data), encoding="utf-8")
    noisy = run_sd(["check", "--replay", str(saved), "--lang", lang], env=env(tmp_path))
    word = "波动大" if lang == "zh" else "noisy:"
    assert word not in calm.stdout and "±0%" in calm.stdout, calm.stdout
    assert "±1988%" in noisy.stdout and word in noisy.stdout and "1988" in noisy.stdout.split("±1988%", 1)[1], noisy.stdout


# ---------------------------------------------------------------- item 9: [tool.stackdoctor]'s findings


@pytest.mark.slow
def test_project_requirement_findings_are_round_once_and_fixable(tmp_path, torch_python):
    import json
    import re

    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nmin_gpus = 2\nkernels = ["matmul", "allreduce"]\nmin_busbw = 1000\n', encoding="utf-8")
    r = run_sd(["check", "--python", torch_python, "--json"], env=env(tmp_path), cwd=tmp_path, timeout=300)
    data = r.json()
    assert data["facts"]["kernels"]["allreduce"]["backend"] == "gloo", data["facts"]["kernels"]["allreduce"]
    codes = [f["code"] for f in data["findings"]]
    unmet = [f for f in data["findings"] if f["code"] == "requirement-unmet"]
    assert "allreduce-slow" in codes and not any("busbw" in f["detail"] for f in unmet), [f["detail"] for f in unmet]  # said once
    gpus = next(f for f in unmet if "GPU(s)" in f["detail"])
    assert not gpus["fix"].startswith("stackdoctor check") and "at least 2 GPU(s)" in gpus["fix"], gpus["fix"]
    text = json.dumps(data["findings"])
    assert "NCCL_DEBUG" not in text  # a gloo run on CPUs
    assert not re.search(r"\d\.\d{4,} GB/s", text), text  # busbw rounded
    (tmp_path / "r.json").write_text(r.stdout, encoding="utf-8")
    md = run_sd(["check", "--replay", str(tmp_path / "r.json"), "--format", "markdown"], env=env(tmp_path), cwd=tmp_path).stdout
    rows = [ln for ln in md.splitlines() if ln.startswith("|") and "`requirement-unmet`" in ln]
    assert rows and len(rows) == len(set(rows)), rows  # each row says which requirement
    # item 7: on a 60-column terminal a fix's comment folds between words, its command stays one line
    from test_cli_second_pass import run_in_pty, screen_lines

    slow = next(f for f in data["findings"] if f["code"] == "allreduce-slow")
    command, _, comment = slow["fix"].partition("   # ")
    _, drawn = run_in_pty([*console_script(), "check", "--replay", str(tmp_path / "r.json")], env(tmp_path), columns=60)
    lines = [ln.rstrip() for ln in screen_lines(drawn)]
    at = next(i for i, ln in enumerate(lines) if ln.strip() == f"fix: {command}")
    folded = []
    for ln in lines[at + 1:]:
        if not ln.startswith(" " * 9):
            break
        folded.append(ln.strip())
    assert " ".join(folded) == f"# {comment}" and all(len(ln) <= 60 for ln in lines[at + 1:at + 1 + len(folded)]), folded


# ---------------------------------------------------------------- item 10: install and check agree on "done"


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheel is cp311")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_install_says_what_check_will_say_about_the_torch_it_installed(tmp_path, lang):
    """A torch whose import warns "Failed to initialize NumPy" (as the real CPU wheel does without numpy): install's
    verdict after "done" names check's torch-numpy-missing, with its fix, as the next check says it."""
    from indexserver import WheelSpec, _torch_files, build_wheel
    from test_install_sources import user_env

    files = _torch_files("2.13.0+cpu")
    files["torch/__init__.py"] += ("import warnings\nwarnings.warn(\"Failed to initialize NumPy: No module named 'numpy' "
                                   "(Triggered internally at torch/csrc/utils/tensor_numpy.cpp:84.)\", UserWarning)\n")
    folder = tmp_path / "wheels"
    folder.mkdir()
    spec = WheelSpec("torch", "2.13.0+cpu", "cp311-cp311-manylinux_2_28_x86_64", [], files)
    (folder / spec.filename).write_bytes(build_wheel(spec))
    venv = tmp_path / "venv"
    new_venv(venv)
    python = str(venv / "bin" / "python")
    e = user_env(tmp_path)
    r = run_sd(["install", "--yes", "--torch", "2.13.0", "--offline", "--find-links", str(folder), "--python", python, "--lang", lang], env=e,
               timeout=300)
    assert r.rc == 0, r.stderr[-3000:]
    after = r.stderr.split("done" if lang == "en" else "完成", 1)[-1]
    assert "torch-numpy-missing" in after and f"{python} -m pip install numpy" in after, r.stderr[-2000:]
    check = run_sd(["check", "--no-kernels", "--import-torch", "--python", python, "--json"], env=e)
    assert "torch-numpy-missing" in [f["code"] for f in check.json()["findings"]]


# ---------------------------------------------------------------- item 13: the macOS what-if says what "(cpu)" is


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_macos_what_if_header_and_its_reason_agree(tmp_path, lang):
    r = run_sd(["install", "--dry-run", "--platform", "macosx_14_0_arm64", "--python-version", "3.12", "--offline", "--lang", lang], env=env(tmp_path))
    assert r.rc == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert head.endswith(("(cpu)", "（cpu）")), head
    reason = next(ln for ln in r.stdout.splitlines() if "MPS" in ln)
    assert ("它的 cpu 变体同时也是 Apple GPU 构建" if lang == "zh" else "its cpu variant is the Apple GPU build too") in reason, reason


@pytest.mark.parametrize("columns", ["60", "80"])
def test_the_diff_header_names_each_file_whole_and_no_line_ends_in_spaces(tmp_path, columns):
    import json

    from stackdoctor.model.facts import Facts
    from stackdoctor.model.report import Report

    folder = tmp_path / "reports-from-the-machine-that-broke-last-tuesday"
    folder.mkdir()
    a, b = folder / "before-the-driver-update.json", folder / "after-the-driver-update.json"
    fa, fb = Facts(), Facts()
    fa.torch.version, fb.torch.version = "2.12.0+cu126", "2.13.0+cu130"
    a.write_text(Report(facts=fa).to_json(), encoding="utf-8")
    b.write_text(Report(facts=fb).to_json(), encoding="utf-8")
    assert json.loads(a.read_text(encoding="utf-8"))["facts"]["torch"]["version"] == "2.12.0+cu126"
    r = run_sd(["diff", str(a), str(b)], env=env(tmp_path, COLUMNS=columns))
    lines = r.stdout.splitlines()
    assert f"A: {a}" in lines and f"B: {b}" in lines, lines[:6]
    assert all(ln == ln.rstrip() for ln in lines), [ln for ln in lines if ln != ln.rstrip()]
    assert any("2.12.0+cu126" in ln for ln in lines), lines


@pytest.mark.posix
@pytest.mark.linux
@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheel is cp311")
@pytest.mark.parametrize("columns", [60, 80])
def test_the_plan_table_never_splits_a_wheel_name_or_url_inside_a_name(tmp_path, columns):
    from indexserver import WheelSpec, build_wheel
    from test_cli_second_pass import run_in_pty, screen_lines

    folder = tmp_path / "wheels"
    folder.mkdir()
    spec = WheelSpec("torch", "2.13.0+cpu", "cp311-cp311-manylinux_2_28_x86_64")
    (folder / spec.filename).write_bytes(build_wheel(spec))
    argv = [*console_script(), "install", "--dry-run", "--torch", "2.13.0", "--offline", "--find-links", str(folder), "--python", str(fresh_venv(tmp_path))]
    rc, drawn = run_in_pty(argv, env(tmp_path), columns=columns)
    assert rc == 0, drawn[-2000:]
    lines = [ln.rstrip() for ln in screen_lines(drawn)]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("package"))
    table = lines[start:next(i for i, ln in enumerate(lines) if ln.startswith("why:"))]  # the packages, their sources and wheels
    assert all(len(ln) <= columns for ln in table), [ln for ln in table if len(ln) > columns]
    first = next(i for i, ln in enumerate(table) if ln.startswith("wheel") or ".whl" in ln)
    wheel = [ln.strip() for ln in table[first:]] if table[first].startswith("wheel") else [table[first].split()[-1]]
    assert all(ln.endswith("/") for ln in table[1:first] if ln.startswith("torch ") and len(table) > first + 1), table  # a URL: after a /
    assert spec.filename in "".join(ln.split(": ", 1)[-1] for ln in wheel), table  # whole, once its pieces are joined ...
    assert all(ln.endswith(("-", ".whl")) for ln in wheel), table  # ... each piece ending at a - (never inside a name)
