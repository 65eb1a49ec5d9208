"""Every finding stackdoctor makes, as declared rules grouped by layer (bottom of the stack first).

- :mod:`.probe_failures` — a tool that failed or hung (``probe-failed``, ``probe-timeout``)
- :mod:`.system` — the OS: the C library
- :mod:`.driver` — what the driver's witnesses say against each other
- :mod:`.python` — the target Python
- :mod:`.torch` — the installed wheel
- :mod:`.network` — Thunderbolt links
- :mod:`.kernel_results` — kernel and collective results
- :mod:`.requirements` — the project's ``[tool.stackdoctor]``
- :mod:`.ok` — one ``<layer>-ok`` per healthy layer

A kind's own findings (a missing NVIDIA driver, a lost GPU, torch.cuda unavailable, ``rocm-kfd-permission``,
``xpu-unavailable``, ``mps-unavailable`` ...) are declared by the module its :attr:`Accelerator.rules` names
(``stackdoctor/accelerators/nvidia/rules.py``, ``amd/rules.py``, ``intel/rules.py``, ``apple/rules.py``, a
plug-in's); they are listed in the group of their layer (or the group they name) and join this one registry, each
in the place it declares (``after`` / ``before`` a code: where it ran when it was declared here), and the generic
rules ask the kinds (:mod:`stackdoctor.kinds`) instead of naming one.

Adding a finding: one ``@rule`` function in the module of its layer, plus its entry in
``stackdoctor/locale/en.yaml`` and ``zh.yaml`` (title, explain, detail and fix templates).
"""

from __future__ import annotations

import importlib

from stackdoctor import kinds
from stackdoctor.core import texts

# isort: off
from stackdoctor.rules import (  # noqa: F401  (importing declares the rules, in this order: a rule runs after those it defers to, else in declaration order)
    driver,
    kernel_results,
    network,
    ok,
    pairs,
    system,
    probe_failures,
    python,
    requirements,
    torch,
)
# isort: on
from stackdoctor.rules.core import REGISTRY, RULE_ERROR, Ctx, Gates, Rule, RuleError, judge, ordered, rule


def _kinds_rules() -> None:
    """The accelerator kinds' own rules (``Accelerator.rules``, a plug-in's or a bundled kind's): importing declares
    them in the one registry (so ``explain`` and ``check --list-checks`` list them), and their texts
    (``Accelerator.texts()``, en and zh) join stackdoctor's."""
    for kind in (a for a in kinds.ALL if a.rules):
        try:
            importlib.import_module(kind.rules)  # type: ignore[arg-type]
            texts.add_texts(kind.texts())
        except Exception as exc:  # a plug-in's broken rules are a sentence in check -v, never a crash of every command
            kinds.PLUGIN_ERRORS.append(f"accelerator rules {kind.rules}: {type(exc).__name__}: {exc}")


_kinds_rules()

__all__ = ["REGISTRY", "RULE_ERROR", "Ctx", "Gates", "Rule", "RuleError", "judge", "ordered", "rule"]
