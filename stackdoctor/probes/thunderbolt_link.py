"""Which Thunderbolt interface a two-machine collective should use, and the link rate behind it: read from
:class:`ThunderboltFacts` alone (the allreduce runner of ``stackdoctor kernels`` asks)."""

from __future__ import annotations

import ipaddress

from stackdoctor.model.links import NetInterface, ThunderboltFacts, ThunderboltPort


def _ipv4s(iface: NetInterface) -> list[ipaddress.IPv4Interface]:
    out: list[ipaddress.IPv4Interface] = []
    for a in iface.addresses:
        try:
            ip = ipaddress.ip_interface(a)
        except ValueError:
            continue
        if isinstance(ip, ipaddress.IPv4Interface):
            out.append(ip)
    return out


def _port_of(facts: ThunderboltFacts, iface: NetInterface) -> ThunderboltPort | None:
    return next((p for p in facts.ports if iface.tb_port and p.name == iface.tb_port), None)


def choose_thunderbolt_interface(facts: ThunderboltFacts) -> NetInterface | None:
    """The interface ``kernels allreduce --over thunderbolt`` should bind to (pure; None when none fits).

    Only interfaces that are up and have an address can carry gloo's TCP (``GLOO_SOCKET_IFNAME``).
    Among those, in this order of preference (thunderbolt.md sections 1, 2.4, 6, 8):

    1. A per-port ``enX`` / ``thunderbolt0`` that has an IPv4 address, ranked by: an RDMA device
       behind it (``rdma_enX``: the same cable TCCL would use), an address that is not link-local
       (TCCL's ``checkLinkLayer`` rejects 169.254/16, and the Thunderbolt Bridge must be down for
       RDMA, so a configured per-port address is the RDMA-ready set-up), a connected port with a
       peer, then the faster negotiated link.
    2. ``bridge0``, the Thunderbolt Bridge, when it is up with an IPv4 address: TCP over every
       Thunderbolt port, normally link-local; fine for gloo, never for RDMA.
    3. A Thunderbolt interface that is up with only an IPv6 address (gloo can bind it).
    """
    candidates = [i for i in facts.interfaces if i.kind in ("thunderbolt", "thunderbolt-bridge") and i.up and i.addresses]
    if not candidates:
        return None

    def rank(iface: NetInterface) -> tuple[int, int, int, int, float, str]:
        v4 = _ipv4s(iface)
        port = _port_of(facts, iface)
        tier = 0 if (v4 and iface.kind == "thunderbolt") else (1 if v4 else 2)
        return (
            tier,
            0 if iface.rdma_device else 1,
            0 if any(not ip.ip.is_link_local for ip in v4) else 1,
            0 if (port is not None and port.connected) else 1,
            -(port.link_speed_gbps or 0.0) if port is not None else 0.0,
            iface.name,
        )

    return min(candidates, key=rank)


def link_rate_gbps(facts: ThunderboltFacts, iface: NetInterface) -> float | None:
    """The negotiated link rate behind ``iface`` in Gb/s, for busbw as a % of it (pure).

    ``enX`` / ``thunderbolt0``: its own port's negotiated rate (macOS: the "Thunderbolt N" port's
    bus; Linux: the XDomain's per-lane speed x lanes, slower direction). ``bridge0``: the fastest
    connected member port (one peer's traffic uses one cable). Else the interface's own
    ``speed_mbps``; else None.
    """
    port = _port_of(facts, iface)
    if port is not None and port.link_speed_gbps:
        return port.link_speed_gbps
    if iface.kind == "thunderbolt-bridge":
        rates = []
        for member in iface.members:
            m = next((i for i in facts.interfaces if i.name == member), None)
            p = _port_of(facts, m) if m is not None else None
            if p is not None and p.connected and p.link_speed_gbps:
                rates.append(p.link_speed_gbps)
        if rates:
            return max(rates)
    if iface.kind == "thunderbolt" and port is None:
        linked = [p for p in facts.ports if p.interface == iface.name and p.link_speed_gbps]
        if linked:
            return linked[0].link_speed_gbps
    if iface.speed_mbps:
        return iface.speed_mbps / 1000.0
    return None
