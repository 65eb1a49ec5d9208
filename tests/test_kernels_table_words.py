"""The kernels table says what its numbers are (issue 35 item 8's rest): a noisy run is called noisy (a spread between
the timed runs above 25% of their median: the figure in yellow, and a sentence under the table giving the worst), the ms column has one
precision (as many decimals as its smallest value needs for two significant figures), and compile's size names its unit
(elements of a 1-D tensor). In en and zh, at 80 columns too."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from stackdoctor.core import console as console_mod
from stackdoctor.model.facts import KernelFacts, KernelResult
from stackdoctor.render.kernel_screens import ms_cells, print_kernels
from stackdoctor.rules import catalog


def _screen(results: list[KernelResult], lang: str, monkeypatch, width: int = 200) -> str:
    buf = io.StringIO()
    monkeypatch.setattr(console_mod, "make_console", lambda **kw: Console(file=buf, width=width, force_terminal=True, color_system=None))
    print_kernels(KernelFacts(ran=True, results=results), [], lang)
    return buf.getvalue()


def _mm(time_s: float, lo: float, hi: float, n: int = 64) -> KernelResult:
    return KernelResult("matmul", "cpu", "fp32", f"{n}x{n}x{n}", ok=True, max_error=1e-7, time_s=time_s, tflops=1.0, runs=5,
                        tflops_min=lo, tflops_max=hi)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_noisy_run_is_called_noisy_and_said_under_the_table(lang, monkeypatch):
    out = _screen([_mm(0.001, 0.96, 1.04, 64), _mm(0.002, 0.1, 24.16, 128)], lang, monkeypatch)
    rows = [[c.strip() for c in ln.split("│")] for ln in out.splitlines() if ln.startswith("matmul")]
    assert [r[-1] for r in rows] == ["4%", "1203%"], rows  # the figures stay numbers (scripts read them)
    note = catalog.ui("k_noisy_note", lang, n=1, limit="25", worst="1203")
    assert " ".join(note.split()) in " ".join(out.split()), out  # ±1203%: said to be noise, under the table
    assert note.startswith(("noisy:", "波动大："))
    quiet = _screen([_mm(0.001, 0.96, 1.04)], lang, monkeypatch)
    assert note.split()[0] not in quiet  # no note when the runs agree


def test_the_ms_column_has_one_precision():
    assert ms_cells([0.0182, 0.82, 8.0]) == ["0.018", "0.820", "8.000"]  # was 0.0182, 0.82, 8.00
    assert ms_cells([0.82, 8.0, 120.0]) == ["0.82", "8.00", "120.00"]
    assert ms_cells([12.5, 300.0, None]) == ["12", "300", ""]  # (round half to even, as f-strings do)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_ms_cells_on_screen_share_their_decimals(lang, monkeypatch):
    out = _screen([_mm(0.0000182, 0.99, 1.01), _mm(0.00082, 0.99, 1.01), _mm(0.008, 0.99, 1.01)], lang, monkeypatch)
    cells = [[c.strip() for c in ln.split("│")][6] for ln in out.splitlines() if ln.startswith("matmul")]
    assert cells == ["0.018", "0.820", "8.000"], out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_compile_rows_size_names_its_unit(lang, monkeypatch):
    r = KernelResult("compile", "cpu", "fp32", "4096", ok=True, max_error=0.0, time_s=0.0001, runs=5)
    for width in (200, 80):
        out = _screen([r], lang, monkeypatch, width)
        assert " ".join(catalog.ui("k_size_elements", lang, n=4096).split()) in " ".join(out.replace("│", " ").split()), out
        assert all(len(ln) <= width for ln in out.splitlines()), out
