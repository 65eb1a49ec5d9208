"""Issue 24, part B, through the real console script: a Chinese user reads stackdoctor's own sentences in
Chinese (errors, explain, report, diff), and the help, the code lists and the option checks behave as a newcomer
expects (help on stdout with exit 0, whole descriptions, aligned columns, empty values and conflicting options
refused in one sentence).

Every run is a replay or stops at the option check, so the file takes a few seconds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import run_sd
from test_cli_newcomer import env, healthy_cpu_report, usage_error, write_report

from stackdoctor.rules import catalog

CJK = re.compile(r"[\u4e00-\u9fff]")
PKG = Path(catalog.__file__).resolve().parent.parent  # stackdoctor/ (the catalogue is rules/catalog.py)


def zh_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return env(tmp_path, LANG="zh_CN.UTF-8", **extra)


def english_words(line: str, *values: str) -> set[str]:
    """English words of ``line`` that are not values: the given ones (paths, what was typed), options
    (``--python``), quoted or backticked names, and the program's own name."""
    for v in sorted(values, key=len, reverse=True):
        line = line.replace(v, " ")
    line = re.sub(r"`[^`]*`|'[^']*'|--?[A-Za-z][A-Za-z-]*", " ", line)
    return {w for w in re.findall(r"[A-Za-z]{2,}", line) if w not in {"stackdoctor", "help", "json", "markdown", "NVIDIA", "CUDA", "GPU", "CPU", "PyPI", "wheel"}}


# ---------------------------------------------------------------------------- errors in the user's language


@pytest.mark.parametrize(
    "args, values",
    [
        (["check", "--python", "/no/such/python"], ["/no/such/python"]),
        (["check", "--replay", "/no/such/report.json"], ["/no/such/report.json"]),
        (["check", "--only", ""], []),
        (["check", "--json", "--format", "markdown"], []),
        (["check", "--timeout", "abc"], []),
        (["check", "--nope"], ["Possible options"]),  # click's list of options is a value
        (["chek"], []),
        (["diff", "a.json"], []),
        (["kernels", "--sizes", "1,x"], ["1,x"]),
        (["install", "--driver", "banana", "--dry-run"], ["banana", "550.54.14"]),
        (["matrix", "show", "--torch", "1.0.0"], ["1.0.0"]),
        # resolve.request_value_error's sentences (raised by install from a variable)
        (["install", "--dry-run", "--platform", "amiga"], ["manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64", "macosx_14_0_arm64"]),
        (["install", "--dry-run", "--python-version", "2.7"], ["2.7", "3.12", "Python"]),
        (["install", "--dry-run", "--python-version", "x.y"], ["3.12", "3.13t", "Python"]),
        (["install", "--dry-run", "--torch", "banana"], ["2.13.0"]),
        (["install", "--dry-run", "--torch", ">=banana"], ["2.13.0"]),
    ],
)
def test_errors_are_one_chinese_sentence(tmp_path, args, values):
    run = run_sd(args, env=zh_env(tmp_path))
    line = usage_error(run)
    assert CJK.search(line), line
    newest = re.search(r"：(\d+\.\d+\.\d+)）", line)  # matrix show: the newest release named
    words = english_words(line.removeprefix("stackdoctor: "), *values, *(newest.groups() if newest else ()), "torch")
    assert not words, (words, line)
    # the same command in English is the English sentence: one template, two languages
    en = usage_error(run_sd(args, env=env(tmp_path, LANG="C.UTF-8")))
    assert not CJK.search(en)


def test_lang_option_decides_the_error_language(tmp_path):
    line = usage_error(run_sd(["check", "--python", "/nope", "--lang", "zh"], env=env(tmp_path, LANG="C")))
    assert line == "stackdoctor: --python /nope：文件不存在。"
    line = usage_error(run_sd(["check", "--python", "/nope", "--lang", "en"], env=zh_env(tmp_path)))
    assert line == "stackdoctor: --python /nope: no such file."


def test_explain_in_chinese_uses_the_words_and_colons_of_check(tmp_path):
    run = run_sd(["explain", "torch-missing"], env=zh_env(tmp_path))
    assert run.rc == 0, run.stderr
    assert "严重程度：警告" in run.stdout and "层：torch" in run.stdout and "修复：stackdoctor install" in run.stdout
    assert not re.search(r"[\u4e00-\u9fff]: ", run.stdout), run.stdout  # no half-width colon after Chinese
    listing = run_sd(["explain"], env=zh_env(tmp_path)).stdout
    assert "  失败  " in listing and " fail " not in listing


def test_report_and_diff_speak_chinese(tmp_path):
    replay = write_report(tmp_path / "r.json", healthy_cpu_report())
    out = tmp_path / "bundle"
    run = run_sd(["report", "--replay", replay, "-o", str(out)], env=zh_env(tmp_path))
    assert run.rc == 0, run.stderr
    lines = run.stderr.splitlines()
    assert lines[0] == f"已写入 {out / 'report.json'}、{out / 'report.md'} 和 {out / 'report.html'}。", lines
    assert lines[1].startswith("已脱敏（") and lines[1].endswith("）；分享前请先阅读 report.md。"), lines
    assert not english_words(lines[1], "report.md", "UUID"), lines[1]
    same = run_sd(["diff", replay, replay], env=zh_env(tmp_path, COLUMNS="400"))
    assert same.rc == 0 and same.stdout.strip() == f"{replay} 与 {replay} 之间没有差异。", same.stdout


def test_allreduce_reasons_are_catalogued():
    """Each reason the allreduce worker gives for its backend reads in Chinese (`后端：CPU 张量：通过 TCP 使用 gloo`)."""
    tree = ast.parse((PKG / "_worker" / "sd_allreduce.py").read_text(encoding="utf-8"))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "choose_backend")
    reasons = [r.value.elts[2].value for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)]
    assert "CPU tensors: gloo over TCP" in reasons
    for reason in reasons:
        zh = catalog.sentence(reason, "zh")
        assert CJK.search(zh), reason
    assert catalog.sentence("CPU tensors: gloo over TCP", "zh") == "CPU 张量：通过 TCP 使用 gloo"


# ---------------------------------------------------------------------------- help, lists, option checks


@pytest.mark.parametrize("args", [[], ["matrix"]])
def test_a_command_alone_prints_its_help(tmp_path, args):
    run = run_sd(args, env=env(tmp_path))
    assert run.rc == 0 and run.stderr == "", (run.rc, run.stderr)
    assert run.stdout.startswith("Usage: stackdoctor") and "Commands:" in run.stdout


def test_top_level_help_shows_whole_descriptions(tmp_path):
    run = run_sd(["--help"], env=env(tmp_path, COLUMNS="80"))
    assert run.rc == 0
    commands = run.stdout.split("Commands:", 1)[1]
    assert "…" not in commands and "..." not in commands, commands
    flat = " ".join(commands.split())
    assert "Probe every layer of the PyTorch stack and say what is wrong, with the fix." in flat, flat
    assert max(len(ln) for ln in run.stdout.splitlines()) <= 80


@pytest.mark.parametrize("args", [["check", "--list-checks"], ["explain"]])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_code_lists_are_aligned(tmp_path, args, lang):
    from rich.cells import cell_len

    run = run_sd([*args, "--lang", lang], env=env(tmp_path, COLUMNS="200"))  # (at 80 a long title folds under its column: test_screens_80_columns)
    assert run.rc == 0, run.stderr
    rows = [ln for ln in run.stdout.splitlines() if any(ln.strip().startswith(c + " ") for c in catalog.codes())]
    assert len(rows) == len(catalog.codes())
    starts = set()
    for ln in rows:
        title = catalog.title(ln.split()[0], lang)
        assert ln.endswith(title), ln
        starts.add(cell_len(ln[: len(ln) - len(title)]))  # the title column starts at one place on every row
    assert len(starts) == 1, starts
    assert any(" requirements " in ln or " 项目要求 " in ln for ln in rows)  # the longest layer name, in its column


@pytest.mark.parametrize("option", ["--python", "--only", "--skip", "--replay", "--config"])
def test_an_empty_option_value_is_refused(tmp_path, option):
    usage_error(run_sd(["check", option, "", "--no-kernels"], env=env(tmp_path, LANG="C")), option, "empty")


def test_json_and_another_format_conflict(tmp_path):
    usage_error(run_sd(["check", "--json", "--format", "markdown"], env=env(tmp_path, LANG="C")), "--json", "--format markdown", "conflict")
    replay = write_report(tmp_path / "r.json", healthy_cpu_report())
    run = run_sd(["check", "--json", "--format", "json", "--replay", replay], env=env(tmp_path))  # the same format twice is fine
    assert run.rc == 0 and run.json()["schema"].startswith("stackdoctor.report/")


def test_report_md_has_no_line_to_scroll(tmp_path):
    """The target worker's one-line JSON (hundreds of wheel tags, ~8,000 characters) is indented and its tag list
    cut to a count in report.md; report.json keeps every tag."""
    import json

    rep = healthy_cpu_report()
    tags = [f"cp312-cp312-manylinux_2_{n}_x86_64" for n in range(17, 40)] * 20
    line = "@@stackdoctor@@ " + json.dumps({"executable": "/usr/bin/python3", "tags": tags})
    assert len(line) > 8000
    rep.raw_outputs = [{"argv": ["/usr/bin/python3", "sd_target.py"], "returncode": 0, "stdout": line + "\n", "duration_s": 0.5}]
    out = tmp_path / "bundle"
    run = run_sd(["report", "--replay", write_report(tmp_path / "r.json", rep), "-o", str(out)], env=env(tmp_path))
    assert run.rc == 0, run.stderr
    md = (out / "report.md").read_text(encoding="utf-8")
    assert max(len(ln) for ln in md.splitlines()) <= 300, max(md.splitlines(), key=len)[:200]
    assert f"... {len(tags) - 12} more in report.json" in md and '"executable": "/usr/bin/python3"' in md
    saved = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert line in saved["raw_outputs"][0]["stdout"]


def test_install_plan_screen_in_chinese(tmp_path):
    """The plan a what-if prints (no network: --offline) is Chinese around its values: headings, columns, the
    resolver's reasons and warnings, the rejected builds and the closing line."""
    args = ["install", "--dry-run", "--offline", "--driver", "550.54.14", "--gpu", "sm_89", "--platform", "linux_x86_64", "--python-version", "3.12"]
    run = run_sd(args, env=zh_env(tmp_path))
    assert run.rc == 0, run.stderr
    screen = run.stdout + run.stderr
    for word in ("的安装计划：torch 2.14.1（cu126）", "软件包", "原因：", "警告：", "已排除：", "命令（在那台机器上运行；此处不运行）：", "试运行：没有做任何修改。"):
        assert word in screen, (word, screen)
    values = ("NVIDIA driver 550.54.14", "GPU 0 (sm_89)", "https://download.pytorch.org/whl/cu126", "python3 -m pip install torch==2.14.1+cu126 --index-url",
              "PTX JIT", "pytorch/test-infra tools/scripts/generate_binary_build_matrix.py@c840391a15b9", "GPU sm_89", "GPU (sm_89)", "linux_x86_64", "cp312-cp312-linux_x86_64", "Python 3.12", "Linux", "DIR", "NAME", "torch", "cu126", "cu130", "cu132")
    for line in screen.splitlines():
        assert not english_words(line, *values), (english_words(line, *values), line)
    en = run_sd(args, env=env(tmp_path, LANG="C.UTF-8"))
    assert "Plan for a hypothetical machine: NVIDIA driver 550.54.14" in en.stdout + en.stderr and not CJK.search(en.stdout + en.stderr)
