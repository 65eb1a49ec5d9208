"""A Jetson's own resolution path (:meth:`Jetson.plan_target`): torch from the wheel source of its JetPack's row in the
matrix (NVIDIA's Jetson wheels), or, on Thor (JetPack 7), download.pytorch.org's aarch64 CUDA builds planned as for
any machine with that GPU. The resolver's stages (:mod:`stackdoctor.resolve.planner`) hand a Jetson target to it."""

from __future__ import annotations

import dataclasses
import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from stackdoctor import kinds
from stackdoctor.matrix import JetsonRow, Matrix, Release
from stackdoctor.model.plan import Plan, Request
from stackdoctor.model.view import MachineView
from stackdoctor.resolve.machine import Gpu, Target
from stackdoctor.resolve.packages import install_command, planned_packages
from stackdoctor.resolve.planner import resolve


def resolve_jetson(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]], plan: Plan) -> Plan:
    row = matrix.jetson_row(t.l4t, t.jetpack)
    what = f"L4T {t.l4t}" if t.l4t else f"JetPack {t.jetpack}" if t.jetpack else "this Jetson"
    if row is None:
        plan.reasons.append(f"{what}: the matrix has no Jetson row for it, so no wheel source is known")
        return plan
    if row.use_pytorch_index:
        return _resolve_jetson_thor(view, matrix, request, t, cands, plan, row, what)
    if not row.variant or not row.index_url:
        plan.reasons.append(f"{what} (JetPack {row.jetpack}): {row.note or 'no torch wheel source is known'}")
        newer = [j for j in matrix.jetson if j.variant and j.index_url and j.jetpack > row.jetpack]
        if newer:
            plan.suggestions.append(f"JetPack {newer[0].jetpack} (L4T {', '.join(newer[0].l4t)}) has torch {', '.join(newer[0].torch)} from {newer[0].index_url}")
        return plan
    wanted = _jetson_versions(row, request)
    if not wanted:
        plan.reasons.append(f"{what}: {row.index_url} has no torch {request.torch} (it has {', '.join(row.torch)})")
        plan.suggestions.append(f"--torch {row.torch[0]} (the newest on {row.variant})")
        return plan
    if t.python and row.pythons and t.python not in row.pythons:
        plan.reasons.append(f"{what}: {row.variant} wheels are for Python {', '.join(row.pythons)}, not {t.python}")
        plan.suggestions.append(f"Python {row.pythons[0]} (JetPack's Python; --python-version {row.pythons[0]})")
        return plan
    ver = wanted[0]
    plan.torch_version = str(ver)
    plan.variant = row.variant
    plan.index_url = row.index_url
    plan.reasons.append(f"{what} (JetPack {row.jetpack}, CUDA {row.cuda}): torch {ver} from NVIDIA's Jetson wheels at {row.index_url}; PyPI's aarch64 builds do not target the Jetson iGPU")
    if row.unknown:
        plan.warnings.append(f"matrix: {'; '.join(row.unknown)} (unknown)")
    plan.packages = planned_packages(matrix, request, ver, None, row.index_url, plan.warnings)
    plan.command = install_command(view, request, [p.requirement for p in plan.packages], row.index_url)
    return plan


def _resolve_jetson_thor(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]], plan: Plan,
                         row: JetsonRow, what: str) -> Plan:
    """Thor (JetPack 7): the SBSA userspace runs download.pytorch.org's aarch64 CUDA builds, planned as for any
    machine with that GPU (its compute capability from the Jetson row where no tool listed it)."""
    t2 = Target(**{**t.__dict__, "jetson": False})
    if not t2.gpus and row.gpu_cc:
        t2.gpus = [Gpu("nvidia", 0, view.facts.jetson.model or "Jetson GPU", cc=row.gpu_cc[0])]
    plan.reasons.append(f"{what} (JetPack {row.jetpack}): {row.note}")
    inner = _resolve_generic_target(view, matrix, request, t2, cands)
    inner.reasons = plan.reasons + inner.reasons
    inner.warnings = plan.warnings + inner.warnings
    if inner.variant in (None, kinds.CPU) and row.variant and row.index_url:
        inner.suggestions.append(f"NVIDIA's Jetson index {row.index_url} ({row.variant}) has torch {', '.join(row.torch)}")
    return inner


def _jetson_versions(row: JetsonRow, request: Request) -> list[Version]:
    """The torch releases of a Jetson row the request allows, newest first (``--torch 2.5`` means any 2.5.x)."""
    versions = [Version(v) for v in row.torch]
    if not request.torch:
        return sorted(versions, reverse=True)
    spec_text = request.torch.strip()
    try:
        spec = SpecifierSet(spec_text) if re.search(r"[<>=!~,]", spec_text) else SpecifierSet(f"=={spec_text}.*" if spec_text.count(".") == 1 else f"=={spec_text}")
    except InvalidSpecifier:
        spec = SpecifierSet()
    return [v for v in versions if spec.contains(v, prereleases=True)]


def _resolve_generic_target(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]]) -> Plan:
    """Resolve with an already-built target (used for Jetson Thor)."""
    sub = view.replaced(jetson=dataclasses.replace(view.facts.jetson, is_jetson=False))  # the same view, the Jetson path off
    req = dataclasses.replace(
        request,
        gpus=[f"sm_{g.cc.replace('.', '')}" for g in t.gpus if g.cc] or request.gpus,  # only an NVIDIA GPU has a compute capability
        driver=t.driver,
    )
    return resolve(sub, matrix, req)
