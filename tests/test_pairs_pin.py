"""The pair rules read a Requires-Dist line without packaging's Requirement parser where the line is a plain
``name<spec>`` (that parser costs ~30-100 ms of every check's import): on every Requires-Dist line of every
distribution installed beside these tests (real METADATA), the result is the one packaging's Requirement gives."""

from __future__ import annotations

import importlib.metadata as md
import re

from packaging.requirements import InvalidRequirement, Requirement

from stackdoctor.rules.pairs import requirement_on


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def expected(line: str, name: str) -> tuple[str, str] | None:
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    if canonical(req.name) != name or (req.marker and "extra" in str(req.marker)):
        return None
    return str(req), str(req.specifier)


def test_every_installed_requires_dist_line_reads_as_packaging_reads_it():
    lines = sorted({r for d in md.distributions() for r in (d.requires or [])})
    lines += ["torch (==2.13.0)", "torch >= 2.0, < 3", "Torch_NPU==2.7.1.post1", "numpy<2; python_version < '3.13'", "numpy; extra == 'np'"]
    assert len(lines) > 40, lines  # pytest, ruff, mypy, typer, rich ... and the forms above
    plain = 0
    for line in lines:
        name = canonical(re.match(r"\s*([A-Za-z0-9._-]+)", line).group(1))
        got = requirement_on([line], name)
        assert (None if got is None else (str(got), str(got.specifier))) == expected(line, name), line
        plain += got is not None and ";" not in line
    assert plain > 10
    assert requirement_on(["numpy>=1.2", "torch==2.13.0"], "torch").specifier.contains("2.13.0")
    assert requirement_on(["filelock", "sympy>=1.13.3"], "numpy") is None
