"""Generate the JSON Schemas of stackdoctor's public JSON documents from the dataclasses behind them.

- ``report.schema.json``: ``stackdoctor.report/1`` (``check --json``, ``report``), from the facts dataclasses;
- ``plan.schema.json``: ``stackdoctor.plan/1`` (``install --json``), from :class:`stackdoctor.model.plan.Plan`;
- ``kernels.schema.json``: ``stackdoctor.kernels/1`` (``kernels --json``), from :class:`stackdoctor.model.facts.KernelFacts`
  and :class:`stackdoctor.model.report.Finding`;
- ``diff.schema.json``: ``stackdoctor.diff/2`` (``diff --json``), from :class:`stackdoctor.model.diff.Difference`;
- ``error.schema.json``: ``stackdoctor.error/1``, a ``--json`` command that could not run (written out here).

The shipped files under ``stackdoctor/schemas/`` are these functions' output, committed;
``tests/test_schemas.py`` keeps each identical to its generator, so a schema can never drift from the
code. Regenerate all with ``python -m stackdoctor._schema --write``; ``python -m stackdoctor._schema [NAME]``
prints one (default: report).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

from stackdoctor.model.facts import Facts, KernelFacts
from stackdoctor.model.report import SCHEMA, Finding, ProbeStatus

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _hints(cls: type) -> dict[str, Any]:
    """Resolved field types of a dataclass, looked up in its own module (``from __future__ import annotations``)."""
    return typing.get_type_hints(cls, globalns=vars(sys.modules[cls.__module__]))


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        inner = [_type_schema(a, defs) for a in args if a is not type(None)]
        nullable = type(None) in args
        schema: dict[str, Any] = inner[0] if len(inner) == 1 else {"anyOf": inner}
        if nullable:
            schema = {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        return {"type": "array", "items": _type_schema(inner, defs)}
    if origin is dict:
        args = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _type_schema(args[1] if len(args) == 2 else Any, defs)}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            hints = _hints(tp)
            fields = dataclasses.fields(tp)
            defs[name] = {
                "type": "object",
                "required": [f.name for f in fields],
                "properties": {f.name: _type_schema(hints[f.name], defs) for f in fields},
            }
        return {"$ref": f"#/$defs/{name}"}
    return {bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"}}.get(tp, {})


def _finding_def(defs: dict[str, Any]) -> dict[str, Any]:
    ref = _type_schema(Finding, defs)
    defs["Finding"]["properties"]["severity"] = {"enum": ["ok", "warn", "fail"]}
    return ref


# a report's ``layers`` (issue 42): each layer's verdict and what it rests on (stackdoctor.model.report.layer_verdicts)
_LAYER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["layer", "status", "by", "warnings", "witnesses"],
    "properties": {
        "layer": {"type": "string"},
        "status": {"enum": ["verified", "failed", "not-verified"]},
        "by": {"type": "array", "items": {"type": "string"}},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "witnesses": {"type": "array", "items": {"type": "string"}},
    },
}


def report_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    facts = _type_schema(Facts, defs)
    probe = _type_schema(ProbeStatus, defs)
    finding = _finding_def(defs)
    defs["ProbeStatus"]["properties"]["status"] = {"enum": ["ok", "error", "timeout", "skipped"]}
    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/report-1.json",
        "title": "stackdoctor report",
        "type": "object",
        "required": ["schema", "stackdoctor_version", "created_at", "facts", "probes", "findings", "raw_outputs", "requirements"],
        "properties": {
            "schema": {"const": SCHEMA},
            "stackdoctor_version": {"type": "string"},
            "created_at": {"type": "string"},
            "replayed_from": {"type": ["string", "null"]},
            "facts": facts,
            "probes": {"type": "array", "items": probe},
            "findings": {"type": "array", "items": finding},
            "layers": {"type": "array", "items": _LAYER},
            "requirements": {"type": ["object", "null"]},
            "raw_outputs": {"type": "array", "items": {"type": "object"}},
        },
        "$defs": defs,
    }


def _object_of(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """The object schema of dataclass ``cls`` itself (its fields as properties), its nested types in ``defs``."""
    _type_schema(cls, defs)
    return defs.pop(cls.__name__)


def plan_schema() -> dict[str, Any]:
    """``stackdoctor.plan/1``: ``{"schema": ..., **Plan fields}`` (``Plan.to_data``)."""
    from stackdoctor.model.plan import PLAN_SCHEMA, Plan

    defs: dict[str, Any] = {}
    body = _object_of(Plan, defs)
    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/plan-1.json",
        "title": "stackdoctor install plan",
        "type": "object",
        "required": ["schema", *body["required"]],
        "properties": {"schema": {"const": PLAN_SCHEMA}, **body["properties"]},
        "$defs": defs,
    }


def kernels_schema() -> dict[str, Any]:
    """``stackdoctor.kernels/1``: schema, version and target, the KernelFacts fields, and the findings."""
    from stackdoctor.verify.runner import KERNELS_SCHEMA

    defs: dict[str, Any] = {}
    body = _object_of(KernelFacts, defs)
    finding = _finding_def(defs)
    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/kernels-1.json",
        "title": "stackdoctor kernels",
        "type": "object",
        "required": ["schema", "stackdoctor_version", "target", *body["required"], "findings"],
        "properties": {
            "schema": {"const": KERNELS_SCHEMA},
            "stackdoctor_version": {"type": "string"},
            "target": {"type": "string"},
            **body["properties"],
            "findings": {"type": "array", "items": finding},
        },
        "$defs": defs,
    }


def diff_schema() -> dict[str, Any]:
    """``stackdoctor.diff/2``: the two reports compared, and one entry per :class:`Difference`."""
    from stackdoctor.model.diff import DIFF_SCHEMA, Difference

    side = {
        "type": "object",
        "required": ["path", "created_at", "stackdoctor_version"],
        "properties": {"path": {"type": "string"}, "created_at": {"type": "string"}, "stackdoctor_version": {"type": "string"}},
    }
    fields = [f.name for f in dataclasses.fields(Difference)]
    difference = {"type": "object", "required": fields, "properties": {name: _type_schema(_hints(Difference)[name], {}) for name in fields}}
    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/diff-2.json",
        "title": "stackdoctor diff",
        "type": "object",
        "required": ["schema", "a", "b", "count", "differences"],
        "properties": {
            "schema": {"const": DIFF_SCHEMA},
            "a": {"$ref": "#/$defs/Side"},
            "b": {"$ref": "#/$defs/Side"},
            "count": {"type": "integer", "minimum": 0},
            "differences": {"type": "array", "items": {"$ref": "#/$defs/Difference"}},
        },
        "$defs": {"Side": side, "Difference": difference},
    }


def build_plan_schema() -> dict[str, Any]:
    """``stackdoctor.build-plan/1`` (``install --from-source --json``): ``{"schema": ..., **BuildPlan fields}``."""
    from stackdoctor.resolve.source_build import BUILD_PLAN_SCHEMA, BuildPlan

    defs: dict[str, Any] = {}
    body = _object_of(BuildPlan, defs)
    defs["Prerequisite"]["properties"]["status"] = {"enum": ["ok", "missing", "unknown"]}
    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/build-plan-1.json",
        "title": "stackdoctor source build plan",
        "type": "object",
        "required": ["schema", *body["required"]],
        "properties": {"schema": {"const": BUILD_PLAN_SCHEMA}, **body["properties"]},
        "$defs": defs,
    }


def error_schema() -> dict[str, Any]:
    """``stackdoctor.error/1``: what a ``--json`` command (check, diff, kernels, matrix show) prints on stdout when it
    could not run (a bad flag or input, an unreachable index, an interrupt, an internal error); the same sentence is
    on stderr. ``install --json`` answers with its own plan document, ``error`` set."""
    from stackdoctor.commands import ERROR_SCHEMA

    return {
        "$schema": DRAFT,
        "$id": "https://stackdoctor.invalid/schemas/error-1.json",
        "title": "stackdoctor error",
        "type": "object",
        "required": ["schema", "stackdoctor_version", "command", "error"],
        "additionalProperties": False,
        "properties": {
            "schema": {"const": ERROR_SCHEMA},
            "stackdoctor_version": {"type": "string"},
            "command": {"enum": ["check", "diff", "kernels", "matrix"]},
            "error": {
                "type": "object",
                "required": ["kind", "message", "exit_code"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["usage", "matrix", "index", "unmet", "interrupted", "terminated", "internal"]},
                    "message": {"type": "string", "minLength": 1},
                    "exit_code": {"type": "integer", "minimum": 1},
                },
            },
        },
    }


# file name under stackdoctor/schemas/ -> (the "schema" value it describes, its generator)
SCHEMAS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "report.schema.json": (SCHEMA, report_schema),
    "plan.schema.json": ("stackdoctor.plan/1", plan_schema),
    "kernels.schema.json": ("stackdoctor.kernels/1", kernels_schema),
    "diff.schema.json": ("stackdoctor.diff/2", diff_schema),
    "build-plan.schema.json": ("stackdoctor.build-plan/1", build_plan_schema),
    "error.schema.json": ("stackdoctor.error/1", error_schema),
}


def render(schema: dict[str, Any]) -> str:
    """The exact text of a shipped schema file."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--write"]:
        out = Path(__file__).resolve().parent / "schemas"
        for name, (_, make) in SCHEMAS.items():
            (out / name).write_text(render(make()), encoding="utf-8")
        return
    name = (args[0] if args else "report").removesuffix(".schema.json") + ".schema.json"
    sys.stdout.write(render(SCHEMAS[name][1]()))


if __name__ == "__main__":
    main()
