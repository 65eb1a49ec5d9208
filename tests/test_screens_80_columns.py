"""Screens at 80 columns (issue 35, items 6 and 9), drawn by the real console script on a real pseudo-terminal of
80 columns (Python's ``pty``, the size set with ``TIOCSWINSZ``) and in a pipe: ``explain`` (the code list and a code's
story) and the install plan's why / warning lines fit 80 display cells, in English and Chinese, and no word is
split across two lines (a line is folded only between words, or beside a CJK character)."""

from __future__ import annotations

import re

import pytest
from helpers import console_script, run_sd
from test_cli_second_pass import env, run_in_pty, screen_lines

from stackdoctor.render.wrap import reflow, wrap
from stackdoctor.rules import catalog

WORD = re.compile(r"[A-Za-z0-9_]+")


def _cells(s: str) -> int:
    from rich.cells import cell_len

    return cell_len(s)


def split_words(lines: list[str], source: str) -> list[tuple[str, str]]:
    """Line breaks that cut a word of ``source`` in two: the line ends in letters, the next begins with letters,
    and joined they are one of the source's words while one half is not."""
    words = set(WORD.findall(source))
    out = []
    for a, b in zip(lines, lines[1:], strict=False):
        left, right = re.search(r"[A-Za-z0-9_]+$", a.rstrip()), re.match(r"[A-Za-z0-9_]+", b.strip())
        if left and right and a == a.rstrip() and left.group(0) + right.group(0) in words and not {left.group(0), right.group(0)} <= words:
            out.append((a, b))
    return out


def too_wide(lines: list[str], width: int = 80) -> list[str]:
    return [ln for ln in lines if _cells(ln.rstrip()) > width]


def test_wrap_folds_between_words_and_beside_cjk_characters_only():
    text = "the installed torch wheel's CUDA runtime needs a driver new enough for download.pytorch.org/whl/cu126 builds"
    for width in (36, 50, 80):
        lines = wrap(text, width, indent="  - ", hang="    ")
        assert not too_wide(lines, width) and " ".join(ln.strip(" -") for ln in lines).split() == text.split(), lines
    zh = "这个驱动能运行的最高 CUDA 版本。torch wheel 自带 CUDA 运行时，用 download.pytorch.org 的构建"
    lines = wrap(zh, 22)
    assert not too_wide(lines, 22) and "".join(lines).replace(" ", "") == zh.replace(" ", ""), lines
    assert not any(ln.startswith(("，", "。")) for ln in lines), lines
    for tok in ("CUDA", "torch", "wheel", "download.pytorch.org"):
        assert any(tok in ln for ln in lines), (tok, lines)
    assert wrap("x" * 30, 10) == ["x" * 10] * 3  # a word wider than the line is the one thing cut
    assert reflow("one\ntwo\n\n  1. a\n     b\n  2. 中\n  文") == [[("", "one two")], [("  1. ", "a b"), ("  2. ", "中文")]]


@pytest.mark.posix
@pytest.mark.linux
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_explain_fits_80_columns_on_a_real_terminal_without_splitting_a_word(tmp_path, lang):
    source = " ".join(catalog.title(c.code, lang) + " " + (catalog.explain(c.code, lang) or "") for c in catalog.checks())
    rc, drawn = run_in_pty([*console_script(), "explain", "--lang", lang], env(tmp_path))
    lines = screen_lines(drawn)
    assert rc == 0 and len(lines) > len(catalog.checks()), drawn[-2000:]
    assert not too_wide(lines) and not split_words(lines, source), (too_wide(lines), split_words(lines, source))
    titles: dict[str, str] = {}
    for ln in lines:  # every title whole, folded under its own column
        first = ln.split()[0] if ln.strip() else ""
        if ln.startswith("  ") and not ln.startswith("   ") and catalog.info(first) is not None:
            code = first
            titles[code] = ln
        elif ln.startswith("    ") and titles:
            titles[code] += " " + ln.strip()
    assert len(titles) == len(catalog.checks()), sorted(titles)
    for code, row in titles.items():
        assert "".join(catalog.title(code, lang).split()) in "".join(row.split()), (code, row)
    for code in ("driver-too-old", "driver-missing", "glibc-too-old"):
        rc, drawn = run_in_pty([*console_script(), "explain", code, "--lang", lang], env(tmp_path))
        lines = screen_lines(drawn)
        text = catalog.explain(code, lang) or ""
        assert rc == 0 and len(lines) > 5, drawn
        fix = catalog.ui("fix_prefix", lang)  # the fix is never folded (copied whole, as check prints it): the terminal wraps it
        assert all(ln.startswith(fix) for ln in too_wide(lines)) and not split_words(lines, text), (too_wide(lines), split_words(lines, text))
        assert sum(1 for ln in lines if ln.strip()) >= len([p for p in text.split("\n\n") if p.strip()]), lines
        shown = "".join("".join(lines).split())
        assert all("".join(t.split()) in shown for para in reflow(text) for _, t in para), lines  # every word, in order


def test_explain_in_a_pipe_follows_columns(tmp_path):
    wide = run_sd(["explain", "driver-too-old", "--lang", "en"], env=env(tmp_path, COLUMNS="120")).stdout.splitlines()
    narrow = run_sd(["explain", "driver-too-old", "--lang", "en"], env=env(tmp_path, COLUMNS="80")).stdout.splitlines()
    assert max(map(_cells, narrow)) <= 80 < max(map(_cells, wide)) <= 120, (narrow, wide)
    assert " ".join(wide).split() == " ".join(narrow).split()  # the same words, only folded elsewhere


PLAN = ["install", "--dry-run", "--offline", "--driver", "550.54.14", "--gpu", "sm_89", "--platform", "linux_x86_64", "--python-version", "3.12"]


@pytest.mark.posix
@pytest.mark.linux
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_plans_why_and_warning_lines_wrap_by_words_on_a_terminal_and_stay_whole_in_a_pipe(tmp_path, lang):
    piped = run_sd(PLAN, env=_lang_env(tmp_path, lang))
    assert piped.rc == 0, piped.stderr
    items = [ln for ln in (piped.stdout + piped.stderr).splitlines() if ln.startswith("  - ")]
    long_items = [ln for ln in items if _cells(ln) > 80]
    assert long_items, items  # the case the issue saw: a reason longer than the screen, kept whole in a pipe
    rc, drawn = run_in_pty([*console_script(), *PLAN], _lang_env(tmp_path, lang))
    lines = screen_lines(drawn)
    assert rc == 0, drawn[-2000:]
    source = "\n".join(items)
    prose = [ln for ln in lines if " -m pip " not in ln]  # (the command stays one line, to copy)
    assert not too_wide(prose) and not split_words(lines, source), (too_wide(prose), split_words(lines, source))
    # each long item is folded under a hanging indent, its words in order
    for item in long_items:
        head = item[:40]
        at = next(i for i, ln in enumerate(lines) if ln.startswith(head))
        got = [lines[at]]
        for ln in lines[at + 1:]:
            if not ln.startswith("    ") or ln.startswith("  - "):
                break
            got.append(ln)
        assert len(got) > 1 and all(g.startswith("    ") for g in got[1:]), got
        assert " ".join(g.strip() for g in got).split() == item.strip().split() or "".join(" ".join(got).split()) == "".join(item.split()), (got, item)


def _lang_env(tmp_path, lang: str) -> dict[str, str]:
    return env(tmp_path, LANG="zh_CN.UTF-8" if lang == "zh" else "C.UTF-8", LC_ALL="zh_CN.UTF-8" if lang == "zh" else "C.UTF-8")


KERNEL_HEADS = ("kernel", "device", "dtype", "size", "result", "max err", "time", "ms", "GFLOP/s", "±")


@pytest.mark.parametrize("columns", [None, "80"])
def test_the_kernels_table_fits_80_columns_in_a_pipe_with_every_column(tmp_path, torch_python, columns):
    e = env(tmp_path)
    if columns:
        e["COLUMNS"] = columns
    else:
        del e["COLUMNS"]  # a pipe with no COLUMNS: 80
    run = run_sd(["kernels", "matmul", "conv", "--device", "cpu", "--sizes", "64", "--iters", "2", "--python", torch_python, "--lang", "en"], env=e)
    assert run.rc == 0, run.stderr
    lines = run.stdout.splitlines()
    assert not too_wide(lines), too_wide(lines)
    heads = " ".join(ln for ln in lines if "┃" in ln)
    assert all(h in heads for h in KERNEL_HEADS), heads
    assert "left out" not in run.stdout and "…" not in run.stdout, run.stdout
    # the conv size folds between its words, whole: "N8 C16->32" over "32x32 k3"
    size_cells = " ".join(ln.split("│")[3].strip() for ln in lines if "│" in ln and ln.split("│")[0].strip() in ("conv", ""))
    assert size_cells.split() == ["N8", "C16->32", "32x32", "k3"], size_cells


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_kernels_column_left_out_on_a_narrow_screen_is_named(lang, monkeypatch):
    import io

    from rich.console import Console

    from stackdoctor.core import console as console_mod
    from stackdoctor.model.facts import KernelFacts, KernelResult
    from stackdoctor.render.kernel_screens import print_kernels

    buf = io.StringIO()
    monkeypatch.setattr(console_mod, "make_console", lambda **kw: Console(file=buf, width=60, force_terminal=True, color_system=None))
    print_kernels(KernelFacts(results=[KernelResult("conv", "cpu", "fp32", "N8 C16->32 32x32 k3", ok=True, max_error=3e-6, time_s=0.021,
                                                    tflops=0.0107, runs=5, tflops_min=0.01, tflops_max=0.011)]), [], lang)
    out = buf.getvalue()
    assert not too_wide(out.splitlines(), 60), out
    note = catalog.ui("k_dropped", lang, width=60, cols="").split("{")[0][:6]
    assert note in out and "ms" in out.split(note, 1)[1], out
