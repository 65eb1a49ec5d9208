"""Generate the JSON Schema of the report from the facts dataclasses.

The shipped ``schemas/report.schema.json`` is this function's output, committed; a test
keeps the two identical, so the schema can never drift from the code. Regenerate with
``python -m stackdoctor._schema > stackdoctor/schemas/report.schema.json``.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Union

from stackdoctor.facts import Facts, _hints
from stackdoctor.report import SCHEMA, Finding, ProbeStatus


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
    if dataclasses.is_dataclass(tp):
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


def report_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    facts = _type_schema(Facts, defs)
    probe = _type_schema(ProbeStatus, defs)
    finding = _type_schema(Finding, defs)
    defs["Finding"]["properties"]["severity"] = {"enum": ["ok", "warn", "fail"]}
    defs["ProbeStatus"]["properties"]["status"] = {"enum": ["ok", "error", "timeout", "skipped"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
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
            "requirements": {"type": ["object", "null"]},
            "raw_outputs": {"type": "array", "items": {"type": "object"}},
        },
        "$defs": defs,
    }


def main() -> None:
    print(json.dumps(report_schema(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
