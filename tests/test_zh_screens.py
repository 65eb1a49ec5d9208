"""Issue 46 item 1: everything a Chinese reader (``LANG=zh_CN.UTF-8``) sees of an install plan, a what-if and ``--help``
is Chinese. Each test runs the real CLI and FAILS on any English word left on the screen (tests/zhscreen.py: what a zh
screen may show as written is a value, a command, `code`, an acronym, or a name the glossary keeps):

- install plans over recorded machines (tests/fixtures/machines, replayed as reports) and what-ifs: a CPU machine,
  NVIDIA (one GPU, a mix, an old driver, Windows, a Jetson), AMD ROCm, Intel XPU, Huawei Ascend, macOS (Apple silicon
  and Intel), torchvision and torchaudio beside torch, a machine whose pip.conf names a PyPI-style mirror;
- ``--help`` of every command the CLI has (walked from the click tree, so a new command is covered);
- the names ``install -v`` gives its steps (every step the transaction times).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest
from helpers import machine_env, new_venv, run_sd
from zhscreen import english_sentences, english_words

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
MACHINES = REPO / "tests" / "fixtures" / "machines"
DEAD_INDEX = "http://127.0.0.1:9/simple"


def zh_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = machine_env(tmp_path / "bin", None, PIP_INDEX_URL=DEAD_INDEX, **extra)
    env["LANG"] = "zh_CN.UTF-8"
    return env


def replayed(case: str, tmp_path: Path) -> str:
    """A recorded machine (tests/fixtures/machines/<case>.json) as the report ``--replay`` reads."""
    facts = json.loads((MACHINES / f"{case}.json").read_text(encoding="utf-8"))["facts"]
    out = tmp_path / f"{case}.report.json"
    out.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}), encoding="utf-8")
    return str(out)


def assert_chinese(text: str, where: str) -> None:
    left = english_sentences(text)
    assert not left, f"{where}: {len(left)} line(s) with English on a zh screen:\n" + "\n".join(f"  {english_words(line)}  <- {line}" for line in left)


# ---------------------------------------------------------------- the detector


def test_the_detector_finds_english_words_and_passes_values_and_names():
    assert english_words("假设的机器：NVIDIA driver 550.54, GPU sm_89 的安装计划") == ["driver"]
    assert english_words("  - torch 2.12.0 cpu：华为昇腾 NPU 使用 torch 的 CPU 构建，并在旁边安装 torch-npu") == []
    assert english_words("（the compatibility matrix, pypi_default 2.14 linux_x86_64）：it fits this machine") == [
        "the", "compatibility", "matrix", "it", "fits", "this", "machine"]
    assert english_words("  - GPU 0 NVIDIA GeForce RTX 4070 (sm_89) 的最新版本与 CUDA 构建") == []
    assert english_words("Huawei Ascend NPU 910B") == ["Huawei", "Ascend"]
    assert english_words("  --dry-run    显示安装计划和命令；不做任何修改。") == []
    assert english_words("  --dry-run    Show the plan and the command; change nothing.") == ["Show", "the", "plan", "and", "the", "command", "change", "nothing"]
    assert english_words("  /x/bin/python -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu") == []
    assert english_words("用法：stackdoctor install [选项] [PACKAGE]...") == []
    assert english_words("Usage: stackdoctor install [OPTIONS] [PACKAGE]...") == ["Usage", "install"]
    assert english_words("  record: 0.4 s") == ["record", "s"]


# ---------------------------------------------------------------- install plans and what-ifs

PLANS: dict[str, list[str]] = {
    "cpu-machine": ["--replay", "@no-gpu-linux"],
    "cpu-here": [],
    "nvidia-ada-old-driver": ["--replay", "@c14-rtx4070-driver550"],
    "nvidia-mixed-gpus": ["--replay", "@mixed-rtx5090-gtx1080-driver580"],
    "nvidia-k80": ["--replay", "@k80-driver470"],
    "nvidia-windows": ["--replay", "@windows-gtx1070-driver551"],
    "nvidia-what-if": ["--driver", "550.54", "--gpu", "sm_89"],
    "jetson": ["--replay", "@jetson-orin-jp62"],
    "amd-rocm": ["--replay", "@amd-gfx1031"],
    "amd-what-if": ["--gfx", "gfx1100"],
    "intel-xpu": ["--replay", "@intel-arc-a770"],
    "ascend-what-if": ["--npu", "910B", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"],
    "macos-apple-silicon": ["--replay", "@apple-m2-macos15"],
    "macos-intel": ["--replay", "@intel-mac-catalina"],
    "macos-what-if": ["--platform", "macosx_14_0_arm64", "--python-version", "3.12"],
    "torchvision-companions": ["torchvision", "torchaudio", "--replay", "@c14-rtx4070-driver550"],
    "torchvision-cpu": ["torchvision", "--replay", "@no-gpu-linux"],
    "emit-uv": ["--emit", "uv", "--replay", "@c14-rtx4070-driver550"],
    "what-if-beside-a-wheel-folder": ["--find-links", "@@folder", "--python-version", "3.12"],
}


@pytest.mark.parametrize("case", sorted(PLANS))
def test_install_plan_is_chinese(case, tmp_path):
    folder = tmp_path / "wheels"  # a find-links folder with another torch than the plan's (only its name is read)
    folder.mkdir()
    (folder / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    args = [str(folder) if a == "@@folder" else replayed(a[1:], tmp_path) if a.startswith("@") else a for a in PLANS[case]]
    r = run_sd(["install", "--dry-run", "--offline", *args], env=zh_env(tmp_path), cwd=tmp_path)
    assert r.rc in (0, 1), r.stderr
    shown = r.stderr if "--emit" in args else r.stdout + r.stderr  # --emit's stdout is the file for the project
    assert re.search(r"[\u4e00-\u9fff]", shown), shown
    assert_chinese(shown, case)
    if {"--replay", "--driver", "--npu", "--python-version"} & set(args):  # a what-if: its header names the machine in Chinese
        assert "假设的机器：" in shown, shown


def test_the_what_if_header_names_the_driver_and_the_kind_in_chinese(tmp_path):
    r = run_sd(["install", "--dry-run", "--offline", "--driver", "550.54", "--gpu", "sm_89"], env=zh_env(tmp_path), cwd=tmp_path)
    assert "假设的机器：NVIDIA 驱动 550.54，GPU sm_89" in r.stdout, r.stdout
    r = run_sd(["install", "--dry-run", "--offline", "--npu", "910B"], env=zh_env(tmp_path), cwd=tmp_path)
    assert "华为昇腾 NPU 910B" in r.stdout and "Huawei" not in r.stdout + r.stderr, r.stdout
    assert "（提交 " in r.stdout and "读取于 " in r.stdout, r.stdout  # the citation of Ascend's table


@pytest.fixture(scope="module")
def mirror():
    from sourceserver import SourceServer

    src = SourceServer().start()
    yield src
    src.stop()


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")
@pytest.mark.parametrize("packages", [[], ["torchvision"]], ids=["torch", "torchvision"])
def test_a_plan_on_a_machine_with_a_mirror_is_chinese(mirror, tmp_path, packages):
    """pip.conf names a PyPI-style mirror (torch only as PyPI's label-less default build) and a wheel folder; the
    PyTorch index does not answer: the plan says which variant the mirror's build is, and how that is known, in Chinese."""
    folder = mirror.write_folder(tmp_path / "wheels", ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"])
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {mirror.pypi()}\nfind-links = {folder}\n", encoding="utf-8")
    env = zh_env(tmp_path, PIP_CONFIG_FILE=str(conf), STACKDOCTOR_INDEX_BASE="http://127.0.0.1:9/whl", STACKDOCTOR_MATRIX="")
    env.pop("PIP_INDEX_URL")
    r = run_sd(["install", "--dry-run", "--python", sys.executable, *packages], env=env, cwd=tmp_path)
    assert r.rc in (0, 1, 2), r.stderr
    shown = r.stdout + r.stderr
    assert "只有 PyPI 默认构建" in shown and "兼容性矩阵的 pypi_default 条目" in shown, shown
    assert_chinese(shown, "mirror")


# ---------------------------------------------------------------- --help of every command


def _command_paths() -> list[list[str]]:
    from stackdoctor import cli

    out: list[list[str]] = []

    def walk(cmd: object, path: list[str]) -> None:
        out.append(path)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(cli.command(None), [])
    return out


COMMANDS = _command_paths()


def test_the_walk_finds_every_command():
    assert {" ".join(p) for p in COMMANDS} >= {"", "check", "install", "kernels", "explain", "report", "diff", "matrix", "matrix learn"}


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "stackdoctor" for p in COMMANDS])
@pytest.mark.parametrize("columns", ["80", "120"])
def test_help_is_chinese(tmp_path, path, columns):
    r = run_sd([*path, "--help"], env=zh_env(tmp_path, COLUMNS=columns))
    assert r.rc == 0, r.stderr
    assert r.stdout.startswith("用法：stackdoctor"), r.stdout[:200]
    assert_chinese(r.stdout, " ".join(path) or "stackdoctor")
    from rich.cells import cell_len

    assert max(cell_len(line) for line in r.stdout.splitlines()) <= int(columns), r.stdout  # Chinese folded by display cells


def test_help_with_the_flag_and_in_english(tmp_path):
    """``--lang zh`` after the command gives the same Chinese help; English help is click's, untouched."""
    env = machine_env(tmp_path / "bin", None)
    zh = run_sd(["install", "--lang", "zh", "--help"], env=env)
    assert zh.stdout.startswith("用法：stackdoctor install [选项]") and "假设的 NVIDIA 驱动版本" in zh.stdout, zh.stdout[:400]
    en = run_sd(["install", "--help"], env=env)
    assert en.stdout.startswith("Usage: stackdoctor install [OPTIONS]") and "What-if NVIDIA driver version." in en.stdout
    assert "[default: auto]" in en.stdout and "[默认：auto]" in zh.stdout


# ---------------------------------------------------------------- install -v: the steps' names


def _timed_steps() -> list[str]:
    tree = ast.parse((REPO / "stackdoctor" / "install" / "transaction.py").read_text(encoding="utf-8"))
    return sorted({node.args[0].value for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("steps.step")
                   and node.args and isinstance(node.args[0], ast.Constant)})


def test_every_timed_step_is_named_in_chinese():
    """``install -v`` ends with each step's time (install/result.py ``Steps.told``: ``  record: 0.4 s``); every step the
    transaction times is named in Chinese (before: record/import/commit/leftovers as written)."""
    from stackdoctor.install.result import Steps
    from stackdoctor.rules import catalog

    steps = _timed_steps()
    assert {"record", "import", "commit", "leftovers"} <= set(steps), steps
    said: list[str] = []
    s = Steps(say=said.append, verbose=True, times=[(name, 0.4) for name in steps])
    s.told()
    assert len(said) == len(steps)
    for line in said:
        zh = catalog.sentence(line, "zh")
        assert zh != line and english_words(zh) == [], (line, zh)
        assert "0.4 秒" in zh


# ---------------------------------------------------------------- every literal plan sentence, not only those a what-if reaches


def test_every_literal_plan_sentence_leaves_no_english_word():
    """Each literal reason, warning, suggestion, rejection and note the resolver and the install write (the sites
    tests/test_cli_newcomer_zh.py walks), filled with stand-in values, comes back from the catalogue with no English word
    (that walk counts only runs of three English words; before this one, 8 plan sentences had no template at all)."""
    from test_catalog import _variants
    from test_cli_newcomer_zh import _plan_sentence_sites

    from stackdoctor.rules import catalog

    left, sites = [], 0
    for where, reject, arg in _plan_sentence_sites():
        found = _variants(arg)
        if found is None:
            continue
        sites += 1
        for text in found[0]:
            if reject:
                text = re.sub(r"^Zq0q: ", "", text)
            words = english_words(catalog.sentence(text, "zh").replace("Zq", " 0").replace("q", " "))
            if words:
                left.append(f"{where}: {words[:6]} <- {text}")
    assert sites > 60
    assert not left, "add a sentences: entry (en.yaml and zh.yaml) for:\n" + "\n".join(left)


def test_every_literal_error_sentence_leaves_no_english_word():
    """Each literal message a StackdoctorError is raised with (tests/test_catalog.py's walk) comes back in Chinese with
    no English word: a value the user must type (`en`, `build-env`) is in backticks there."""
    from test_catalog import _raise_sites, _variants

    from stackdoctor.rules import catalog

    left, sites = [], 0
    for where, arg in _raise_sites():
        found = _variants(arg)
        if found is None:
            continue
        sites += 1
        for text in found[0]:
            words = english_words(catalog.sentence(text, "zh").replace("Zq", " 0").replace("q", " "))
            if words:
                left.append(f"{where}: {words[:6]} <- {text}")
    assert sites > 100
    assert not left, "add or fix a sentences: entry (en.yaml and zh.yaml) for:\n" + "\n".join(left)


@pytest.fixture(scope="module")
def index():
    from indexserver import IndexServer

    srv = IndexServer().start()
    yield srv
    srv.stop()


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")
def test_install_verbose_names_its_steps_in_chinese(index, tmp_path):
    """A real pip into a real venv from an index on 127.0.0.1 (generated wheels, NOT PyTorch), ``install --yes -v``
    under zh: the step lines and the times at the end are Chinese (pip's own transcript is pip's)."""

    venv = tmp_path / "venv"
    new_venv(venv)
    env = zh_env(tmp_path, STACKDOCTOR_MATRIX="", PIP_CACHE_DIR=str(tmp_path / "pip-cache"))
    r = run_sd(["install", "--python", str(venv / "bin" / "python"), "--index-base", index.base(), "--torch", "2.13.0", "--variant", "cpu",
                "--yes", "-v"], env=env, cwd=tmp_path, timeout=300)
    assert r.rc == 0, r.stderr[-3000:]
    times = [line for line in r.stderr.splitlines() if re.fullmatch(r"  \S.*：[\d.]+ 秒", line)]
    assert any("按 RECORD 核对已安装的文件" in t for t in times) and any("提交新构建" in t for t in times), r.stderr[-2000:]
    for line in times:
        assert english_words(line) == [], line


# ---------------------------------------------------------------- the catalogue itself


def test_no_zh_sentence_or_ui_text_is_left_in_english():
    """Every ``sentences:`` and ``ui:`` text in zh.yaml (and a kind's locale/zh.yaml), its {fields} standing for values,
    has no English word: a sentence another session adds with an English "translation" fails here, naming its key."""
    from stackdoctor.rules import catalog

    left = []
    for section in ("sentences", "ui"):
        for key, text in catalog.texts("zh")[section].items():
            words = english_words(re.sub(r"\{[^{}]*\}", "0", str(text)))
            if words:
                left.append(f"{section}.{key}: {words[:6]} <- {text}")
    assert len(catalog.texts("zh")["sentences"]) > 500
    assert not left, "translate (or put a value in `backticks`):\n" + "\n".join(left)
