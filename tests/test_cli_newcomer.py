"""What a newcomer trips over (issue 16), each through the real console script: input checks that answer
in one sentence with exit 2, output a person can copy from a log, readable numbers, the words of the
screens in the chosen language, and interrupts that leave nothing running.

Most runs replay a report built here (``check --replay``): the screens and the rules run for real on
facts chosen to show one thing each, in a fraction of a probe run's time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import console_script, machine_env, run_sd, validate_report

from stackdoctor.model.facts import Facts, KernelFacts, KernelResult
from stackdoctor.model.report import ProbeStatus, Report

LONG_PY = "/home/someone/projects/a-rather-long-project-name/.venv-with-a-long-name/bin/python3.12"
WIDTHS = (60, 200)


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


def usage_error(run, *needles: str) -> str:
    """Exit 2, nothing on stdout, one ``stackdoctor: ...`` line naming every needle."""
    assert run.rc == 2, (run.rc, run.stdout[-500:], run.stderr)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stackdoctor: "), run.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not run.stdout.strip()
    return lines[0]


def write_report(path: Path, report: Report) -> str:
    path.write_text(report.to_json(), encoding="utf-8")
    return str(path)


def base_facts() -> Facts:
    f = Facts()
    f.platform.system, f.platform.machine, f.platform.os_name = "Linux", "x86_64", "Ubuntu 22.04.4 LTS"
    f.platform.cpu_model, f.platform.cpu_count, f.platform.memory_total_mib = "AMD EPYC 7763 64-Core Processor", 16, 64301
    f.python.executable, f.python.version, f.python.env_kind = LONG_PY, "3.12.3", "venv"
    return f


def healthy_cpu_report() -> Report:
    f = base_facts()
    t = f.torch
    t.installed, t.version, t.variant, t.cuda_available = True, "2.13.0+cpu", "cpu", False
    t.numpy_version = "2.1.3"
    t.config = {"CPU capability usage": "AVX512", "BLAS_INFO": "mkl"}
    f.kernels = KernelFacts(
        ran=True,
        mode="quick",
        results=[
            KernelResult("matmul", "cpu", "fp32", ok=True, tflops=0.195),
            KernelResult("matmul", "cpu", "bf16", ok=True, tflops=4.61e-05),
            KernelResult("conv", "cpu", "fp32", ok=True, tflops=0.00123),
        ],
    )
    return Report(facts=f, probes=[ProbeStatus("target", "ok", 1.2), ProbeStatus("platform", "ok", 0.1)])


def broken_target_report() -> Report:
    """A target that cannot report: probe-failed, whose fix is a long command line."""
    f = base_facts()
    why = f"the target {LONG_PY} is not a Python interpreter stackdoctor can use"
    return Report(facts=f, probes=[ProbeStatus("target", "error", 0.2, why)])


# ---------------------------------------------------------------------------- wrong exit or silent acceptance


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--only", "torch-mising"], ["--only torch-mising", "did you mean torch-missing?"]),
        (["--skip", "bogus-code", "--strict"], ["--skip bogus-code", "matches no finding code"]),
        (["--only", "thunderbolt-lnk*"], ["--only thunderbolt-lnk*", "did you mean thunderbolt-link"]),
    ],
)
def test_check_refuses_codes_that_match_nothing(tmp_path, args, needles):
    replay = write_report(tmp_path / "r.json", healthy_cpu_report())
    usage_error(run_sd(["check", "--replay", replay, *args], env=env(tmp_path)), *needles)


def test_check_accepts_codes_and_prefixes_that_match(tmp_path):
    replay = write_report(tmp_path / "r.json", healthy_cpu_report())
    run = run_sd(["check", "--json", "--replay", replay, "--only", "torch-ok,platform-*", "--skip", "thunderbolt-*"], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    assert {f["code"] for f in run.json()["findings"]} <= {"torch-ok", "platform-ok"}


def test_explain_names_the_closest_code(tmp_path):
    usage_error(run_sd(["explain", "torch-mising"], env=env(tmp_path)), "unknown code 'torch-mising'", "did you mean torch-missing?")
    line = usage_error(run_sd(["explain", "zzzz-qqqq"], env=env(tmp_path)), "unknown code 'zzzz-qqqq'")
    assert "did you mean" not in line


def _not_python(tmp_path: Path) -> str:
    fake = tmp_path / "notpython"
    fake.write_text("#!/bin/sh\necho 'hello from a shell script'\n")
    fake.chmod(0o755)
    return str(fake)


COMMANDS = {"check": ["check", "--no-kernels"], "kernels": ["kernels", "matmul"], "report": ["report", "--preview", "--no-kernels"], "install": ["install", "--dry-run", "--offline"]}


@pytest.mark.posix
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_python_that_is_not_an_interpreter_is_one_sentence(tmp_path, plain_python, command):
    """The same check (stackdoctor.pipeline.engine.validate_python) behind --python for check, kernels and report."""
    venv = Path(plain_python).parent.parent
    e = env(tmp_path)
    base = COMMANDS[command]
    usage_error(run_sd([*base, "--python", str(venv)], env=e), f"--python {venv} is a folder; did you mean {venv / 'bin' / 'python'}?")
    missing = str(tmp_path / "nope" / "bin" / "python")
    usage_error(run_sd([*base, "--python", missing], env=e), f"--python {missing}: no such file.")
    usage_error(run_sd([*base, "--python", "/etc/passwd"], env=e), "--python /etc/passwd is not executable")
    fake = _not_python(tmp_path)
    usage_error(run_sd([*base, "--python", fake], env=e), f"--python {fake} is not a Python interpreter.")
    if Path("/usr/bin/perl").is_file():
        usage_error(run_sd([*base, "--python", "/usr/bin/perl"], env=e), "--python /usr/bin/perl is not a Python interpreter.")


def test_python_folder_on_windows_points_at_scripts(tmp_path):
    """Windows venvs keep their interpreter in Scripts\\python.exe; that layout is named first there."""
    from stackdoctor.core.errors import UsageError
    from stackdoctor.pipeline.engine import validate_python

    (tmp_path / "venv" / "Scripts").mkdir(parents=True)
    (tmp_path / "venv" / "Scripts" / "python.exe").write_bytes(b"MZ")
    with pytest.raises(UsageError, match=re.escape(f"did you mean {tmp_path / 'venv' / 'Scripts' / 'python.exe'}?")):
        validate_python(str(tmp_path / "venv"), os_name="nt")


def test_a_real_python_passes_and_says_whether_torch_is_there(plain_python, torch_python):
    from stackdoctor.pipeline.engine import validate_python

    assert validate_python(plain_python).torch is False
    found = validate_python(torch_python)
    assert found.torch is True and found.version is not None and found.version[0] == 3


def test_kernels_without_torch_says_install(tmp_path, plain_python):
    run = run_sd(["kernels", "matmul", "--python", plain_python], env=env(tmp_path))
    line = usage_error(run, f"torch is not installed in {plain_python}; install it with: stackdoctor install --python {plain_python}")
    assert "SIGSEGV" not in line and "ModuleNotFoundError" not in line


def test_replay_reads_the_folder_report_wrote(tmp_path):
    saved = write_report(tmp_path / "saved.json", healthy_cpu_report())
    bundle = tmp_path / "bundle"
    run = run_sd(["report", "--replay", saved, "-o", str(bundle)], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    again = run_sd(["check", "--replay", str(bundle)], env=env(tmp_path))
    assert again.rc == 0, again.stderr
    assert f"replay of {bundle / 'report.json'}" in again.stdout
    usage_error(run_sd(["check", "--replay", str(tmp_path / "nope")], env=env(tmp_path)), "no such file")
    empty = tmp_path / "empty"
    empty.mkdir()
    usage_error(run_sd(["check", "--replay", str(empty)], env=env(tmp_path)), f"cannot replay {empty}: it is a folder without a report.json")


def test_truncated_replay_says_where_once(tmp_path):
    text = healthy_cpu_report().to_json()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index('"AMD EPYC') + 8], encoding="utf-8")  # ends inside a string
    line = usage_error(run_sd(["check", "--replay", str(cut)], env=env(tmp_path)), str(cut), "truncated")
    assert "at at" not in line and re.search(r"at line \d+, column \d+\)\.$", line), line


def test_matrix_validate_missing_file(tmp_path):
    missing = tmp_path / "missing.yaml"
    line = usage_error(run_sd(["matrix", "validate", str(missing)], env=env(tmp_path)), f"cannot read the compat matrix {missing}: no such file.")
    assert "line 1" not in line


# ---------------------------------------------------------------------------- output a person can use


def _check_screen(tmp_path: Path, report: Report, width: int, *extra: str) -> str:
    replay = write_report(tmp_path / f"screen-{width}.json", report)
    run = run_sd(["check", "--replay", replay, *extra], env=env(tmp_path, COLUMNS=str(width)))
    assert run.rc in (0, 1), run.stderr
    return run.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_fix_is_one_line_and_no_trailing_spaces_without_a_tty(tmp_path, width):
    out = _check_screen(tmp_path, broken_target_report(), width)
    fix = f'fix: {LONG_PY} -c "import torch; print(torch.__version__)"'
    assert any(line.strip() == fix for line in out.splitlines()), out
    assert not [line for line in out.splitlines() if line != line.rstrip()], "trailing spaces"


def test_fix_is_one_line_on_the_kernels_screen_without_a_tty(tmp_path, torch_python):
    run = run_sd(["kernels", "matmul", "--sizes", "64", "--python", torch_python], env=env(tmp_path, COLUMNS="60", STACKDOCTOR_TEST_HOOK="abort"))
    assert run.rc == 1, run.stderr
    fixes = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith("fix: ")]
    assert fixes, run.stdout
    assert not [line for line in run.stdout.splitlines() if line != line.rstrip()], "trailing spaces"
    data = json.loads(run_sd(["kernels", "matmul", "--sizes", "64", "--python", torch_python, "--json"],
                             env=env(tmp_path, STACKDOCTOR_TEST_HOOK="abort")).stdout)
    wanted = [f"fix: {f['fix'].splitlines()[0]}" for f in data["findings"] if f["fix"]]
    assert wanted and set(wanted) <= set(fixes), (wanted, fixes)
    assert any(len(line) > 60 for line in fixes)  # longer than the console: still one line


def test_markdown_on_stdout_is_short(tmp_path):
    rep = healthy_cpu_report()
    tags = [f"cp312-cp312-manylinux_2_{i}_x86_64" for i in range(17, 400)]
    rep.raw_outputs = [
        {"argv": ["/usr/bin/python3", "/site/stackdoctor/_worker/sd_target.py"], "returncode": 0, "status": "ok", "duration_s": 1.0,
         "stdout": "@@stackdoctor@@ " + json.dumps({"section": "python", "tags": tags}) + "\n", "stderr": "", "signal": None,
         "truncated": False, "detail": ""},
        {"argv": ["/usr/bin/python3", "/site/stackdoctor/_worker/sd_nvml.py"], "returncode": 0, "status": "ok", "duration_s": 0.1,
         "stdout": "{}\n", "stderr": "", "signal": None, "truncated": False, "detail": ""},
    ]
    replay = write_report(tmp_path / "raw.json", rep)
    run = run_sd(["check", "--format", "markdown", "--replay", replay], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    md = run.stdout
    assert "manylinux_2_300" not in md and "more characters in report.json" not in md and "<details><summary><code>" not in md
    assert "`stackdoctor report` writes them into its bundle" in md
    assert len(md) < 4000, len(md)
    # the bundle keeps the raw outputs; the NVML child is a worker file, so its summary is a plain command
    bundle = tmp_path / "bundle"
    assert run_sd(["report", "--replay", replay, "-o", str(bundle)], env=env(tmp_path)).rc == 0
    full = (bundle / "report.md").read_text(encoding="utf-8")
    assert "<code>/usr/bin/python3 /site/stackdoctor/_worker/sd_nvml.py</code>" in full
    assert "&quot;" not in full and "manylinux_2_20_x86_64" in full  # report.md: the first tags and a count (issue 24)
    assert f"... {len(tags) - 12} more in report.json" in full and "manylinux_2_300" in (bundle / "report.json").read_text(encoding="utf-8")


def test_flop_rates_have_one_unit_per_magnitude(tmp_path):
    out = _check_screen(tmp_path, healthy_cpu_report(), 100)
    assert "195 GFLOP/s" in out and "46.1 MFLOP/s" in out and "1.23 GFLOP/s" in out
    assert "0.00" not in out and "e-05" not in out
    replay = write_report(tmp_path / "rates.json", healthy_cpu_report())
    bundle = tmp_path / "bundle"
    assert run_sd(["report", "--replay", replay, "-o", str(bundle)], env=env(tmp_path)).rc == 0
    md = (bundle / "report.md").read_text(encoding="utf-8")
    assert "| 195 GFLOP/s |" in md and "| 46.1 MFLOP/s |" in md
    data = json.loads(run_sd(["check", "--json", "--replay", replay], env=env(tmp_path)).stdout)
    assert [r["tflops"] for r in data["facts"]["kernels"]["results"]] == [0.195, 4.61e-05, 0.00123]  # JSON keeps TFLOP/s


def test_kernels_table_has_units(tmp_path, torch_python):
    run = run_sd(["kernels", "matmul", "--sizes", "64,128", "--python", torch_python], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    # one unit for the rate column, in its header (issue 24: a unit in every cell cut the column at 80 columns),
    # chosen by the largest rate so that it reads 1 to 999
    assert len(set(re.findall(r"[MGT]FLOP/s", run.stdout))) == 1, run.stdout
    rows = [[c.strip() for c in ln.split("│")] for ln in run.stdout.splitlines() if ln.startswith("matmul")]
    rates = [float(r[-2]) for r in rows]
    assert len(rates) >= 4 and 1 <= max(rates) < 1000, run.stdout


def test_strict_says_why_it_failed(tmp_path):
    f = base_facts()  # no torch: torch-missing is a warning
    replay = write_report(tmp_path / "warn.json", Report(facts=f, probes=[ProbeStatus("target", "ok", 0.1)]))
    plain = run_sd(["check", "--replay", replay], env=env(tmp_path))
    assert plain.rc == 0 and "exit 1" not in plain.stdout
    strict = run_sd(["check", "--replay", replay, "--strict"], env=env(tmp_path))
    assert strict.rc == 1
    last = strict.stdout.strip().splitlines()[-1]
    assert re.match(r"1 warning, \d+ ok — exit 1: --strict makes warnings fail$", last), last
    gh = run_sd(["check", "--replay", replay, "--strict", "--format", "github"], env=env(tmp_path))
    assert gh.rc == 1 and gh.stdout.strip().splitlines()[-1].endswith("--strict makes warnings fail")


@pytest.mark.parametrize("width", WIDTHS)
def test_verbose_shows_probe_sources_whole(tmp_path, width):
    rep = healthy_cpu_report()
    long_source = "file:/opt/" + "/".join(f"very-long-folder-name-{i}" for i in range(12)) + "/version.json"
    rep.facts.platform.sources = {"os_name": long_source, "cpu_model": "file:/proc/cpuinfo"}
    out = _check_screen(tmp_path, rep, width, "-v")
    cells = "".join(line.rsplit("│", 1)[1].strip() for line in out.splitlines() if line.count("│") >= 3)
    assert long_source in cells.replace(" ", ""), out


def test_healthy_cpu_screen_shows_the_cpu_and_numpy(tmp_path):
    out = _check_screen(tmp_path, healthy_cpu_report(), 200)
    line = next(ln for ln in out.splitlines() if "cpu " in ln and "cores" in ln)
    assert "AMD EPYC 7763 64-Core Processor, 16 cores, torch uses AVX512, 62.8 GiB memory" in line
    assert "numpy 2.1.3" in out


def test_numpy_version_comes_from_its_metadata(tmp_path):
    """numpy's version is read from its distribution metadata in the target, without importing it."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    dist = Path(site) / "numpy-2.1.3.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.1.3\n")
    (Path(site) / "numpy").mkdir()
    (Path(site) / "numpy" / "__init__.py").write_text("raise SystemExit('numpy must not be imported by the probe')\n")
    run = run_sd(["check", "--json", "--no-kernels", "--python", str(py)], env=env(tmp_path))
    assert run.rc in (0, 1), run.stderr
    data = run.json()
    validate_report(data)
    assert data["facts"]["torch"]["numpy_version"] == "2.1.3"


def test_real_healthy_screen_shows_this_cpu(tmp_path, torch_python):
    run = run_sd(["check", "--json", "--no-kernels", "--import-torch", "--python", torch_python], env=env(tmp_path))
    data = run.json()
    screen = run_sd(["check", "--no-kernels", "--replay", _save(tmp_path, run.stdout)], env=env(tmp_path, COLUMNS="200")).stdout
    p, cfg = data["facts"]["platform"], data["facts"]["torch"]["config"]
    cpu = next(ln for ln in screen.splitlines() if " cpu " in ln)
    if p["cpu_model"]:
        assert p["cpu_model"] in cpu
    assert f"{p['cpu_count']} cores" in cpu
    # torch's own word for the vector ISA it dispatches to (AVX2, AVX512, ...): on every x86/arm CPU build
    assert cfg.get("CPU capability usage"), cfg
    assert f"torch uses {cfg['CPU capability usage']}" in cpu


def _save(tmp_path: Path, text: str) -> str:
    p = tmp_path / "saved-real.json"
    p.write_text(text, encoding="utf-8")
    return str(p)


# ---------------------------------------------------------------------------- wording


def test_redaction_counts_read_as_english(tmp_path):
    rep = healthy_cpu_report()
    rep.facts.environment = {"PIP_INDEX_URL": "https://alice:s3cret@pypi.example.com/simple"}
    replay = write_report(tmp_path / "creds.json", rep)
    run = run_sd(["report", "--replay", replay, "-o", str(tmp_path / "b")], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    assert "1 URL credential" in run.stderr and "1 credentials" not in run.stderr


def test_resolver_names_gpus_and_builds_plainly(tmp_path):
    e = env(tmp_path)
    one = run_sd(["install", "--dry-run", "--offline", "--torch", "2.13.0", "--gpu", "sm_35", "--driver", "580.82.07"], env=e)
    assert "GPU 0 (sm_35)" in one.stdout + one.stderr and "unknown GPU" not in one.stdout + one.stderr
    two = run_sd(["install", "--dry-run", "--offline", "--torch", "2.13.0", "--gfx", "gfx1100", "--gfx", "gfx9999"], env=e)
    text = two.stdout + two.stderr
    assert "ROCm build" in text and "ROCM" not in text
    assert "GPU 0 (gfx1100)" in text and "gfx1100 (gfx1100)" not in text


def test_import_timeout_is_said_once(tmp_path, plain_python):
    run = run_sd(["check", "--json", "--no-kernels", "--import-torch", "--torch-timeout", "2", "--python", plain_python],
                 env=env(tmp_path, STACKDOCTOR_TEST_HOOK="torch-import-hang"))
    details = [f["detail"] for f in run.json()["findings"] if f["code"] == "probe-timeout"]
    assert details, run.stdout
    assert "import torch did not finish in 2 s" in details[0]
    assert "did not finish: import torch did not finish" not in details[0]


def test_diff_names_installed_distributions(tmp_path):
    a, b = healthy_cpu_report(), healthy_cpu_report()
    a.facts.torch.distributions = {"torch": "2.13.0+cpu", "nvidia-ml-py": "12.575.51"}
    b.facts.torch.distributions = {"torch": "2.13.0+cpu"}
    pa, pb = write_report(tmp_path / "a.json", a), write_report(tmp_path / "b.json", b)
    run = run_sd(["diff", pa, pb, "--json"], env=env(tmp_path))
    assert run.rc == 1
    doc = run.json()
    assert doc["schema"] == "stackdoctor.diff/2"
    assert [d["key"] for d in doc["differences"]] == ["installed_distributions.nvidia-ml-py"]
    table = run_sd(["diff", pa, pb], env=env(tmp_path, COLUMNS="200")).stdout
    assert "installed_distributions.nvidia-ml-py" in table and "torch.distributions" not in table


def _commands() -> list[list[str]]:
    import typer

    from stackdoctor.cli import app

    root = typer.main.get_command(app)
    out = []
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        out += [[name, sub] for sub in subs] if subs else [[name]]
    return out


def test_help_shows_words_not_python_types(tmp_path):
    seen = set()
    for cmd in _commands():
        run = run_sd([*cmd, "--help"], env=env(tmp_path, COLUMNS="200"))
        assert run.rc == 0, (cmd, run.stderr)
        assert not re.search(r"<(str|int|float|bool|list)\b|list\[|float range|int range", run.stdout), (cmd, run.stdout)
        seen |= set(re.findall(r"--[a-z-]+ ([A-Z][A-Za-z/,.]*)", run.stdout))
    assert {"PATH", "SECONDS", "CODE", "GB/s", "FILE", "DIR", "N"} <= seen, seen


# ---------------------------------------------------------------------------- the screens in Chinese

ALLOWED_WORDS = {
    # names of tools, devices, units and kernels, which stay as they are
    "Python", "python", "torch", "venv", "CPU", "GPU", "GiB", "MiB", "ms", "MFLOP", "GFLOP", "TFLOP", "AVX", "AVX2", "AVX512",
    "matmul", "conv", "compile", "cpu", "fp32", "bf16", "fp16", "tf32", "numpy", "stackdoctor", "install", "json", "PyTorch",
}


def _english_words(text: str, *data: str) -> set[str]:
    """ASCII words in ``text`` that are neither allowed names nor part of the given data (paths, codes, models,
    what a probe recorded). Single letters are units and flags (``GFLOP/s``, ``2.0e-03``, ``-c``)."""
    word = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
    # a piece of a path folded at the console's width is a substring of that path
    return {w for w in word.findall(text) if w not in ALLOWED_WORDS and len(w) > 1 and not any(w in d for d in data)}


def test_check_screen_in_chinese_has_no_english_words(tmp_path):
    rep = broken_target_report()
    rep.facts.kernels = healthy_cpu_report().facts.kernels
    for width in WIDTHS:
        replay = write_report(tmp_path / f"zh{width}.json", rep)
        run = run_sd(["check", "--replay", replay, "--lang", "zh", "-v"], env=env(tmp_path, COLUMNS=str(width)))
        from stackdoctor.rules import catalog

        codes = " ".join(catalog.codes())
        recorded = " ".join(p.error or "" for p in rep.probes)  # a probe's own words are a recorded fact, shown as is
        words = _english_words(run.stdout, LONG_PY, replay, codes, recorded, rep.facts.platform.cpu_model or "", rep.created_at,
                               "import print __version__ target platform")  # probe names and the fix's Python command
        assert not words, (words, run.stdout)
        assert "修复：" in run.stdout and "运行时" in run.stdout


def test_kernels_screen_in_chinese_has_no_english_words(tmp_path, torch_python):
    run = run_sd(["kernels", "matmul", "--sizes", "64", "--python", torch_python, "--lang", "zh"], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    words = _english_words(run.stdout, "64x64x64")
    assert not words, (words, run.stdout)
    assert "内核" in run.stdout and "速率" in run.stdout


def test_markdown_in_chinese(tmp_path):
    replay = write_report(tmp_path / "md.json", broken_target_report())
    md = run_sd(["check", "--format", "markdown", "--replay", replay, "--lang", "zh"], env=env(tmp_path)).stdout
    for english in ("| Status |", "### Stack", "### Findings", "**Fix:**", "Probes"):
        assert english not in md, english
    assert "### 软件栈" in md and "**修复：**" in md


# ---------------------------------------------------------------------------- interrupts


def _alive(marker: bytes, parent: int | None = None) -> list[int]:
    """Processes (not zombies) whose command line holds ``marker`` (children of ``parent`` only, when given:
    another test file running the same worker at the same time is not this test's)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker in cmd and stat[0] != "Z" and (parent is None or int(stat[1]) == parent):
            out.append(int(pid))
    return out


def _interrupt(args: list[str], marker: bytes, wait_for: int, env_: dict[str, str], settle_s: float = 0.5) -> tuple[int, str, float, set[int]]:
    """SIGINT once ``wait_for`` children of this run hold ``marker``: (exit code, stderr, seconds to exit, those children)."""
    proc = subprocess.Popen([*console_script(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_)
    try:
        start = time.monotonic()
        while len(_alive(marker, proc.pid)) < wait_for and time.monotonic() - start < 60:
            time.sleep(0.05)
        children = set(_alive(marker, proc.pid))
        assert len(children) >= wait_for, "the children never started"
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - sent, children
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.posix
@pytest.mark.linux
def test_interrupting_allreduce_stops_every_rank(tmp_path, torch_python):
    port = str(_free_port())
    marker = f'"master_port": {port}'.encode()
    rc, err, took, ranks = _interrupt(["kernels", "allreduce", "--nproc", "2", "--master-port", port, "--python", torch_python], marker, 2,
                                      env(tmp_path))
    assert rc == 130 and took < 5, (rc, took, err)
    said = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("allreduce ")]  # (the sizes done before, one line each)
    assert said == ["stackdoctor: interrupted."], err
    time.sleep(1)
    assert not set(_alive(marker)) & ranks, "ranks outlived stackdoctor"


@pytest.mark.posix
@pytest.mark.linux
def test_interrupting_check_stops_the_target(tmp_path, plain_python):
    marker = b"sd_target.py"
    rc, err, took, workers = _interrupt(["check", "--no-kernels", "--import-torch", "--python", plain_python], marker, 1,
                                        env(tmp_path, STACKDOCTOR_TEST_HOOK="torch-import-hang"))
    assert rc == 130 and took < 5, (rc, took, err)
    assert [ln for ln in err.splitlines() if ln.strip()] == ["stackdoctor: interrupted."], err
    time.sleep(1)
    assert not set(_alive(marker)) & workers, "the target worker outlived stackdoctor"


def _free_port() -> int:
    from stackdoctor.verify.runner import free_port

    return free_port()


def test_stop_children_kills_what_system_started():
    """The CLI's Ctrl-C path: every child System started and still running is killed, with its tree."""
    import threading

    from stackdoctor.system import LIVE_CHILDREN, System, stop_children

    results = []
    worker = threading.Thread(
        target=lambda: results.append(System().run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=120, record=False)),
        daemon=True,
    )
    start = time.monotonic()
    worker.start()
    while not LIVE_CHILDREN and time.monotonic() - start < 10:
        time.sleep(0.02)
    assert stop_children() == 1
    worker.join(10)
    assert results and results[0].returncode != 0 and time.monotonic() - start < 10
    assert stop_children() == 0  # nothing left


@pytest.mark.linux
@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="the synthetic wheels are manylinux x86_64")
@pytest.mark.parametrize("width", WIDTHS)
def test_install_plan_in_a_log_keeps_wheel_names_and_commands_whole(tmp_path, plain_python, width):
    """install's plan through a pipe (a CI log): a wheel's file name and the command are one line each at any
    width, and no line ends in spaces (the table used to fold the name mid-word and pad every row)."""
    from indexserver import build_wheel, catalogue

    folder = tmp_path / "wheels"
    folder.mkdir()
    py_tag = subprocess.run([plain_python, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                            capture_output=True, text=True, check=True).stdout.strip()
    specs = [s for s in catalogue(py_tag) if s.version.endswith("+cpu") and s.tag.startswith(py_tag)]
    for s in specs:
        (folder / s.filename).write_bytes(build_wheel(s))
    torch_wheel = next(s.filename for s in specs if s.name == "torch")
    run = run_sd(["install", "--dry-run", "--offline", "--find-links", str(folder), "--torch", "2.13.0", "--python", plain_python],
                 env=env(tmp_path, COLUMNS=str(width)))
    assert run.rc == 0, (run.stdout, run.stderr)
    lines = run.stdout.splitlines()
    assert [ln for ln in lines if ln != ln.rstrip()] == [], "trailing spaces"
    row = next(ln for ln in lines if ln.startswith("torch "))
    assert row.split()[-1] == torch_wheel, row
    cmd = lines[lines.index("command:") + 1]
    assert cmd.strip().startswith(plain_python) and cmd.rstrip().endswith(str(folder)), cmd
