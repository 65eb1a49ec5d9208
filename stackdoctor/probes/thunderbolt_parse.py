"""Thunderbolt's text parsers: pure functions of a tool's output (``system_profiler``, ``networksetup``,
``ifconfig``, ``rdma_ctl``, ``ibv_devices``, ``boltctl``, ``/proc/net/if_inet6``, ``ip -j addr``) to facts.

They never raise and import nothing of the gathering code in :mod:`stackdoctor.probes.thunderbolt`, which
re-exports them (tests and callers name them ``thunderbolt.parse_*``). :func:`generation_for` and
:data:`TB_PORT_RE` are public because the gathering code uses them too.
See ``../shared/reference/thunderbolt.md`` for the sources behind each rule.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from stackdoctor.model.links import NetInterface, ThunderboltPort

# exo PR #1813: "TB4 devices (<=40 Gb/s) don't support RDMA"; > 40 Gb/s negotiated means Thunderbolt 5.
TB5_MIN_GBPS = 40.0
# c25 (exo#1390): the peer's "Service: Unknown" with "Service Key: rdma" has "Protocol ID: 64087";
# the same protocol id appears in -json captures where service_key_key is not readable text.
RDMA_SERVICE_PROTOCOL_ID = 64087

_NUM = r"(\d+(?:\.\d+)?)"
_SPEED_RE = re.compile(_NUM + r"\s*([GM])b(?:it)?/?s", re.IGNORECASE)
_MULT_RE = re.compile(r"[x\u00d7*]\s*(\d+)\b", re.IGNORECASE)
TB_PORT_RE = re.compile(r"^Thunderbolt (\d+)$")


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


def generation_for(gbps: float | None) -> str | None:
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
        port.generation = generation_for(gbps)
    elif upto and port.generation is None:
        port.generation = generation_for(gbps)


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
            if TB_PORT_RE.match(port):
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

