"""Rules about the Thunderbolt links that carry collectives between Macs (and Linux hosts); RDMA over Thunderbolt left
off by macOS is the Mac's own finding (``accelerators/apple/rules.py``'s thunderbolt-rdma-disabled)."""

from __future__ import annotations

from typing import Any

from stackdoctor.core.redact import address_family, address_kind
from stackdoctor.model.facts import is_mac
from stackdoctor.rules.core import Ctx, rule

FAST_LINK_GBPS = 40  # Thunderbolt 3/4 links run at 40 Gb/s; above that is Thunderbolt 5 (80/120 Gb/s)


def _peers(ctx: Ctx) -> list[Any]:
    return [p for p in ctx.view.facts.thunderbolt.ports if p.peer or p.peer_uuid]


@rule("thunderbolt-bridge-loop", severity="warn", layer="network")
def thunderbolt_bridge_loop(ctx: Ctx) -> None:
    tb = ctx.view.facts.thunderbolt
    peers = _peers(ctx)
    if (tb.present or tb.interfaces) and tb.bridge_enabled and len(peers) >= 2:
        bridges = [i for i in tb.interfaces if i.kind == "thunderbolt-bridge"]
        ctx.add(
            facts=["thunderbolt.bridge_enabled", "thunderbolt.ports"],
            bridge=bridges[0].name if bridges else "bridge0",
            peers=", ".join(f"{p.name} -> {p.peer or p.peer_uuid}" for p in peers),
        )


@rule("thunderbolt-link-slow", severity="warn", layer="network")
def thunderbolt_link_slow(ctx: Ctx) -> None:
    f, tb = ctx.view, ctx.view.facts.thunderbolt
    if not (tb.present or tb.interfaces) or not is_mac(f.facts):
        return
    rdma_on = tb.rdma_state == "enabled" or bool(tb.rdma_devices)
    slow = [p for p in _peers(ctx) if p.link_speed_gbps is not None and p.link_speed_gbps <= FAST_LINK_GBPS]
    if rdma_on and slow:
        ctx.add(facts=["thunderbolt.ports"], ports=", ".join(f"{p.name} ({p.link_speed_gbps:g} Gb/s, peer {p.peer or p.peer_uuid})" for p in slow))


@rule("thunderbolt-link-local-ip", severity="warn", layer="network")
def thunderbolt_link_local_ip(ctx: Ctx) -> None:
    f, tb = ctx.view, ctx.view.facts.thunderbolt
    if not (tb.present or tb.interfaces) or not is_mac(f.facts):
        return
    by_name = {i.name: i for i in tb.interfaces}
    for dev in tb.rdma_devices:
        ifname = dev[len("rdma_") :] if dev.startswith("rdma_") else dev
        iface = by_name.get(ifname)
        if iface is None or not iface.up:
            continue
        # address_kind also reads redacted addresses ("<ip-linklocal-1>"), so a redacted report replays the same
        v4 = [a for a in iface.addresses if address_family(a) == 4]
        if v4 and all(address_kind(a) == "linklocal" for a in v4) or (not v4 and tb.bridge_enabled):
            ctx.add(facts=[f"thunderbolt.interfaces.{ifname}.addresses"], iface=ifname, device=dev, addresses=", ".join(iface.addresses) or "-")
