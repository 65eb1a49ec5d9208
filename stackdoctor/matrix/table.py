"""The declaration of a matrix table (:class:`Table`, its :class:`Field` and :class:`Part` rows) and the field
parsers the tables share."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from stackdoctor.core.versions import dotted
from stackdoctor.matrix.pure import PY_RE
from stackdoctor.matrix.reader import Ctx, LDict

R = TypeVar("R")


# ---------------------------------------------------------------------------- the declaration


@dataclass(frozen=True)
class Field:
    """One field of a row: its name (an allowed key), its type and meaning in words (``SCHEMA.md``)."""

    name: str
    type: str = ""
    doc: str = ""


@dataclass(frozen=True)
class Part:
    """A row nested in a table's rows (``releases[].variants[]``): its own fields, checked and documented."""

    heading: str
    fields: tuple[Field, ...]
    doc: str = ""

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)


@dataclass(frozen=True)
class Table(Generic[R]):
    """One top-level table of a matrix file."""

    key: str  # the YAML key: "releases", "cuda", ...
    summary: str  # one line: the top-level block of SCHEMA.md
    shape: Literal["list", "mapping", "one"]  # a list of rows, a mapping key -> row, or one mapping
    fields: tuple[Field, ...]  # the row's fields (any other key is an error)
    parse: Callable[[Ctx, LDict, str, str], Iterable[R]]  # one YAML row (where, its key) -> its rows, validated
    key_of: Callable[[R], Hashable]  # layering: a later row with the same key meets the earlier one ...
    merge: Callable[[dict[Any, R], R], R] | None = None  # ... this way (given the rows so far); None: it replaces it
    attr: str | None = None  # the Matrix field that holds the table too (None: only Matrix.table(key))
    holds: Literal["dict", "tuple", "one"] = "dict"  # how: key -> row, rows in order, or the one row (None if absent)
    order: Callable[[list[R]], list[R]] | None = None  # the rows' order in the Matrix (default: first layered first)
    check_key: Callable[[str], str | None] | None = None  # mapping shape: what is wrong with a key, None if nothing
    key_doc: str = ""  # mapping shape: what the key is (SCHEMA.md)
    layering: str = "by key"  # the merge rule in words (SCHEMA.md): what a later row replaces or merges into
    doc: str = ""  # markdown after the field table: examples, how code reads it
    parts: tuple[Part, ...] = ()
    row_data: Callable[[R], Any] | None = None  # one row as JSON-ready data (default: facts.to_data)

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.fields)

    def value(self, acc: dict[Any, R]) -> Any:
        """The Matrix's value of the table from the layered rows (key -> row, in first-layered order)."""
        if self.holds == "one":
            return next(iter(acc.values()), None)
        if self.order is None:
            return dict(acc) if self.holds == "dict" else tuple(acc.values())
        rows = self.order(list(acc.values()))
        return {self.key_of(r): r for r in rows} if self.holds == "dict" else tuple(rows)

    def rows(self, value: Any) -> list[R]:
        """The rows of a Matrix's value (the inverse of :meth:`value`: a built matrix as a layer again)."""
        if value is None:
            return []
        if self.holds == "one":
            return [value]
        return list(value.values()) if self.holds == "dict" else list(value)

    def data(self, value: Any) -> Any:
        """The table as ``matrix show --json`` shows it."""
        from stackdoctor.model.facts import to_data

        one = self.row_data or to_data
        if self.holds == "one":
            return None if value is None else one(value)
        if self.holds == "dict":
            return {str(k): one(v) for k, v in (value or {}).items()}
        return [one(r) for r in value or ()]


def one_row(row: R) -> tuple[R]:
    return (row,)


# ---------------------------------------------------------------------------- shared field parsers


def read_pythons(ctx: Ctx, d: LDict, key: str, where: str) -> tuple[str, ...]:
    vals = ctx.strings(d, key, where)
    for p in vals:
        if not PY_RE.match(p):
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable Python version {p!r} (expected like \"3.12\" or \"3.13t\")")
    return vals


def read_driver(ctx: Ctx, d: LDict, key: str, where: str) -> str | None:
    v = ctx.text(d, key, where)
    if v is not None and dotted(v) is None:
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable driver version {v!r}")
    return v


def read_url(ctx: Ctx, d: LDict, key: str, where: str, *, required: bool = False) -> str | None:
    v = ctx.text(d, key, where, required=required)
    if v is not None and not re.match(r"^(https?|file)://\S+$", v):
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"not an http(s):// or file:// URL: {v!r}")
    return v.rstrip("/") if v else v


def key_check(pattern: str, what: str) -> Callable[[str], str | None]:
    """A key check: ``what`` (formatted with the key's repr) unless the key matches ``pattern``."""
    rx = re.compile(pattern)
    return lambda key: None if rx.match(key) else what.format(repr(key))


SOURCE = Field("source", "string, required", "a URL, or `owner/repo path@commit`")
NOTE = Field("note", "string", "free text")
UNKNOWN = Field("unknown", "list of strings", "what is not known about the row (never guessed)")
DERIVED = Field("derived_from", "string", "how inferred values were obtained")
