"""The matrix as declared tables (issue 25): one :class:`~stackdoctor.matrix.Table` per table drives parsing,
layering, validation, ``matrix show --json`` and ``compat_matrix/SCHEMA.md``.

A table declared here, in the test, on a copy of the registry is parsed, validated, layered and shown with no other
edit; the shipped SCHEMA.md is the text the declarations generate; ``matrix show --json`` shows every declared table."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackdoctor.core.errors import MatrixError
from stackdoctor.matrix import TABLES, Field, Matrix, Parsed, Table, build, load_matrix, parse_matrix_text
from stackdoctor.matrix.schema_doc import render, shipped_path

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- a table declared in the test


@dataclass(frozen=True)
class Widget:
    name: str
    size: int
    source: str
    colours: tuple[str, ...] = ()


def _widget(ctx, d, where, name):
    size = d.get("size")
    if isinstance(size, bool) or not isinstance(size, int):
        raise ctx.fail(ctx.line_of(d, "size"), f"{where}.size", "expected a whole number")
    return (Widget(name, size, ctx.text(d, "source", where, required=True) or "", ctx.strings(d, "colours", where)),)


WIDGETS: Table[Widget] = Table(
    key="widgets",
    summary="widgets by name (a test's table)",
    shape="mapping",
    fields=(Field("size", "whole number, required", "how big"), Field("colours", "list", "its colours"), Field("source", "string, required", "")),
    parse=_widget,
    key_of=lambda w: w.name,
    check_key=lambda k: None if k.islower() else f"not a widget name {k!r}",
    key_doc="the widget's name",
)
REGISTRY = (*TABLES, WIDGETS)


def _file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_table_declared_in_a_test_is_parsed_layered_validated_and_shown(tmp_path):
    a = _file(tmp_path, "a.yaml", "widgets:\n  bolt: {size: 3, colours: [grey], source: a}\n  nut: {size: 1, source: a}\n")
    b = _file(tmp_path, "b.yaml", "widgets:\n  bolt: {size: 5, source: b}\n  gear: {size: 9, source: b}\n")
    m = load_matrix([a, b], tables=REGISTRY)
    # layered by key: b's bolt replaces a's, nut stays, gear is added (in first-layered order)
    assert m.table("widgets") == {"bolt": Widget("bolt", 5, "b"), "nut": Widget("nut", 1, "a"), "gear": Widget("gear", 9, "b")}
    # shown under its key beside every shipped table (which are still the embedded ones)
    data = m.to_data()
    assert data["widgets"]["bolt"] == {"name": "bolt", "size": 5, "source": "b", "colours": []}
    assert data["releases"] and data["cuda"] and set(data) == {"schema", "files", *(t.key for t in REGISTRY)}
    assert "widgets" not in m.to_data("2.13.0")  # one release shows the releases alone
    # a matrix of the files alone, and the built matrix as a layer again (learn.witness_matrix's use)
    alone = load_matrix([a], embedded=False, tables=REGISTRY)
    assert alone.table("widgets") == {"bolt": Widget("bolt", 3, "a", ("grey",)), "nut": Widget("nut", 1, "a")} and not alone.releases
    again = build([("matrix", Parsed({t.key: t.rows(m.table(t.key)) for t in REGISTRY}, layered=True))], REGISTRY)
    assert again.to_data() | {"files": []} == data | {"files": []}


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("widgets:\n  bolt: {size: 3, source: a, weight: 2}\n", 2, "widgets.bolt.weight: unknown field (expected one of colours, size, source)"),
        ("widgets:\n  Bolt: {size: 3, source: a}\n", 2, "widgets.Bolt: not a widget name 'Bolt'"),
        ("widgets:\n  bolt: {size: big, source: a}\n", 2, "widgets.bolt.size: expected a whole number"),
        ("widgets:\n  bolt: {size: 3}\n", 2, "widgets.bolt.source: missing (every row needs it)"),
        ("widgets: [1, 2]\n", 1, "widgets: expected a mapping, got a list"),
        ("widget:\n  bolt: {size: 3, source: a}\n", 2, "top level.widget: unknown field (expected one of conda, cuda, "),
    ],
)
def test_the_test_table_is_validated_like_any_other(text, line, fragment):
    with pytest.raises(MatrixError) as ei:
        parse_matrix_text(text, "w.yaml", REGISTRY)
    msg = str(ei.value)
    assert msg.startswith(f"compat matrix w.yaml line {line}: ") and fragment in msg and msg.endswith("."), msg
    if "top level" in fragment:
        assert "widgets" in msg  # the test's table is an allowed top-level key of its registry


def test_the_shipped_registry_does_not_know_the_test_table():
    with pytest.raises(MatrixError, match=r"line 2: top level\.widgets: unknown field"):
        parse_matrix_text("widgets:\n  bolt: {size: 3, source: a}\n", "w.yaml")


def test_the_test_table_gets_its_section_in_the_generated_schema():
    doc = render(REGISTRY)
    assert "## `widgets`" in doc and "| (key) | string | the widget's name |" in doc and "| `size` | whole number, required | how big |" in doc
    assert "widgets: {...}" in doc and "- `widgets`: by key" in doc
    assert "## `widgets`" not in render()


# ---------------------------------------------------------------------------- the shipped declarations


def test_shipped_schema_md_is_what_the_declarations_generate():
    # regenerate with: python -m stackdoctor.matrix.schema_doc
    assert shipped_path() == REPO / "compat_matrix" / "SCHEMA.md"
    assert shipped_path().read_text(encoding="utf-8") == render()


def test_schema_doc_check_mode_sees_a_drift(tmp_path):
    stale = _file(tmp_path, "SCHEMA.md", render().replace("| `arch_list` |", "| `arch_lists` |"))
    run = [sys.executable, "-m", "stackdoctor.matrix.schema_doc", "--check"]
    bad = subprocess.run([*run, str(stale)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 1 and "differs from the table declarations" in bad.stderr
    good = subprocess.run([*run, str(_file(tmp_path, "ok.md", render()))], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert good.returncode == 0, good.stderr
    nowhere = subprocess.run([*run, str(tmp_path / "no" / "SCHEMA.md")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert nowhere.returncode == 2 and nowhere.stderr.count("\n") == 1 and "Traceback" not in nowhere.stderr


def test_every_field_a_shipped_file_uses_is_declared_and_documented():
    """SCHEMA.md's field tables are the loader's allowed keys: every field documented, none undocumented."""
    import yaml

    used: dict[str, set[str]] = {}
    for f in sorted((REPO / "compat_matrix").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for t in TABLES:
            raw = doc.get(t.key)
            rows = [] if raw is None else [raw] if t.shape == "one" else list(raw.values()) if t.shape == "mapping" else raw
            used.setdefault(t.key, set()).update(k for r in rows for k in r)
    for t in TABLES:
        assert used[t.key] <= t.names, (t.key, used[t.key] - t.names)
        assert all(f.type for f in t.fields), t.key
        assert t.summary and t.layering and (t.shape != "mapping" or (t.key_doc and t.check_key is not None or t.key == "thresholds"))


def test_declarations_fill_the_matrix_fields():
    keys = [t.key for t in TABLES]
    assert len(keys) == len(set(keys))
    row = next(line for line in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `matrix/` |"))
    assert f" {len(keys)} tables, each declared once" in row  # the architecture's matrix row states the count
    fields = {f.name for f in dataclasses.fields(Matrix)}
    assert {t.attr for t in TABLES if t.attr} <= fields
    m = load_matrix()
    for t in TABLES:
        assert m.table(t.key) is (getattr(m, t.attr) if t.attr else m.table(t.key))
        assert t.rows(m.table(t.key)), f"the shipped matrix has no {t.key} rows"


def test_a_built_matrix_is_a_layer_again_without_merging_twice():
    """learn.witness_matrix layers witness rows over a built matrix (learn._parsed_of): every table comes back as it
    was (a learned patch row merged a second time used to repeat its sources)."""
    from stackdoctor.wheels.learn import _parsed_of

    m = load_matrix()
    again = build([("matrix", _parsed_of(m))])
    assert again.to_data() | {"files": []} == m.to_data() | {"files": []}
    learned_patch = next(r for r in m.releases if r.learned and r.source.count("learned") == 1 and "; " in r.source)
    assert again.release(str(learned_patch.version)).source == learned_patch.source


def test_matrix_show_json_shows_every_declared_table():
    e = dict(os.environ)
    e.pop("STACKDOCTOR_MATRIX", None)
    out = subprocess.run([sys.executable, "-m", "stackdoctor", "matrix", "show", "--json"], capture_output=True, text=True, timeout=60, env=e, cwd=REPO)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"schema", "files", *(t.key for t in TABLES)}
    for t in TABLES:
        assert data[t.key], f"matrix show --json shows no {t.key} rows"
