"""The report: facts, probe outcomes and findings, in a versioned JSON envelope.

``{"schema": "stackdoctor.report/1", "stackdoctor_version", "created_at", "facts",
"probes", "findings", "raw_outputs", "requirements"}``. A JSON Schema ships as
``stackdoctor/schemas/report.schema.json``. :func:`load_report` reads one back for
``--replay`` and refuses, in one sentence, what it cannot trust.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackdoctor import __version__
from stackdoctor.core.errors import ReplayError
from stackdoctor.model.facts import Facts, from_data, to_data
from stackdoctor.model.view import MachineView

SCHEMA = "stackdoctor.report/1"
SCHEMA_FAMILY = "stackdoctor.report/"
SCHEMA_MAJOR = 1
MAX_REPORT_BYTES = 64 * 1024 * 1024

SEVERITIES = ("ok", "warn", "fail")
# what a finding shows as (issue 42: unverified is a verdict): its severity, or ``not-verified`` for a finding that
# says what was not verified. Severity stays the exit axis (``ok``: it fails nothing, not under --strict either);
# status is what every output draws, so no output counts or marks such a finding as a passed check
NOT_VERIFIED_STATUS = "not-verified"
STATUS_RANK = {"ok": 0, NOT_VERIFIED_STATUS: 1, "warn": 2, "fail": 3}


@dataclass
class Finding:
    """One judgement about the machine. ``code`` is public and stable."""

    code: str
    severity: str  # "ok" | "warn" | "fail"
    title: str
    detail: str = ""
    fix: str | None = None
    layer: str | None = None  # "python" | "torch" | "runtime" | "driver" | "gpu" | "platform" | "network" | ...
    facts: list[str] = field(default_factory=list)  # fact keys that justify it


@dataclass
class ProbeStatus:
    name: str
    status: str  # "ok" | "error" | "timeout" | "skipped"
    duration_s: float = 0.0
    error: str | None = None


@dataclass
class Report:
    facts: Facts = field(default_factory=Facts)
    probes: list[ProbeStatus] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    raw_outputs: list[dict[str, Any]] = field(default_factory=list)
    requirements: dict[str, Any] | None = None  # {"source": path, "values": {...}}
    created_at: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    stackdoctor_version: str = __version__
    schema: str = SCHEMA
    replayed_from: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.facts, MachineView):  # a view handed as the facts: the report carries what it wrote
            self.facts = self.facts.facts

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "stackdoctor_version": self.stackdoctor_version,
            "created_at": self.created_at,
            "replayed_from": self.replayed_from,
            "facts": to_data(self.facts),
            "probes": to_data(self.probes),
            "findings": to_data(self.findings),
            "layers": layer_verdicts(self.findings),
            "requirements": self.requirements,
            "raw_outputs": self.raw_outputs,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as it may leave the machine: credentials ``****`` (their presence kept), a secret-named
        variable's value ``****``, undecodable path bytes as ``\\xff`` (valid UTF-8 whatever the paths)."""
        from stackdoctor.core.redact import safe_data

        return json.dumps(safe_data(self.to_data()), indent=indent, sort_keys=False, ensure_ascii=False)

    @property
    def counts(self) -> dict[str, int]:
        """Findings by :func:`status`: ``ok`` never counts a not-verified statement (it has ``not-verified``)."""
        out = {s: 0 for s in (*SEVERITIES, NOT_VERIFIED_STATUS)}
        for f in self.findings:
            s = status(f)
            out[s] = out.get(s, 0) + 1
        return out


# the layers every check judges, in the screen's order (issue 42: each says verified / failed / not verified)
CORE_LAYERS = ("platform", "driver", "gpu", "python", "torch", "runtime")
NOT_VERIFIED = "runtime-not-verified"  # the fast path's statement: torch's runtime was not started
NOT_VERIFIED_CODES = frozenset({NOT_VERIFIED})  # every code that states what was not verified


def not_verified(f: Finding) -> bool:
    """Whether ``f`` states what was not verified (the one question every renderer asks, never its code)."""
    return f.code in NOT_VERIFIED_CODES and f.severity == "ok"


def status(f: Finding) -> str:
    """What ``f`` shows as: ``fail`` / ``warn`` / ``ok``, or ``not-verified`` (never drawn or counted as ok)."""
    return code_status(f.code, f.severity)


def code_status(code: str, severity: str) -> str:
    """What a code of ``severity`` shows as (:func:`status`; the catalogue's listings ask it too)."""
    return NOT_VERIFIED_STATUS if code in NOT_VERIFIED_CODES and severity == "ok" else severity


def status_key(shown: str) -> str:
    """The text catalogue's key of a status's word: ``sev_ok``, ``sev_not_verified``."""
    return "sev_" + shown.replace("-", "_")


# a layer the screen's stack has no row for, drawn on the row of the stack it belongs to (the fabric manager is the
# NVIDIA driver stack's service on NVSwitch machines); the report's ``layers`` keeps it apart
DRAWN_ON = {"fabric-manager": "driver"}


def layer_status(findings: list[Finding], layer: str) -> str | None:
    """The worst :func:`status` of ``layer``'s findings (a stack row's mark, :data:`DRAWN_ON` included), ``None``
    when none judged it."""
    worst: str | None = None
    for f in findings:
        if (f.layer == layer or DRAWN_ON.get(f.layer or "") == layer) and (worst is None or STATUS_RANK.get(status(f), 0) > STATUS_RANK.get(worst, 0)):
            worst = status(f)
    return worst


def layer_verdicts(findings: list[Finding]) -> list[dict[str, Any]]:
    """Each layer's verdict from the findings, and with what: ``failed`` (a fail finding), ``verified`` (an ok finding
    and no fail: its codes and the facts they read, warnings listed beside), ``not-verified`` (nothing judged it, or
    the fast path's statement that torch's runtime was not started). Derived, never read back: a replay redoes it."""
    layers = list(CORE_LAYERS) + sorted({f.layer for f in findings if f.layer and f.layer not in CORE_LAYERS})
    out: list[dict[str, Any]] = []
    for layer in layers:
        mine = [f for f in findings if f.layer == layer]
        fails = [f.code for f in mine if f.severity == "fail"]
        warns = [f.code for f in mine if f.severity == "warn"]
        oks = [f for f in mine if status(f) == "ok"]
        if fails:
            verdict, by = "failed", fails
        elif any(not_verified(f) for f in mine) or not (oks or warns):
            verdict, by = NOT_VERIFIED_STATUS, [f.code for f in mine]
        else:
            verdict, by = "verified", [f.code for f in oks] + warns
        witnesses = sorted({k for f in mine if f.code in by for k in f.facts})
        out.append({"layer": layer, "status": verdict, "by": by, "warnings": warns, "witnesses": witnesses})
    return out


def report_from_data(data: Any, *, origin: str = "report") -> Report:
    """Build a :class:`Report` from decoded JSON, checking the schema family and version."""
    if not isinstance(data, dict):
        raise ReplayError(f"{origin} is not a stackdoctor report (expected a JSON object).")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_FAMILY):
        raise ReplayError(f"{origin} is not a stackdoctor report (schema is {schema!r}, expected {SCHEMA!r}).")
    try:
        major = int(schema[len(SCHEMA_FAMILY) :].split(".")[0])
    except ValueError:
        raise ReplayError(f"{origin} has an unreadable schema version {schema!r}.") from None
    if major > SCHEMA_MAJOR:
        raise ReplayError(
            f"{origin} was written by a newer stackdoctor (schema {schema}); this one reads {SCHEMA}: upgrade stackdoctor to replay it."
        )
    try:
        facts = from_data(Facts, data.get("facts") or {})
        probes = [from_data(ProbeStatus, p) for p in data.get("probes") or []]
        findings = [from_data(Finding, f) for f in data.get("findings") or []]
    except TypeError as exc:
        raise ReplayError(f"{origin} has an invalid field: {exc}.") from None
    req = data.get("requirements")
    return Report(
        facts=facts,
        probes=probes,
        findings=findings,
        raw_outputs=[r for r in data.get("raw_outputs") or [] if isinstance(r, dict)],
        requirements=req if isinstance(req, dict) else None,
        created_at=str(data.get("created_at") or ""),
        stackdoctor_version=str(data.get("stackdoctor_version") or ""),
        schema=schema,
    )


def replay_file(path: str | Path) -> Path:
    """The report a replay reads: ``path``, or ``path/report.json`` when ``path`` is the folder
    ``stackdoctor report`` wrote.

    :raises ReplayError: a folder without a report.json."""
    p = Path(path)
    if p.is_dir():
        if not (p / "report.json").is_file():
            raise ReplayError(f"cannot replay {p}: it is a folder without a report.json (the file `stackdoctor report` writes).")
        return p / "report.json"
    return p


def load_report(path: str | Path) -> Report:
    """Read a report file for replay; every problem is one :class:`ReplayError` sentence."""
    p = replay_file(path)
    from stackdoctor.system import NotRegularFile, TooLarge, read_bounded

    try:
        size = p.stat().st_size
        if size > MAX_REPORT_BYTES:
            raise ReplayError(f"{p} is {size // (1024 * 1024)} MiB; a stackdoctor report is never that large.")
        raw = read_bounded(p, MAX_REPORT_BYTES, too_large=True)  # a FIFO or /dev/zero: refused, never read
    except TooLarge:
        raise ReplayError(f"{p} is larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB; a stackdoctor report is never that large.") from None
    except NotRegularFile as exc:
        raise ReplayError(f"cannot replay {p}: {exc.strerror}.") from None
    except FileNotFoundError:
        raise ReplayError(f"cannot replay {p}: no such file.") from None
    except IsADirectoryError:
        raise ReplayError(f"cannot replay {p}: it is a directory.") from None
    except PermissionError:
        raise ReplayError(f"cannot replay {p}: permission denied.") from None
    except OSError as exc:
        raise ReplayError(f"cannot replay {p}: {exc.strerror or exc}.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayError(f"{p} is not UTF-8 text, so not a stackdoctor report.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        # json's messages may end in "at" ("Unterminated string starting at"): the place follows once
        what = exc.msg[: -len(" at")] if exc.msg.endswith(" at") else exc.msg
        if exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string"):
            raise ReplayError(f"{p} is truncated or not JSON (it ends early; {what.lower()} at {where}).") from None
        raise ReplayError(f"{p} is not valid JSON ({what} at {where}).") from None
    except RecursionError:
        raise ReplayError(f"{p} is nested too deeply to be a stackdoctor report.") from None
    return report_from_data(data, origin=str(p))
