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

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from stackdoctor.model.links import NetInterface, ThunderboltFacts, ThunderboltPort
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.probes.thunderbolt_link import choose_thunderbolt_interface, link_rate_gbps  # re-exported (__all__): commands/kernels imports them from here
from stackdoctor.probes.thunderbolt_parse import (  # the parsers: re-exported (__all__), tests name them thunderbolt.parse_*
    TB_PORT_RE,
    generation_for,
    parse_boltctl,
    parse_ibv_devices,
    parse_ifconfig,
    parse_ip_addr_json,
    parse_networksetup_hardware_ports,
    parse_proc_if_inet6,
    parse_rdma_ctl_status,
    parse_speed_gbps,
    parse_system_profiler,
    parse_system_profiler_json,
    parse_system_profiler_text,
)
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

# sysfs "generation" of a router: 1-3 = Thunderbolt 1-3, 4 = USB4 (Documentation/ABI/testing/sysfs-bus-thunderbolt).
_SYSFS_GENERATION = {"1": "TB1", "2": "TB2", "3": "TB3", "4": "USB4"}


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
                port.generation = generation_for(rate)
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
        m = TB_PORT_RE.match(iface.hardware_port or "")
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
