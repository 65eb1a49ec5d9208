"""Apple's own findings, declared through the seam (:attr:`Apple.rules` names this module): torch's MPS backend
unavailable on a Mac (Rosetta, a build without MPS, a macOS older than the release needs). Texts in
``stackdoctor/locale/en.yaml`` and ``zh.yaml``; the rule keeps its layer's group (``runtime``)."""

from __future__ import annotations

from stackdoctor.core.versions import release as vt
from stackdoctor.model.facts import is_mac, runs_x86
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import python_exe, release
from stackdoctor.rules.network import FAST_LINK_GBPS


@rule("mps-unavailable", severity="fail", layer="runtime")
def mps_unavailable(ctx: Ctx) -> None:
    f, t, a = ctx.view, ctx.view.facts.torch, ctx.view.facts.apple
    if not is_mac(f.facts) or not t.installed or t.mps_available is not False:
        return
    rel = release(ctx, t.version)
    mps_floor = getattr(rel, "mps_min_macos", None) if rel is not None else None
    if a.rosetta or runs_x86(f.facts) and a.arch == "arm64":
        key = "rosetta"
    elif t.mps_built is False:
        key = "not_built"
    elif mps_floor and a.macos_version and vt(a.macos_version) < vt(mps_floor):
        key = "old_macos"
    elif a.arch == "x86_64" or (a.chip and "Intel" in a.chip):
        return  # Intel Macs have no MPS in current torch: not a problem to fix
    else:
        key = "default"
    older = None
    if key == "old_macos" and ctx.matrix is not None:
        for r in ctx.matrix.releases:
            if r.mps_min_macos and vt(a.macos_version) >= vt(r.mps_min_macos):
                older = str(r.version)
                break
    ctx.add(
        detail=key,
        fix=key if (key != "old_macos" or older) else "old_macos_no_torch",
        facts=["torch.mps_available", "torch.mps_built", "apple.macos_version", "apple.rosetta"],
        torch=t.version,
        macos=a.macos_version or "?",
        floor=mps_floor or "?",
        older=older or "",
        python=python_exe(f),
    )


# the network layer's Mac finding, in its place when it was rules/network.py's: after thunderbolt-bridge-loop
@rule("thunderbolt-rdma-disabled", severity="warn", layer="network", after="thunderbolt-bridge-loop")
def thunderbolt_rdma_disabled(ctx: Ctx) -> None:
    f, tb = ctx.view, ctx.view.facts.thunderbolt
    if not (tb.present or tb.interfaces) or not is_mac(f.facts):
        return
    need = ctx.matrix.threshold("macos.rdma_over_thunderbolt") if ctx.matrix is not None else None
    tb5 = [p for p in tb.ports if (p.link_speed_gbps is not None and p.link_speed_gbps > FAST_LINK_GBPS) or p.generation == "TB5"]
    ver = f.facts.apple.macos_version or f.facts.platform.os_version
    if tb.rdma_state == "disabled" and tb5 and ver and need is not None and vt(ver) >= vt(need.min_version):
        ctx.add(facts=["thunderbolt.rdma_state", "apple.macos_version"], macos=ver, ports=", ".join(p.name for p in tb5), need=need.min_version)


# the torch layer's Mac finding, in its place when it was rules/torch.py's: after jetson-wrong-wheel
@rule("macos-x86-torch-too-new", severity="warn", layer="torch", after="jetson-wrong-wheel")
def macos_x86_torch_too_new(ctx: Ctx) -> None:
    f, t, a = ctx.view, ctx.view.facts.torch, ctx.view.facts.apple
    if not runs_x86(f.facts):
        return
    newest = ctx.matrix.newest_release_for("macos", "x86_64")  # Intel Macs stop at the last release with their wheels
    last = str(newest.version) if newest is not None else None
    if t.installed and (last is None or vt(t.version) <= vt(last)):
        return
    key = "rosetta" if a.rosetta or a.arch == "arm64" else "intel"
    ctx.add(detail=key, fix=key, facts=["apple.arch", "apple.rosetta", "platform.machine"], torch=t.version or "-", python=python_exe(f), last=last or "?")
