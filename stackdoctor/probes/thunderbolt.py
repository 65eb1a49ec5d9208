"""Thunderbolt: ports, links, peers and the network interfaces that ride on them.

macOS (only when the host is "Darwin": ``System.host()``):

- ``system_profiler SPThunderboltDataType -json`` -> one :class:`ThunderboltPort` per bus
  (receptacle, negotiated speed, peer host by domain UUID, the peer's XDomain services);
  the plain-text layout is parsed too (it is what users paste into bug reports).
- ``networksetup -listallhardwareports`` -> "Thunderbolt N" -> ``enX``, "Thunderbolt Bridge" -> ``bridge0``.
- ``ifconfig`` -> flags, status, addresses and bridge members of those interfaces.
- ``rdma_ctl status`` -> enabled / disabled; ``ibv_devices`` -> ``rdma_enX`` devices.

Linux (every other system): ``/sys/bus/thunderbolt/devices`` (domains, routers, XDomain
hosts with ``rx_speed``/``rx_lanes``), network interfaces bound to ``thunderbolt-net``
(``/sys/class/net/*/device/uevent`` ``DRIVER=``, or the ``device/driver`` link), their IPv6
addresses from ``/proc/net/if_inet6`` and, on the live machine only, IPv4 from ``ip -j addr``;
``boltctl list`` when bolt is installed.

Every tool may be absent (a fact, not an error); a tool that exists and fails goes into
``tool_errors``. Parsers are pure and never raise. :func:`choose_thunderbolt_interface` and
:func:`link_rate_gbps` are pure helpers for ``stackdoctor kernels allreduce --over thunderbolt``.
See ``../shared/reference/thunderbolt.md`` for the sources behind each rule.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from stackdoctor.facts import NetInterface, ThunderboltFacts, ThunderboltPort
from stackdoctor.probes import ProbeContext, ProbeOutput
from stackdoctor.probes.thunderbolt_link import choose_thunderbolt_interface, link_rate_gbps  # re-exported (__all__): commands/kernels imports them from here
from stackdoctor.system import CommandResult

__all__ = [
    "choose_thunderbolt_interface",
    "link_rate_gbps",
    "parse_boltctl",
    "parse_ibv_devices",
    "parse_ifconfig",
    "parse_ip_addr_json",
    "parse_networksetup_hardware_ports",
    "parse_proc_if_inet6",
    "parse_rdma_ctl_status",
    "parse_speed_gbps",
    "parse_system_profiler",
    "parse_system_profiler_json",
    "parse_system_profiler_text",
    "probe",
]

# exo PR #1813: "TB4 devices (<=40 Gb/s) don't support RDMA"; > 40 Gb/s negotiated means Thunderbolt 5.
TB5_MIN_GBPS = 40.0
# c25 (exo#1390): the peer's "Service: Unknown" with "Service Key: rdma" has "Protocol ID: 64087";
# the same protocol id appears in -json captures where service_key_key is not readable text.
RDMA_SERVICE_PROTOCOL_ID = 64087
# sysfs "generation" of a router: 1-3 = Thunderbolt 1-3, 4 = USB4 (Documentation/ABI/testing/sysfs-bus-thunderbolt).
_SYSFS_GENERATION = {"1": "TB1", "2": "TB2", "3": "TB3", "4": "USB4"}

_NUM = r"(\d+(?:\.\d+)?)"
_SPEED_RE = re.compile(_NUM + r"\s*([GM])b(?:it)?/?s", re.IGNORECASE)
_MULT_RE = re.compile(r"[x\u00d7*]\s*(\d+)\b", re.IGNORECASE)
_TB_PORT_RE = re.compile(r"^Thunderbolt (\d+)$")


# ============================================================================ small helpers


def parse_speed_gbps(text: str | None) -> float | None:
    """The first speed in a Thunderbolt speed string, in Gb/s (``None`` when there is none).

    Real values: ``"80 Gb/s"`` (c25), ``"Up to 120 Gb/s"`` (system_profiler -json, port
    capability), ``"20.0 Gb/s"`` (Linux sysfs ``rx_speed``, per lane), ``"40 Gb/s = 2 lanes *
    20 Gb/s"`` (boltctl, c22). As thunderbolt.md section 5 says, the first number is the rate;
    a trailing ``x1`` / ``x2`` is not multiplied in (what it counts differs between releases).
    """
    if not isinstance(text, str):
        return None
    m = _SPEED_RE.search(text)
    if not m:
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if m.group(2).upper() == "M":
        value /= 1000.0
    return value


def _generation_for(gbps: float | None) -> str | None:
    """TB5 from a rate above 40 Gb/s; at or below it TB3, TB4 and USB4 look the same (None)."""
    if gbps is None:
        return None
    return "TB5" if gbps > TB5_MIN_GBPS else None


def _generation_from_text(text: str | None) -> str | None:
    """``"Thunderbolt 3"`` -> ``"TB3"``; ``"USB4"`` -> ``"USB4"``."""
    if not isinstance(text, str):
        return None
    m = re.search(r"Thunderbolt\s*(\d)", text, re.IGNORECASE)
    if m:
        return f"TB{m.group(1)}"
    if re.search(r"USB\s*4", text, re.IGNORECASE):
        return "USB4"
    return None


def _s(value: Any) -> str | None:
    """A JSON value as a stripped non-empty string, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return None


def _cidr(addr: str, prefix: int | None) -> str:
    return f"{addr}/{prefix}" if prefix is not None else addr


# ============================================================================ system_profiler


def _connected_from_status(status: str | None) -> bool | None:
    if not status:
        return None
    low = status.lower()
    if "no device" in low or "no_device" in low or "not connected" in low:
        return False
    if "connected" in low:
        return True
    return None


def _apply_speed(port: ThunderboltPort, text: str | None) -> None:
    """Negotiated speed when the port is connected; capability (``Up to ...``) otherwise."""
    port.speed_text = text
    gbps = parse_speed_gbps(text)
    if gbps is None:
        return
    upto = bool(text and re.match(r"\s*up\s*to", text, re.IGNORECASE))
    if upto:
        port.max_speed_gbps = gbps
    # Intel Macs print "Up to 40 Gb/s x1" for a connected link too: when a device is there, the
    # number is the link's rate. On Apple Silicon a connected port prints the bare rate ("80 Gb/s").
    if port.connected or (port.connected is None and not upto):
        port.link_speed_gbps = gbps
        port.generation = _generation_for(gbps)
    elif upto and port.generation is None:
        port.generation = _generation_for(gbps)


def _json_services(item: dict[str, Any]) -> list[str]:
    out: list[str] = []
    services = item.get("services_title")
    if not isinstance(services, list):
        return out
    for svc in services:
        if not isinstance(svc, dict):
            continue
        name = _s(svc.get("_name")) or ""
        key = _s(svc.get("service_key_key")) or ""
        proto = svc.get("protocol_id_key")
        if key.lower() == "rdma" or proto == RDMA_SERVICE_PROTOCOL_ID or _s(proto) == str(RDMA_SERVICE_PROTOCOL_ID):
            label = "rdma"
        elif name == "service_ip":
            label = "ip"
        else:
            label = name or key or "unknown"
        if label not in out:
            out.append(label)
    return out


def _json_peers(items: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every device under a bus, depth first (peers behind hubs and docks sit in nested ``_items``)."""
    if not isinstance(items, list) or depth > 32:
        return
    for item in items:
        if isinstance(item, dict):
            yield item
            yield from _json_peers(item.get("_items"), depth + 1)


def parse_system_profiler_json(text: str) -> list[ThunderboltPort]:
    """``system_profiler SPThunderboltDataType -json`` -> one port per bus (never raises).

    Real sample (M5 Max MacBook Pro cabled to a Mac Studio, fixture ``tb-omlx-...``)::

        {"SPThunderboltDataType" : [ {
            "_items" : [ { "_name" : "Mac Studio", "device_name_key" : "Mac15,14",
                           "domain_uuid_key" : "28CA4C30-A263-4C55-B302-953416D0B209",
                           "services_title" : [ { "_name" : "service_ip", ... } ] } ],
            "_name" : "thunderboltusb4_bus_0",
            "domain_uuid_key" : "817DCFA4-B481-4100-80FC-91C7AA969F0B",
            "receptacle_1_tag" : { "current_speed_key" : "80 Gb/s", "link_status_key" : "0x2",
                                   "receptacle_id_key" : "1",
                                   "receptacle_status_key" : "receptacle_connected" } } ] }

    The peer is the first device, at any depth, that has a ``domain_uuid_key`` (another host:
    an XDomain link); failing that, the first device (a drive or a dock).
    """
    try:
        data = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    buses = data.get("SPThunderboltDataType")
    if not isinstance(buses, list):
        return []
    ports: list[ThunderboltPort] = []
    for i, bus in enumerate(buses):
        if not isinstance(bus, dict):
            continue
        port = ThunderboltPort(name=_s(bus.get("_name")) or f"bus{i}", kind="bus")
        port.domain_uuid = _s(bus.get("domain_uuid_key"))
        rec = None
        for key in sorted(k for k in bus if isinstance(k, str) and re.fullmatch(r"receptacle_\d+_tag", k)):
            if isinstance(bus[key], dict):
                rec = bus[key]
                break
        peers = list(_json_peers(bus.get("_items")))
        if rec is not None:
            port.receptacle = _s(rec.get("receptacle_id_key"))
            port.link_status = _s(rec.get("receptacle_status_key"))
            port.connected = _connected_from_status(port.link_status)
        if port.connected is None and peers:
            port.connected = True
        if rec is not None:
            _apply_speed(port, _s(rec.get("current_speed_key")))
        host = next((p for p in peers if _s(p.get("domain_uuid_key"))), None)
        peer = host or (peers[0] if peers else None)
        if peer is not None:
            port.peer = _s(peer.get("_name")) or _s(peer.get("device_name_key"))
            port.peer_model = _s(peer.get("device_name_key"))
            port.peer_vendor = _s(peer.get("vendor_name_key"))
            port.peer_uuid = _s(peer.get("domain_uuid_key"))
            port.peer_services = _json_services(peer)
        ports.append(port)
    return ports


@dataclass
class _Node:
    name: str
    indent: int
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)


def _outline(text: str) -> _Node:
    """system_profiler's indented text as a tree: ``Name:`` lines are nodes, ``Key: value`` attributes."""
    root = _Node("", -1)
    stack = [root]
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        body = line.strip()
        while len(stack) > 1 and stack[-1].indent >= indent:
            stack.pop()
        parent = stack[-1]
        if body.endswith(":"):
            node = _Node(body[:-1].strip(), indent)
            parent.children.append(node)
            stack.append(node)
        elif ": " in body:
            key, _, value = body.partition(": ")
            parent.attrs.setdefault(key.strip(), value.strip())
    return root


def _walk(node: _Node, depth: int = 0) -> Iterator[_Node]:
    if depth > 64:
        return
    for child in node.children:
        yield child
        yield from _walk(child, depth + 1)


def _text_services(node: _Node) -> list[str]:
    out: list[str] = []
    for child in node.children:
        if child.name != "Services":
            continue
        for svc in child.children:
            key = svc.attrs.get("Service Key", "")
            proto = svc.attrs.get("Protocol ID", "")
            if key.lower() == "rdma" or proto == str(RDMA_SERVICE_PROTOCOL_ID):
                label = "rdma"
            elif svc.name == "Internet Protocol":
                label = "ip"
            else:
                label = svc.name or key or "unknown"
            if label not in out:
                out.append(label)
    return out


def parse_system_profiler_text(text: str) -> list[ThunderboltPort]:
    """Plain ``system_profiler SPThunderboltDataType`` -> one port per bus (never raises).

    Real sample (c25, Mac mini linked to a Mac Studio, exo#1390)::

        Thunderbolt/USB4:

            Thunderbolt/USB4 Bus 2:

              Device Name: Mac mini
              Domain UUID: 7F158861-C131-4D0D-83B6-CA50EF76C32B
              Port:
                  Status: Device connected
                  Link Status: 0x2
                  Speed: 80 Gb/s
                  Receptacle: 3

                Mac Studio:

                  Device Name: Mac16,9
                  Domain UUID: 88F10ACA-5CAA-4F5D-8361-03EED54ACB5A
                  Services:
                    Internet Protocol:
                    Service: Unknown:
                      Protocol ID: 64087
                      Service Key: rdma
    """
    if not isinstance(text, str):
        return []
    try:
        root = _outline(text)
    except RecursionError:  # pragma: no cover - the outline is iterative
        return []
    buses = [n for n in _walk(root) if re.search(r"\bBus\b", n.name) and "Thunderbolt" in n.name]
    return [_text_bus(bus, i) for i, bus in enumerate(buses)]


def _text_bus(bus: _Node, i: int) -> ThunderboltPort:
    """One ``Thunderbolt/USB4 Bus N`` outline: its port (the connected one, else the first) and its peer."""
    port = ThunderboltPort(name=bus.name or f"bus{i}", kind="bus")
    port.domain_uuid = bus.attrs.get("Domain UUID") or None
    port_nodes = [c for c in bus.children if c.name == "Port" or c.name.startswith("Port (")]
    pnode = next((p for p in port_nodes if _connected_from_status(p.attrs.get("Status"))), None)
    pnode = pnode or (port_nodes[0] if port_nodes else None)
    devices = _text_devices(bus)
    if pnode is not None:
        _text_port(port, pnode)
    if port.connected is None and devices:
        port.connected = True
    if pnode is not None:
        _apply_speed(port, pnode.attrs.get("Speed") or None)
    host = next((d for d in devices if d.attrs.get("Domain UUID")), None)
    peer = host or (devices[0] if devices else None)
    if peer is not None:
        _text_peer(port, peer)
    return port


def _text_devices(bus: _Node) -> list[_Node]:
    """The devices under a bus: outlines (not ports, not services) with a name, a vendor or a domain UUID."""
    return [
        n
        for n in _walk(bus)
        if n.name not in ("Port", "Services") and not n.name.startswith("Port (")
        and ("Device Name" in n.attrs or "Vendor Name" in n.attrs or "Domain UUID" in n.attrs)
    ]


def _text_peer(port: ThunderboltPort, peer: _Node) -> None:
    """The peer's name, model, vendor, domain UUID and services."""
    port.peer = peer.name or peer.attrs.get("Device Name")
    port.peer_model = peer.attrs.get("Device Name") or None
    port.peer_vendor = peer.attrs.get("Vendor Name") or None
    port.peer_uuid = peer.attrs.get("Domain UUID") or None
    port.peer_services = _text_services(peer)


def _text_port(port: ThunderboltPort, pnode: _Node) -> None:
    """A ``Port:`` block's status and receptacle (from its attributes, else its name)."""
    port.link_status = pnode.attrs.get("Status") or None
    port.connected = _connected_from_status(port.link_status)
    port.receptacle = pnode.attrs.get("Receptacle") or None
    if port.receptacle is None:
        m = re.search(r"Receptacle\s*(\d+)", pnode.name)
        port.receptacle = m.group(1) if m else None


def parse_system_profiler(text: str) -> list[ThunderboltPort]:
    """Either layout: JSON when the text is a JSON object, else the indented text."""
    if not isinstance(text, str):
        return []
    if text.lstrip().startswith("{"):
        return parse_system_profiler_json(text)
    return parse_system_profiler_text(text)


# ============================================================================ networksetup / ifconfig


def parse_networksetup_hardware_ports(text: str) -> list[NetInterface]:
    """``networksetup -listallhardwareports`` -> interfaces with their hardware port (never raises).

    Real sample (nonocast/me#129, a MacBook with two Thunderbolt ports)::

        Hardware Port: Thunderbolt 1
        Device: en1
        Ethernet Address: 82:f1:30:25:50:01

        Hardware Port: Thunderbolt Bridge
        Device: bridge0
        Ethernet Address: 82:f1:30:25:50:01

    ``kind``: "thunderbolt" for ``Thunderbolt N``, "thunderbolt-bridge" for ``Thunderbolt Bridge``;
    "Thunderbolt Ethernet" (Apple's Gigabit adapter) is plain "ethernet".
    """
    out: list[NetInterface] = []
    if not isinstance(text, str):
        return out
    port: str | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "Hardware Port":
            port = value
        elif key == "Device" and port is not None and value:
            if _TB_PORT_RE.match(port):
                kind = "thunderbolt"
            elif port == "Thunderbolt Bridge":
                kind = "thunderbolt-bridge"
            elif "ethernet" in port.lower() or "lan" in port.lower():
                kind = "ethernet"
            else:
                kind = "other"
            out.append(NetInterface(name=value, kind=kind, hardware_port=port))
        elif key == "Ethernet Address" and out and out[-1].hardware_port == port and out[-1].mac is None:
            if re.fullmatch(r"[0-9A-Fa-f]{1,2}(:[0-9A-Fa-f]{1,2}){5}", value):
                out[-1].mac = value.lower()
    return out


_IFCONFIG_HEAD = re.compile(r"^([A-Za-z0-9_.\-]+): flags=[0-9a-fA-F]+<([^>]*)>(?:.*\bmtu (\d+))?")


def _netmask_prefix(mask: str) -> int | None:
    try:
        if mask.lower().startswith("0x"):
            return bin(int(mask, 16) & 0xFFFFFFFF).count("1")
        return ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen
    except ValueError:
        return None


def parse_ifconfig(text: str) -> dict[str, NetInterface]:
    """BSD ``ifconfig`` (all interfaces or one) -> interfaces by name (never raises).

    Real sample (c51, an Intel Mac's Thunderbolt Bridge with four ports, nothing plugged in)::

        bridge0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500
        \toptions=63<RXCSUM,TXCSUM,TSO4,TSO6>
        \tether d2:00:a0:43:10:00
        \tmember: en1 flags=3<LEARNING,DISCOVER>
        \t        ifmaxaddr 0 port 6 priority 0 path cost 0
        \tmember: en2 flags=3<LEARNING,DISCOVER>
        \tstatus: inactive

    ``up`` is the UP flag and, where a ``status:`` line exists, ``status: active``. Addresses are
    CIDR strings (``169.254.3.1/16``, ``fe80::1/64`` without the ``%scope``).
    """
    out: dict[str, NetInterface] = {}
    if not isinstance(text, str):
        return out
    cur: NetInterface | None = None
    flags_up = False
    for raw in text.splitlines():
        m = _IFCONFIG_HEAD.match(raw)
        if m:
            name = m.group(1)
            flags_up = "UP" in m.group(2).split(",")
            cur = NetInterface(name=name, up=flags_up)
            if m.group(3):
                cur.mtu = int(m.group(3))
            out[name] = cur
            continue
        if cur is None or not raw[:1].isspace():
            if not raw[:1].isspace():
                cur = None
            continue
        words = raw.split()
        if not words:
            continue
        head = words[0]
        if head == "ether" and len(words) > 1:
            cur.mac = words[1].lower()
        elif head == "inet" and len(words) > 1:
            prefix = None
            if "netmask" in words:
                i = words.index("netmask")
                if i + 1 < len(words):
                    prefix = _netmask_prefix(words[i + 1])
            addr = words[1].split("/")[0]
            cur.addresses.append(_cidr(addr, prefix))
        elif head == "inet6" and len(words) > 1:
            prefix = None
            if "prefixlen" in words:
                i = words.index("prefixlen")
                if i + 1 < len(words) and words[i + 1].isdigit():
                    prefix = int(words[i + 1])
            cur.addresses.append(_cidr(words[1].split("%")[0], prefix))
        elif head == "member:" and len(words) > 1:
            cur.members.append(words[1])
        elif head == "status:" and len(words) > 1:
            cur.status = words[1]
            cur.up = flags_up and words[1] == "active"
    return out


# ============================================================================ RDMA


def parse_rdma_ctl_status(text: str) -> str | None:
    """``rdma_ctl status`` -> "enabled" | "disabled" | None (unknown).

    The tool prints one word (``enabled``); setup scripts compare it exactly
    (``[ "$st" = "enabled" ]``, exo-style gatherers map it to enabled / disabled / unknown).
    """
    if not isinstance(text, str):
        return None
    low = text.strip().lower()
    if not low:
        return None
    if re.search(r"\bdisabled\b|\bnot enabled\b|\boff\b", low):
        return "disabled"
    if re.search(r"\benabled\b", low):
        return "enabled"
    return None


def parse_ibv_devices(text: str) -> list[str]:
    """``ibv_devices`` -> device names (never raises).

    A two-line header then one ``name  node-GUID`` row per device. Real sample (an M3 Ultra after
    ``rdma_ctl enable``, MLX documentation; rdma-core indents each line by four spaces)::

        device                 node GUID
        ------              ----------------
        rdma_en2            8096a9d9edbaac05
        rdma_en3            8196a9d9edbaac05
        rdma_en5            8396a9d9edbaac05
    """
    out: list[str] = []
    if not isinstance(text, str):
        return out
    for raw in text.splitlines():
        words = raw.split()
        if not words:
            continue
        name = words[0]
        if name.lower() == "device" or set(name) <= {"-"}:
            continue
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name) or len(words) > 2:
            continue
        if name not in out:
            out.append(name)
    return out


# ============================================================================ Linux


def parse_boltctl(text: str) -> list[ThunderboltPort]:
    """``boltctl list`` -> one port entry per device (never raises).

    Real sample (c22, a Razer Core eGPU enclosure, lpereira/hardinfo#649)::

         ● Razer Core
           ├─ type:          peripheral
           ├─ name:          Core
           ├─ vendor:        Razer
           ├─ uuid:          c0030000-00a2-8508-2219-f4d4d2c1a918
           ├─ generation:    Thunderbolt 3
           ├─ status:        authorized
           │  ├─ domain:     c6030000-0080-7518-2391-a4e51a82e819
           │  ├─ rx speed:   40 Gb/s = 2 lanes * 20 Gb/s
           │  ├─ tx speed:   40 Gb/s = 2 lanes * 20 Gb/s
    """
    out: list[ThunderboltPort] = []
    if not isinstance(text, str):
        return out
    cur: ThunderboltPort | None = None
    rx: float | None = None
    tx: float | None = None

    def close() -> None:
        if cur is None:
            return
        rates = [r for r in (rx, tx) if r is not None]
        if rates:
            cur.link_speed_gbps = min(rates)
        out.append(cur)

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("\u25cf") or line.startswith("*"):
            close()
            cur = ThunderboltPort(name=line.lstrip("\u25cf* ").strip() or "device", kind="device", connected=None)
            cur.peer = cur.name
            rx = tx = None
            continue
        if cur is None:
            continue
        body = line.lstrip("\u2502\u251c\u2514\u2500 |`-").strip()
        key, sep, value = body.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key == "type":
            cur.kind = "xdomain" if value == "host" else "device"
        elif key == "vendor":
            cur.peer_vendor = value or None
        elif key == "name":
            cur.peer_model = value or None
        elif key == "uuid":
            cur.peer_uuid = value or None
        elif key == "generation":
            cur.generation = _generation_from_text(value)
        elif key == "status":
            cur.link_status = value or None
            cur.connected = value not in ("disconnected", "unknown", "")
        elif key == "domain":
            cur.domain_uuid = value or None
        elif key == "rx speed":
            rx = parse_speed_gbps(value)
            cur.speed_text = value or None
        elif key == "tx speed":
            tx = parse_speed_gbps(value)
    close()
    return out


def parse_proc_if_inet6(text: str) -> dict[str, list[str]]:
    """``/proc/net/if_inet6`` -> IPv6 addresses (CIDR) per interface (never raises).

    Layout (``addr ifindex prefixlen scope flags name``, addr as 32 hex digits)::

        fe80000000000000a8c9fffffe2f1a3b 05 40 20 80 thunderbolt0
    """
    out: dict[str, list[str]] = {}
    if not isinstance(text, str):
        return out
    for raw in text.splitlines():
        words = raw.split()
        if len(words) < 6 or not re.fullmatch(r"[0-9a-fA-F]{32}", words[0]):
            continue
        try:
            addr = ipaddress.IPv6Address(int(words[0], 16))
            prefix = int(words[2], 16)
        except ValueError:
            continue
        out.setdefault(words[5], []).append(f"{addr.compressed}/{prefix}")
    return out


def parse_ip_addr_json(text: str) -> dict[str, list[str]]:
    """``ip -j addr show`` -> addresses (CIDR) per interface (never raises).

    Sample layout (iproute2)::

        [{"ifindex":5,"ifname":"thunderbolt0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],
          "addr_info":[{"family":"inet","local":"169.254.31.7","prefixlen":16,"scope":"link"}]}]
    """
    out: dict[str, list[str]] = {}
    try:
        data = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return out
    if not isinstance(data, list):
        return out
    for link in data:
        if not isinstance(link, dict):
            continue
        name = _s(link.get("ifname"))
        infos = link.get("addr_info")
        if not name or not isinstance(infos, list):
            continue
        for info in infos:
            if not isinstance(info, dict):
                continue
            local = _s(info.get("local"))
            if not local:
                continue
            prefix = info.get("prefixlen")
            out.setdefault(name, []).append(_cidr(local, prefix if isinstance(prefix, int) and not isinstance(prefix, bool) else None))
    return out


def _kv_lines(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _read(ctx: ProbeContext, path: str) -> str | None:
    r = ctx.system.read_text(path, max_bytes=64 * 1024)
    return r.text.strip() if r.ok else None


def _link_basename(ctx: ProbeContext, path: str) -> str | None:
    """Basename of a sysfs symlink's target, read under the sysroot (None when absent)."""
    target = ctx.system.readlink(path)
    return os.path.basename(target) or None if target else None


def _sysfs_rate(ctx: ProbeContext, base: str) -> tuple[float | None, str | None]:
    """Link rate of a router / XDomain: per-lane speed x lanes, the slower direction."""
    rates: list[float] = []
    texts: list[str] = []
    for d in ("rx", "tx"):
        speed_text = _read(ctx, f"{base}/{d}_speed")
        lanes_text = _read(ctx, f"{base}/{d}_lanes")
        speed = parse_speed_gbps(speed_text)
        if speed is None:
            continue
        lanes = int(lanes_text) if lanes_text and lanes_text.isdigit() else 1
        rates.append(speed * lanes)
        texts.append(f"{d} {speed_text} x {lanes}")
    return (min(rates) if rates else None), ("; ".join(texts) or None)


def _probe_linux_sysfs(ctx: ProbeContext, facts: ThunderboltFacts) -> None:
    base = "/sys/bus/thunderbolt/devices"
    for entry in ctx.system.listdir(base):
        path = f"{base}/{entry}"
        uevent = _kv_lines(_read(ctx, f"{path}/uevent") or "")
        devtype = uevent.get("DEVTYPE", "")
        if not devtype:
            devtype = "thunderbolt_domain" if entry.startswith("domain") else ""
        if devtype == "thunderbolt_domain":
            port = ThunderboltPort(name=entry, kind="domain")
            sec = _read(ctx, f"{path}/security")
            port.link_status = f"security={sec}" if sec else None
            facts.ports.append(port)
            continue
        if devtype not in ("thunderbolt_device", "thunderbolt_xdomain"):
            continue  # services, retimers
        is_host = devtype == "thunderbolt_device" and re.fullmatch(r"\d+-0", entry) is not None
        port = ThunderboltPort(name=entry, kind="xdomain" if devtype == "thunderbolt_xdomain" else ("host" if is_host else "device"))
        m = re.match(r"(\d+)-", entry)
        port.domain_uuid = f"domain{m.group(1)}" if m else None
        gen = _read(ctx, f"{path}/generation")
        port.generation = _SYSFS_GENERATION.get(gen or "")
        rate, text = _sysfs_rate(ctx, path)
        port.speed_text = text
        if is_host:
            port.peer_model = _read(ctx, f"{path}/device_name")
            port.peer_vendor = _read(ctx, f"{path}/vendor_name")
        else:
            port.connected = True
            port.link_speed_gbps = rate
            if port.generation is None:
                port.generation = _generation_for(rate)
            port.peer = _read(ctx, f"{path}/device_name")
            port.peer_model = port.peer
            port.peer_vendor = _read(ctx, f"{path}/vendor_name")
            port.peer_uuid = _read(ctx, f"{path}/unique_id")
        facts.ports.append(port)
    if facts.ports:
        facts.sources["ports"] = base


def _probe_linux_net(ctx: ProbeContext, facts: ThunderboltFacts) -> None:
    base = "/sys/class/net"
    inet6: dict[str, list[str]] | None = None
    for name in ctx.system.listdir(base):
        iface = _linux_net_interface(ctx, facts, f"{base}/{name}", name)
        if iface is None:
            continue
        if inet6 is None:
            inet6 = parse_proc_if_inet6(_read(ctx, "/proc/net/if_inet6") or "")
        iface.addresses.extend(inet6.get(name, []))
        facts.interfaces.append(iface)
    if facts.interfaces:
        facts.sources["interfaces"] = f"{base}/*/device (driver thunderbolt-net)"
    # A single XDomain peer and a single interface: that is the link the interface rides on.
    xdomains = [p for p in facts.ports if p.kind == "xdomain"]
    loose = [i for i in facts.interfaces if i.tb_port is None]
    if len(xdomains) == 1 and len(facts.interfaces) == 1 and loose:
        loose[0].tb_port = xdomains[0].name
    for iface in facts.interfaces:
        for p in facts.ports:
            if p.name == iface.tb_port:
                p.interface = iface.name


def _linux_net_interface(ctx: ProbeContext, facts: ThunderboltFacts, path: str, name: str) -> NetInterface | None:
    """The net device at ``path`` when thunderbolt-net drives it: its state, MTU, MAC, speed and XDomain port."""
    uevent = _kv_lines(_read(ctx, f"{path}/device/uevent") or "")
    driver = uevent.get("DRIVER") or _link_basename(ctx, f"{path}/device/driver")
    if driver not in ("thunderbolt-net", "thunderbolt_net"):
        return None
    iface = NetInterface(name=name, kind="thunderbolt", driver=driver)
    iface.status = _read(ctx, f"{path}/operstate")
    iface.up = iface.status == "up" if iface.status in ("up", "down", "lowerlayerdown", "dormant", "notpresent") else None
    mtu = _read(ctx, f"{path}/mtu")
    iface.mtu = int(mtu) if mtu and mtu.isdigit() else None
    iface.mac = _read(ctx, f"{path}/address")
    speed = _read(ctx, f"{path}/speed")
    iface.speed_mbps = int(speed) if speed and speed.isdigit() and int(speed) > 0 else None
    # The net device's parent is an XDomain service ("0-1.0"); its XDomain is "0-1".
    svc = _link_basename(ctx, f"{path}/device")
    if svc:
        xd = svc.split(".")[0]
        if any(p.name == xd for p in facts.ports):
            iface.tb_port = xd
    return iface


def _probe_linux(ctx: ProbeContext, facts: ThunderboltFacts) -> None:
    _probe_linux_sysfs(ctx, facts)
    _probe_linux_net(ctx, facts)
    if facts.interfaces and not ctx.system.moved:
        # IPv4 is not in sysfs; under a moved sysroot the live addresses are not the replayed machine's.
        r = ctx.system.run(["ip", "-j", "addr", "show"], timeout=ctx.timeout_s)
        if r.ok:
            addrs = parse_ip_addr_json(r.stdout)
            for iface in facts.interfaces:
                found = addrs.get(iface.name)
                if found:
                    iface.addresses = found  # ip lists v4 and v6
            facts.sources["addresses"] = "ip -j addr show"
        elif r.status != "absent":
            facts.tool_errors["ip"] = r.describe_failure()
    if ctx.system.which("boltctl"):
        r = ctx.system.run(["boltctl", "list"], timeout=ctx.timeout_s)
        if r.ok:
            known = {p.peer_uuid for p in facts.ports if p.peer_uuid}
            for dev in parse_boltctl(r.stdout):
                if dev.peer_uuid not in known:
                    facts.ports.append(dev)
            facts.sources["boltctl"] = "boltctl list"
        elif r.status != "absent":
            facts.tool_errors["boltctl"] = r.describe_failure()


# ============================================================================ macOS


@dataclass
class MacOutputs:
    """The raw outputs the macOS path reads (None: the tool did not answer)."""

    system_profiler: str | None = None
    networksetup: str | None = None
    ifconfig: str | None = None
    rdma_ctl: str | None = None
    ibv_devices: str | None = None


def assemble_macos(out: MacOutputs) -> ThunderboltFacts:
    """Pure: the recorded macOS outputs -> :class:`ThunderboltFacts` (used by the probe and by replays)."""
    facts = ThunderboltFacts()
    hw, live = _mac_outputs(facts, out)

    tb = [i for i in hw if i.kind in ("thunderbolt", "thunderbolt-bridge")]
    tb_devices = {i.name for i in tb if i.kind == "thunderbolt"}
    # Without networksetup, bridge0 is still the Thunderbolt Bridge macOS creates (other bridges,
    # e.g. bridge100 for VMs and Internet Sharing, are not: c51).
    if out.networksetup is None and "bridge0" in live:
        tb.append(NetInterface(name="bridge0", kind="thunderbolt-bridge", hardware_port=None))
    by_receptacle = {p.receptacle: p for p in facts.ports if p.receptacle}
    for iface in tb:
        _mac_interface(facts, iface, live.get(iface.name), by_receptacle)
    facts.interfaces = tb

    bridge = next((i for i in tb if i.name == "bridge0"), None)
    if out.ifconfig is not None:
        if bridge is None or "bridge0" not in live:
            facts.bridge_enabled = False
        else:
            members_tb = [m for m in bridge.members if (m in tb_devices or out.networksetup is None)]
            facts.bridge_enabled = bool(bridge.up and members_tb)
    facts.present = bool(facts.ports or any(i.kind == "thunderbolt" for i in tb) or bridge is not None)
    return facts


def _mac_outputs(facts: ThunderboltFacts, out: MacOutputs) -> tuple[list[NetInterface], dict[str, NetInterface]]:
    """Each recorded output parsed into ``facts`` (ports, RDMA devices and state), with its source; the hardware
    ports networksetup lists and the interfaces ifconfig shows."""
    if out.system_profiler is not None:
        facts.ports = parse_system_profiler(out.system_profiler)
        facts.sources["ports"] = "system_profiler SPThunderboltDataType -json"
    hw = parse_networksetup_hardware_ports(out.networksetup or "")
    if out.networksetup is not None:
        facts.sources["interfaces"] = "networksetup -listallhardwareports"
    live = parse_ifconfig(out.ifconfig or "")
    if out.ifconfig is not None:
        facts.sources["bridge_enabled"] = "ifconfig"
    if out.ibv_devices is not None:
        facts.rdma_devices = parse_ibv_devices(out.ibv_devices)
        facts.sources["rdma_devices"] = "ibv_devices"
    if out.rdma_ctl is not None:
        facts.rdma_state = parse_rdma_ctl_status(out.rdma_ctl)
        facts.sources["rdma_state"] = "rdma_ctl status"
    return hw, live


def _mac_interface(facts: ThunderboltFacts, iface: NetInterface, seen: NetInterface | None, by_receptacle: dict[str, ThunderboltPort]) -> None:
    """A Thunderbolt interface with what ifconfig shows of it, its port (by receptacle) and its RDMA device."""
    if seen is not None:
        iface.up, iface.status, iface.mtu = seen.up, seen.status, seen.mtu
        iface.addresses = list(seen.addresses)
        iface.members = list(seen.members)
        iface.mac = iface.mac or seen.mac
    if iface.kind == "thunderbolt":
        m = _TB_PORT_RE.match(iface.hardware_port or "")
        port = by_receptacle.get(m.group(1)) if m else None
        if port is not None:
            iface.tb_port = port.name
            port.interface = iface.name
        rdma = f"rdma_{iface.name}"
        if rdma in facts.rdma_devices:
            iface.rdma_device = rdma


def _run_all(ctx: ProbeContext, argvs: dict[str, list[str]]) -> dict[str, CommandResult]:
    """Run the independent tools concurrently: the probe takes as long as the slowest one."""
    with ThreadPoolExecutor(max_workers=len(argvs), thread_name_prefix="tb") as pool:
        futs = {k: pool.submit(ctx.system.run, argv, timeout=ctx.timeout_s) for k, argv in argvs.items()}
        return {k: f.result() for k, f in futs.items()}


MAC_TOOLS: dict[str, list[str]] = {
    "system_profiler": ["system_profiler", "SPThunderboltDataType", "-json"],
    "networksetup": ["networksetup", "-listallhardwareports"],
    "ifconfig": ["ifconfig"],
    "rdma_ctl": ["rdma_ctl", "status"],
    "ibv_devices": ["ibv_devices"],
}


def probe_macos(ctx: ProbeContext) -> ThunderboltFacts:
    """Run the macOS tools (each may be absent) and assemble the facts."""
    results = _run_all(ctx, MAC_TOOLS)
    outs = MacOutputs()
    errors: dict[str, str] = {}
    for key, r in results.items():
        if r.ok:
            setattr(outs, key, r.stdout)
        elif r.status == "absent":
            continue
        elif key == "rdma_ctl" and r.status == "ok" and parse_rdma_ctl_status(r.stdout + "\n" + r.stderr):
            setattr(outs, key, r.stdout + "\n" + r.stderr)  # a state printed with a non-zero exit is still a state
        else:
            errors[key] = r.describe_failure()
    facts = assemble_macos(outs)
    facts.tool_errors.update(errors)
    return facts


# ============================================================================ probe


def probe(ctx: ProbeContext) -> ProbeOutput:
    """Thunderbolt facts for this machine; never raises."""
    try:
        system_name = ctx.system.host().system
        if system_name == "Darwin":
            facts = probe_macos(ctx)
        elif system_name == "Windows":
            facts = ThunderboltFacts()
        else:
            facts = ThunderboltFacts()
            _probe_linux(ctx, facts)
            facts.present = bool(facts.ports or facts.interfaces)
    except Exception as exc:  # a parser bug must not cost the rest of the report
        return ProbeOutput(
            facts={"thunderbolt": ThunderboltFacts()},
            status="error",
            error=f"thunderbolt probe failed: {type(exc).__name__}: {exc}",
        )
    return ProbeOutput(facts={"thunderbolt": facts})
