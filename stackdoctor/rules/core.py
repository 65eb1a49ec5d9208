"""The rule registry: every finding comes from one declared rule.

A rule is a function ``fn(ctx)`` declared once with :func:`rule`, naming its code, the worst severity
it can take, its layer, and the codes it defers to (it runs after them and may ask ``ctx.has(code)``
about them, and only about them). It adds findings of its own code only, through :meth:`Ctx.add`,
whose ``detail`` / ``fix`` texts come from ``stackdoctor/locale/<lang>.yaml``. The catalogue
(``stackdoctor explain``, ``check --list-checks``) is derived from these declarations.

A rule that raises is never silently dropped: :func:`judge` turns it into a ``rule-error`` finding
naming the rule and the exception, so a broken rule cannot turn a broken node into "all ok"; its
severity is the broken rule's worst (fail for a rule that can fail), so the exit code stays failing.
Under the test suite (``STACKDOCTOR_STRICT_RULES=1``, set by ``tests/conftest.py``) it raises instead.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stackdoctor.core import shell, texts
from stackdoctor.model.facts import Severity
from stackdoctor.model.report import Finding, ProbeStatus
from stackdoctor.model.view import MachineView

__all__ = ["RULE_ERROR", "REGISTRY", "Ctx", "Gates", "Rule", "RuleError", "judge", "ordered", "rule"]

RULE_ERROR = "rule-error"
RULE_ERROR_LAYER = "stackdoctor"  # the layer of a rule-error finding (catalog.RULE_ERROR_INFO lists it)
STRICT_ENV = "STACKDOCTOR_STRICT_RULES"
_SEV_RANK = {"ok": 0, "warn": 1, "fail": 2}


class RuleError(Exception):
    """A rule raised while judging (raised only in strict mode: tests)."""


@dataclass(frozen=True)
class Rule:
    code: str
    severity: Severity  # the worst this code can take (an instance may be milder)
    layer: str
    fn: Callable[[Ctx], None]
    group: str  # the module that declares it: "driver", "kernels", "requirements", ...
    defers_to: tuple[str, ...] = ()
    summary: bool = False  # an "<layer>-ok" rule: runs after every other rule and reads all findings

    @property
    def name(self) -> str:
        return f"{self.fn.__module__.rsplit('.', 1)[-1]}.{self.fn.__name__}"


REGISTRY: dict[str, Rule] = {}
# where a rule declared away from its old neighbours sits in the registry (and so in run order, `--list-checks` and
# `explain`): code -> ("after" | "before", the code it sits next to); every other rule sits in declaration order
_PLACES: dict[str, tuple[str, str]] = {}
# the codes a rule defers to that it does not name: declared by them (``precedes``), a kind's rule before a generic one
_PRECEDED: dict[str, list[str]] = {}


def rule(
    code: str,
    *,
    severity: Severity,
    layer: str,
    defers_to: Sequence[str] = (),
    summary: bool = False,
    group: str | None = None,
    after: str | None = None,
    before: str | None = None,
    precedes: Sequence[str] = (),
) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Declare the rule that produces ``code``. Its group, unless given, is the declaring module's name for a module of
    :mod:`stackdoctor.rules` (``driver``), else its layer: a kind's own rules (``accelerators/nvidia_rules.py``,
    Ascend's, a plug-in's) sit in ``explain`` and ``--list-checks`` with the rules of their layer.

    A rule runs (among those it does not defer to) in declaration order, the kinds' after the generic ones; ``after``
    or ``before`` a code places it next to that rule instead, wherever that one is declared (a rule that moved into its
    kind's package keeps its place among the findings of one severity, on screen and in JSON)."""

    def deco(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        if code in REGISTRY:
            raise ValueError(f"rule for {code!r} declared twice ({REGISTRY[code].name} and {fn.__module__}.{fn.__name__})")
        # stackdoctor.rules.<module>'s rules are that module's group; a kind's (its Accelerator.rules module, a
        # plug-in's too) belong with the rules of their layer
        # (a module whose name is not its group's says so in GROUP: rules/kernel_results.py is the "kernels" group)
        module = sys.modules.get(fn.__module__)
        own = getattr(module, "GROUP", fn.__module__.rsplit(".", 1)[-1]) if fn.__module__.startswith("stackdoctor.rules.") else layer
        REGISTRY[code] = Rule(code, severity, layer, fn, group or own, tuple(defers_to) + tuple(_PRECEDED.get(code, ())), summary)
        for later in precedes:
            _PRECEDED.setdefault(later, []).append(code)
            if later in REGISTRY:  # declared already: it defers to this one too (its place in the registry kept)
                REGISTRY[later] = replace(REGISTRY[later], defers_to=REGISTRY[later].defers_to + (code,))
        if after is not None or before is not None:
            _PLACES[code] = ("after", after) if after is not None else ("before", before or "")
            _place()
        return fn

    return deco


def _place() -> None:
    """Reorder :data:`REGISTRY`: the rules with no declared place in declaration order, then each placed rule next to
    its anchor once that is placed (a chain of them in turn); one whose anchor is not declared (yet) stays last."""
    order = [c for c in REGISTRY if c not in _PLACES]
    waiting = [c for c in REGISTRY if c in _PLACES]
    while waiting:
        ready = [c for c in waiting if _PLACES[c][1] in order]
        if not ready:
            break
        for c in ready:
            where, anchor = _PLACES[c]
            order.insert(order.index(anchor) + (where == "after"), c)
            waiting.remove(c)
    placed = {c: REGISTRY[c] for c in order + waiting}
    REGISTRY.clear()
    REGISTRY.update(placed)


def ordered(rules: Iterable[Rule] | None = None) -> list[Rule]:
    """Rules in run order: each after the codes it defers to, else in declaration order; summaries last."""
    todo = list(rules if rules is not None else REGISTRY.values())
    names = {r.code for r in todo}
    done: list[Rule] = []
    placed: set[str] = set()
    pending = [r for r in todo if not r.summary]
    while pending:
        for r in pending:
            if all(d in placed or d not in names for d in r.defers_to):
                done.append(r)
                placed.add(r.code)
                pending.remove(r)
                break
        else:  # a cycle: a declaration bug
            raise ValueError(f"rules defer to each other in a cycle: {', '.join(r.code for r in pending)}")
    return done + [r for r in todo if r.summary]


_OWN_COMMAND = re.compile(r"\bstackdoctor (install|kernels|check|report)\b")
_NAMES_TARGET = re.compile(r"--python(?=[\s=]|$)")  # not --python-version, a what-if's flag


def for_target(fix: str, facts: MachineView) -> str:
    """``fix`` with ``--python <target>`` after each ``stackdoctor install|kernels|check|report`` it runs, when the
    diagnosed interpreter was chosen by ``--python``: without it, the command would act on the active environment
    (or stackdoctor's own), not on the one this finding is about. A command that names ``--python`` already, or a
    fix without one of those commands, is kept as it is."""
    if facts.facts.python.selected_by != "--python" or not facts.facts.python.executable or _NAMES_TARGET.search(fix):
        return fix
    word = shell.word(facts.facts.python.executable, windows=facts.facts.platform.system == "Windows")
    return _OWN_COMMAND.sub(lambda m: f"{m.group(0)} --python {word}", fix)


@dataclass
class Gates:
    """Thresholds a caller asks for beyond the project file (``kernels --min-busbw``)."""

    min_busbw_gbs: float | None = None


@dataclass
class Ctx:
    """What a rule sees: the machine's view (``view``: :class:`~stackdoctor.model.view.MachineView`), the matrix, the probe
    outcomes, the project requirements."""

    view: MachineView
    matrix: Any  # stackdoctor.matrix.Matrix
    lang: str = "en"
    probes: list[ProbeStatus] = field(default_factory=list)
    requirements: Any = None  # stackdoctor.config.Requirements | None
    gates: Gates = field(default_factory=Gates)
    out: list[Finding] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)  # layers with enough facts to say "ok"
    strict: bool = False
    current: Rule | None = None

    def add(
        self,
        code: str | None = None,
        /,
        *,
        severity: Severity | None = None,
        detail: str = "default",
        fix: str | None = "default",
        facts: Iterable[str] = (),
        fix_text: str | None = None,
        **values: Any,
    ) -> Finding:
        """Add a finding of the current rule's code with its ``detail`` / ``fix`` templates filled from ``values``.

        ``fix_text`` is used verbatim (a command); ``fix=None`` means no template.
        """
        me = self.current
        code = code or (me.code if me else None)
        if me is not None and code != me.code:
            raise RuleError(f"rule {me.name} may only add {me.code!r}, not {code!r}")
        assert code is not None
        text_fix = fix_text
        if text_fix is None and fix is not None:
            text_fix = texts.message(code, "fix", fix, self.lang, **values) or None
        if text_fix:
            text_fix = for_target(text_fix, self.view)
        if text_fix and self.view.facts.platform.system == "Windows":
            text_fix = shell.for_windows(text_fix)  # `export X=1` does nothing good in PowerShell
        declared = me if me is not None else REGISTRY.get(code)
        finding = Finding(
            code=code,
            severity=severity or (declared.severity if declared else "warn"),
            title=texts.title(code, self.lang),
            detail=texts.message(code, "detail", detail, self.lang, **values),
            fix=text_fix,
            layer=declared.layer if declared else RULE_ERROR_LAYER if code == RULE_ERROR else None,
            facts=list(facts),
        )
        self.out.append(finding)
        return finding

    def has(self, *codes: str) -> bool:
        """Whether a finding of one of ``codes`` was added; a rule may only ask about the codes it defers to."""
        me = self.current
        if me is not None and not me.summary:
            undeclared = [c for c in codes if c not in me.defers_to and c != me.code]
            if undeclared:
                raise RuleError(f"rule {me.name} asks about {', '.join(undeclared)} without deferring to it")
        return any(f.code in codes for f in self.out)

    def msg(self, code: str, kind: str, key: str, /, **values: Any) -> str:
        return texts.message(code, kind, key, self.lang, **values)


def strict_default() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _test_broken_rule() -> str | None:
    """Tests only: ``STACKDOCTOR_TEST_HOOK=break-rule:CODE`` makes that rule raise, to prove a broken rule is seen."""
    hook = os.environ.get("STACKDOCTOR_TEST_HOOK", "")
    return hook.split(":", 1)[1] if hook.startswith("break-rule:") else None


def judge(
    facts: MachineView,
    matrix: Any,
    *,
    probes: Sequence[ProbeStatus] = (),
    lang: str = "en",
    requirements: Any = None,
    gates: Gates | None = None,
    groups: Sequence[str] | None = None,
    strict: bool | None = None,
) -> list[Finding]:
    """Every finding for the machine's view ``facts``: problems first (fail, then warn), then the ``-ok`` findings.

    ``groups`` limits the rules to some modules (``["kernels"]`` for ``stackdoctor kernels``). A rule
    that raises becomes a ``rule-error`` finding (or, when ``strict``, a :class:`RuleError`).
    """
    # every rule is declared: importing this module ran stackdoctor/rules/__init__.py, which imports them all
    ctx = Ctx(
        view=facts,
        matrix=matrix,
        lang=lang if lang in texts.LANGS else "en",
        probes=list(probes),
        requirements=requirements,
        gates=gates or Gates(),
        strict=strict_default() if strict is None else strict,
    )
    rules = [r for r in REGISTRY.values() if groups is None or r.group in groups]
    broken = _test_broken_rule()
    for r in ordered(rules):
        ctx.current = r
        try:
            if r.code == broken:
                raise RuntimeError(f"test hook: rule {r.code} broken on purpose")
            r.fn(ctx)
        except Exception as exc:
            if ctx.strict:
                raise RuleError(f"rule {r.name} ({r.code}) raised {type(exc).__name__}: {exc}") from exc
            ctx.current = None
            ctx.add(
                RULE_ERROR,
                # a rule that can fail the run fails it when it breaks: a broken rule never turns exit 1 into 0
                severity="fail" if r.severity == "fail" else "warn",
                facts=[f"rules.{r.code}"],
                rule=r.name,
                failed_code=r.code,
                error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
            )
        finally:
            ctx.current = None
    problems = sorted((f for f in ctx.out if f.severity != "ok"), key=lambda f: -_SEV_RANK.get(f.severity, 0))
    return problems + [f for f in ctx.out if f.severity == "ok"]
