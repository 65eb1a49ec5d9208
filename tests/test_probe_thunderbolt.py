"""Thunderbolt probe: parsers on real captures, the probe on a SYSROOT and on fake macOS tools,
and the interface choice for ``kernels allreduce --over thunderbolt``.

Real captures: c22 (boltctl), c25 (system_profiler text), c51 (ifconfig), and the ``tb-*`` folders
(system_profiler -json from both ends of a TB5 link; a networksetup listing). Synthetic samples are in
``tests/fixtures/thunderbolt/`` and named as such.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.model.facts import from_data, to_data
from stackdoctor.model.links import ThunderboltFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.probes import thunderbolt as tb
from stackdoctor.probes.thunderbolt import (
    MacOutputs,
    assemble_macos,
    choose_thunderbolt_interface,
    link_rate_gbps,
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
from stackdoctor.system import Host, System

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "real"
SYN = FIX / "thunderbolt"
C22 = REAL / "c22-linux-boltctl-razer-core-tb3-egpu"
C25 = REAL / "c25-macmini-to-macstudio-tb5-rdma-system_profiler"
C51 = REAL / "c51-intel-mac-t2-ifconfig-bridge0-4-thunderbolt-ports"
OMLX = REAL / "tb-macbook-m5max-to-studio-m3ultra-tb5-system_profiler-json"
NETSETUP = REAL / "tb-macbook-networksetup-two-thunderbolt-ports"
LINUX_ROOT = SYN / "synthetic-linux-xdomain-sysroot"
PER_PORT = SYN / "synthetic-macos-tb5-per-port"
BRIDGE = SYN / "synthetic-macos-bridge-active"


def read(p: Path) -> str:
    return p.read_text(encoding="utf-8")


def ctx_for(sysroot: str = "/", path: str | None = None, timeout: float = 5.0, host: str | None = None) -> ProbeContext:
    """A probe context; ``host`` injects the OS identity (``System(host_override=Host(...))``), no monkeypatching."""
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    system = System(sysroot=sysroot, env=env, timeout_s=timeout, host_override=Host(system=host, source="test") if host else None)
    return ProbeContext(system=system, target=Target(sys.executable, "self"), timeout_s=timeout)


def by_name(ports, name):
    return next(p for p in ports if p.name == name)


# ============================================================================ real captures


def test_c25_text_link_is_tb5_at_80_with_rdma_peer():
    ports = parse_system_profiler(read(C25 / "system_profiler_thunderbolt.txt"))
    assert [p.name for p in ports] == ["Thunderbolt/USB4 Bus 2", "Thunderbolt/USB4 Bus 1"]
    bus2 = ports[0]
    assert bus2.link_status == "Device connected" and bus2.connected is True
    assert bus2.link_speed_gbps == 80.0 and bus2.generation == "TB5"
    assert bus2.receptacle == "3"
    assert bus2.domain_uuid == "7F158861-C131-4D0D-83B6-CA50EF76C32B"
    assert bus2.peer == "Mac Studio" and bus2.peer_model == "Mac16,9"
    assert bus2.peer_uuid == "88F10ACA-5CAA-4F5D-8361-03EED54ACB5A"
    assert bus2.peer_services == ["ip", "rdma"]
    # Bus 1 is cut off at "Status:" in the source: unknown, not invented.
    bus1 = ports[1]
    assert bus1.domain_uuid == "0A3248FD-13DA-4F5B-9167-7C469F35421C"
    assert bus1.connected is None and bus1.link_speed_gbps is None and bus1.peer is None


def test_c22_boltctl_razer_core_tb3():
    (dev,) = parse_boltctl(read(C22 / "boltctl.txt"))
    assert dev.name == "Razer Core" and dev.peer_model == "Core" and dev.peer_vendor == "Razer"
    assert dev.kind == "device" and dev.generation == "TB3"
    assert dev.link_status == "authorized" and dev.connected is True
    assert dev.peer_uuid == "c0030000-00a2-8508-2219-f4d4d2c1a918"
    assert dev.domain_uuid == "c6030000-0080-7518-2391-a4e51a82e819"
    assert dev.link_speed_gbps == 40.0
    assert dev.speed_text == "40 Gb/s = 2 lanes * 20 Gb/s"


def test_c51_ifconfig_bridge0_members_inactive_and_bridge100_is_not_thunderbolt():
    text = read(C51 / "ifconfig.txt")
    ifs = parse_ifconfig(text)
    b0 = ifs["bridge0"]
    assert b0.members == ["en1", "en2", "en3", "en4"]
    assert b0.status == "inactive" and b0.up is False
    assert not any("." in a and ":" not in a for a in b0.addresses)  # no IPv4
    b100 = ifs["bridge100"]
    assert b100.members == ["en10"] and b100.status == "active" and b100.addresses == ["192.168.64.1/24"]
    assert ifs["en8"].addresses == ["fe80::1021:c9d1:2cf6:656d/64"]

    facts = assemble_macos(MacOutputs(ifconfig=text))
    assert facts.bridge_enabled is False
    names = [i.name for i in facts.interfaces]
    assert names == ["bridge0"] and "bridge100" not in names
    assert facts.interfaces[0].members == ["en1", "en2", "en3", "en4"]
    assert facts.present is True
    assert choose_thunderbolt_interface(facts) is None  # nothing Thunderbolt is up with an address


def test_omlx_json_macbook_one_cabled_bus_tb5():
    ports = parse_system_profiler_json(read(OMLX / "macbook.json"))
    assert len(ports) == 3
    cabled = by_name(ports, "thunderboltusb4_bus_0")
    assert cabled.connected is True and cabled.link_status == "receptacle_connected"
    assert cabled.link_speed_gbps == 80.0 and cabled.generation == "TB5" and cabled.receptacle == "1"
    assert cabled.domain_uuid == "817DCFA4-B481-4100-80FC-91C7AA969F0B"
    assert cabled.peer == "Mac Studio" and cabled.peer_model == "Mac15,14"
    assert cabled.peer_uuid == "28CA4C30-A263-4C55-B302-953416D0B209"
    assert cabled.peer_services == ["ip"]
    idle = by_name(ports, "thunderboltusb4_bus_2")
    # "Up to 120 Gb/s" on an empty port is what the port can do, not a link.
    assert idle.connected is False and idle.link_speed_gbps is None and idle.max_speed_gbps == 120.0
    assert idle.peer is None and idle.receptacle == "3"


def test_omlx_json_studio_drive_is_not_a_host_peer_and_rdma_service_by_protocol_id():
    ports = parse_system_profiler_json(read(OMLX / "studio.json"))
    assert len(ports) == 6
    link = by_name(ports, "thunderboltusb4_bus_1")
    assert link.peer == "MacBook Pro" and link.peer_model == "Mac17,7"
    assert link.peer_uuid == "817DCFA4-B481-4100-80FC-91C7AA969F0B"
    assert link.peer_services == ["ip", "rdma"]  # protocol 64087, the key itself is unreadable here
    drive = by_name(ports, "thunderboltusb4_bus_3")
    assert drive.peer == "Envoy Ultra" and drive.peer_uuid is None
    assert drive.peer_vendor == "Other World Computing"
    hosts = [p for p in ports if p.peer_uuid]
    assert [p.name for p in hosts] == ["thunderboltusb4_bus_1"]


def test_two_ends_of_the_omlx_link_name_each_other():
    mb = {p.domain_uuid: p for p in parse_system_profiler_json(read(OMLX / "macbook.json"))}
    sd = {p.domain_uuid: p for p in parse_system_profiler_json(read(OMLX / "studio.json"))}
    a = next(p for p in mb.values() if p.peer_uuid)
    assert a.peer_uuid in sd and sd[a.peer_uuid].peer_uuid == a.domain_uuid


def test_networksetup_real_listing():
    ifs = parse_networksetup_hardware_ports(read(NETSETUP / "networksetup.txt"))
    kinds = {i.name: (i.hardware_port, i.kind) for i in ifs}
    assert kinds["en1"] == ("Thunderbolt 1", "thunderbolt")
    assert kinds["en2"] == ("Thunderbolt 2", "thunderbolt")
    assert kinds["bridge0"] == ("Thunderbolt Bridge", "thunderbolt-bridge")
    assert kinds["en0"] == ("Wi-Fi", "other") and kinds["en5"] == ("iPhone USB", "other")
    assert next(i for i in ifs if i.name == "en1").mac == "82:f1:30:25:50:01"


def test_thunderbolt_ethernet_adapter_is_not_a_thunderbolt_link():
    (i,) = parse_networksetup_hardware_ports("Hardware Port: Thunderbolt Ethernet\nDevice: en3\nEthernet Address: 00:00:5e:00:53:aa\n")
    assert i.kind == "ethernet"


# ============================================================================ small parsers


@pytest.mark.parametrize(
    "text,expected",
    [
        ("80 Gb/s", 80.0),
        ("Up to 120 Gb/s", 120.0),
        ("Up to 80 Gb/s x1", 80.0),
        ("40 Gb/s", 40.0),
        ("20.0 Gb/s", 20.0),
        ("40 Gb/s = 2 lanes * 20 Gb/s", 40.0),
        ("500 Mb/s", 0.5),
        ("", None),
        ("fast", None),
    ],
)
def test_parse_speed(text, expected):
    assert parse_speed_gbps(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [("enabled\n", "enabled"), ("disabled\n", "disabled"), ("RDMA is not enabled", "disabled"), ("", None), ("???", None)],
)
def test_rdma_ctl_status(text, expected):
    assert parse_rdma_ctl_status(text) == expected


def test_ibv_devices_real_m3_ultra_listing():
    text = read(REAL / "tb-mlx-docs-m3ultra-ibv_devices" / "ibv_devices.txt")
    expected = ["rdma_en2", "rdma_en3", "rdma_en5", "rdma_en4", "rdma_en6", "rdma_en7"]
    assert parse_ibv_devices(text) == expected
    # rdma-core's own layout: four leading spaces, a tab between the columns.
    indented = "\n".join("    " + line.replace("            ", "\t", 1) for line in text.splitlines())
    assert parse_ibv_devices(indented) == expected


def test_ibv_devices():
    assert parse_ibv_devices(read(PER_PORT / "ibv_devices.txt")) == ["rdma_en1", "rdma_en2", "rdma_en3"]
    assert parse_ibv_devices("    device          \t   node GUID\n    ------          \t----------------\n") == []


def test_proc_if_inet6_and_ip_json():
    six = parse_proc_if_inet6(read(LINUX_ROOT / "proc/net/if_inet6"))
    assert six["thunderbolt0"] == ["fe80::5f:ffff:fe01:203/64"]
    j = '[{"ifindex":5,"ifname":"thunderbolt0","addr_info":[{"family":"inet","local":"169.254.31.7","prefixlen":16}]}]'
    assert parse_ip_addr_json(j) == {"thunderbolt0": ["169.254.31.7/16"]}
    assert parse_ip_addr_json("not json") == {}


# ============================================================================ macOS assembly and choice


def per_port_outputs(**over) -> MacOutputs:
    base = dict(
        system_profiler=read(OMLX / "macbook.json"),
        networksetup=read(PER_PORT / "networksetup.txt"),
        ifconfig=read(PER_PORT / "ifconfig.txt"),
        rdma_ctl=read(PER_PORT / "rdma_ctl.txt"),
        ibv_devices=read(PER_PORT / "ibv_devices.txt"),
    )
    base.update(over)
    return MacOutputs(**base)


def test_macos_per_port_rdma_setup_chooses_en1_at_80():
    facts = assemble_macos(per_port_outputs())
    assert facts.present is True and facts.rdma_state == "enabled"
    assert facts.rdma_devices == ["rdma_en1", "rdma_en2", "rdma_en3"]
    assert facts.bridge_enabled is False  # no bridge0 at all after the RDMA set-up
    en1 = next(i for i in facts.interfaces if i.name == "en1")
    assert en1.tb_port == "thunderboltusb4_bus_0" and en1.rdma_device == "rdma_en1"
    assert by_name(facts.ports, "thunderboltusb4_bus_0").interface == "en1"
    assert "en0" not in [i.name for i in facts.interfaces]  # plain Ethernet is not a Thunderbolt interface
    chosen = choose_thunderbolt_interface(facts)
    assert chosen is not None and chosen.name == "en1"
    assert link_rate_gbps(facts, chosen) == 80.0


def test_macos_without_en1_address_falls_back_to_link_local_en2_with_unknown_rate():
    ifc = read(PER_PORT / "ifconfig.txt").replace("\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\n", "")
    facts = assemble_macos(per_port_outputs(ifconfig=ifc))
    chosen = choose_thunderbolt_interface(facts)
    assert chosen is not None and chosen.name == "en2"
    # en2 is "Thunderbolt 2" -> receptacle 2 -> an empty bus: its capability is not a link rate.
    assert link_rate_gbps(facts, chosen) is None


def test_macos_active_bridge_is_enabled_and_chosen_with_member_rate():
    facts = assemble_macos(
        MacOutputs(
            system_profiler=read(OMLX / "macbook.json"),
            networksetup=read(BRIDGE / "networksetup.txt"),
            ifconfig=read(BRIDGE / "ifconfig.txt"),
        )
    )
    assert facts.bridge_enabled is True
    chosen = choose_thunderbolt_interface(facts)
    assert chosen is not None and chosen.name == "bridge0" and chosen.addresses == ["169.254.10.20/16"]
    assert link_rate_gbps(facts, chosen) == 80.0  # member en1 -> Thunderbolt 1 -> bus_0 at 80 Gb/s
    assert facts.rdma_state is None and facts.rdma_devices == []


def test_bridge_with_non_thunderbolt_members_is_not_the_thunderbolt_bridge():
    ifc = read(BRIDGE / "ifconfig.txt").replace("member: en1", "member: en7").replace("member: en2", "member: en8")
    facts = assemble_macos(MacOutputs(networksetup=read(BRIDGE / "networksetup.txt"), ifconfig=ifc))
    assert facts.bridge_enabled is False


def test_macos_facts_round_trip_through_the_report():
    facts = assemble_macos(per_port_outputs())
    assert from_data(ThunderboltFacts, to_data(facts)) == facts


# ============================================================================ probe: macOS tools (fake, replaying outputs)


def add_mac_tools(fake_bin, **over):
    outs = {
        "system_profiler": read(OMLX / "macbook.json"),
        "networksetup": read(PER_PORT / "networksetup.txt"),
        "ifconfig": read(PER_PORT / "ifconfig.txt"),
        "rdma_ctl": read(PER_PORT / "rdma_ctl.txt"),
        "ibv_devices": read(PER_PORT / "ibv_devices.txt"),
    }
    for name, text in outs.items():
        spec = over.get(name, {"stdout": text})
        if spec is None:
            continue
        fake_bin(name, **spec)


def mac_path(fake_bin) -> str:
    for t in ("system_profiler", "networksetup", "ifconfig", "rdma_ctl", "ibv_devices"):
        if shutil.which(t, path="/usr/bin:/bin"):
            pytest.skip(f"a real {t} is on /usr/bin:/bin")
    return f"{fake_bin.dir}:/usr/bin:/bin"


def test_probe_on_darwin_runs_the_mac_tools(fake_bin, monkeypatch):
    add_mac_tools(fake_bin)
    out = tb.probe(ctx_for(host="Darwin", path=mac_path(fake_bin)))
    assert out.status == "ok"
    facts = out.facts["thunderbolt"]
    assert facts.present and facts.rdma_state == "enabled" and facts.tool_errors == {}
    assert choose_thunderbolt_interface(facts).name == "en1"


def test_probe_mac_absent_tools_are_facts_and_failures_are_errors(fake_bin, monkeypatch):
    add_mac_tools(
        fake_bin,
        rdma_ctl=None,
        ibv_devices=None,
        networksetup={"stdout": "", "stderr": "** Error: something broke.", "rc": 4},
    )
    facts = tb.probe(ctx_for(host="Darwin", path=mac_path(fake_bin))).facts["thunderbolt"]
    assert facts.rdma_state is None and facts.rdma_devices == []
    assert set(facts.tool_errors) == {"networksetup"}
    assert "exited with code 4" in facts.tool_errors["networksetup"]
    assert len(facts.ports) == 3  # system_profiler still read


def test_probe_mac_hung_tool_is_bounded(fake_bin, monkeypatch):
    add_mac_tools(fake_bin, system_profiler={"script": "sleep 30\n"})
    start = time.monotonic()
    facts = tb.probe(ctx_for(host="Darwin", path=mac_path(fake_bin), timeout=1.0)).facts["thunderbolt"]
    assert time.monotonic() - start < 15  # generous: the tools run concurrently, each bounded by 1 s
    assert "did not answer" in facts.tool_errors["system_profiler"]
    assert facts.ports == [] and facts.rdma_state == "enabled"


# ============================================================================ probe: Linux sysfs


def test_linux_sysroot_xdomain_and_thunderbolt_net(fake_bin, monkeypatch):
    marker = fake_bin.dir / "ip-was-run"
    fake_bin("ip", script=f"touch {marker}\necho '[]'\n")
    out = tb.probe(ctx_for(host="Linux", sysroot=str(LINUX_ROOT), path=f"{fake_bin.dir}:/usr/bin:/bin"))
    facts = out.facts["thunderbolt"]
    assert out.status == "ok" and facts.present is True
    dom = by_name(facts.ports, "domain0")
    assert dom.kind == "domain" and dom.link_status == "security=user"
    host = by_name(facts.ports, "0-0")
    assert host.kind == "host" and host.generation == "TB3" and host.connected is None
    peer = by_name(facts.ports, "0-1")
    assert peer.kind == "xdomain" and peer.connected is True
    assert peer.peer == "synthetic-peer" and peer.peer_uuid == "11111111-2222-3333-4444-555555555555"
    assert peer.link_speed_gbps == 40.0  # 2 lanes x 20.0 Gb/s
    assert [p.name for p in facts.ports if p.name == "0-1.1"] == []  # a service, not a link
    (iface,) = facts.interfaces  # eth0 (e1000e) is not Thunderbolt
    assert iface.name == "thunderbolt0" and iface.driver == "thunderbolt-net" and iface.up is True
    assert iface.mtu == 1500 and iface.mac == "02:5f:01:02:03:04"
    assert iface.addresses == ["fe80::5f:ffff:fe01:203/64"]  # IPv6 from /proc; no IPv4 under a moved root
    assert iface.tb_port == "0-1" and peer.interface == "thunderbolt0"
    assert not marker.exists()  # the live `ip` is not the replayed machine's
    chosen = choose_thunderbolt_interface(facts)
    assert chosen is not None and chosen.name == "thunderbolt0"
    assert link_rate_gbps(facts, chosen) == 40.0


def test_linux_driver_symlink_maps_interface_to_its_xdomain(tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(LINUX_ROOT, root)
    devs = root / "sys/bus/thunderbolt/devices"
    # A second XDomain peer, so the interface must be mapped by its device link, not by "the only one".
    shutil.copytree(devs / "0-1", devs / "0-3")
    (devs / "0-3/rx_lanes").write_text("1\n")
    (devs / "0-3/tx_lanes").write_text("1\n")
    shutil.copytree(devs / "0-1.1", devs / "0-3.1")
    drv = root / "sys/bus/thunderbolt/drivers/thunderbolt-net"
    drv.mkdir(parents=True)
    (devs / "0-3.1/uevent").write_text("DEVTYPE=thunderbolt_service\n")
    os.symlink("../../../bus/thunderbolt/drivers/thunderbolt-net", devs / "0-3.1/driver")
    net = root / "sys/class/net/thunderbolt0"
    shutil.rmtree(net / "device")
    os.symlink("../../../bus/thunderbolt/devices/0-3.1", net / "device")
    facts = tb.probe(ctx_for(host="Linux", sysroot=str(root), path="/usr/bin:/bin")).facts["thunderbolt"]
    (iface,) = facts.interfaces
    assert iface.driver == "thunderbolt-net"  # from the driver link: the uevent has no DRIVER=
    assert iface.tb_port == "0-3"
    assert link_rate_gbps(facts, iface) == 20.0  # 1 lane x 20.0 Gb/s, not 0-1's 40


def test_linux_interface_down_is_not_chosen(tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(LINUX_ROOT, root)
    (root / "sys/class/net/thunderbolt0/operstate").write_text("down\n")
    facts = tb.probe(ctx_for(host="Linux", sysroot=str(root), path="/usr/bin:/bin")).facts["thunderbolt"]
    assert facts.interfaces[0].up is False
    assert choose_thunderbolt_interface(facts) is None


def test_linux_empty_sysroot_is_absent_not_error(tmp_path, monkeypatch):
    out = tb.probe(ctx_for(host="Linux", sysroot=str(tmp_path), path="/usr/bin:/bin"))
    assert out.status == "ok"
    facts = out.facts["thunderbolt"]
    assert facts.present is False and facts.ports == [] and facts.interfaces == [] and facts.tool_errors == {}


def test_linux_boltctl_adds_devices_and_its_failure_is_recorded(tmp_path, fake_bin, monkeypatch):
    fake_bin("boltctl", stdout=read(C22 / "boltctl.txt"))
    facts = tb.probe(ctx_for(host="Linux", sysroot=str(tmp_path), path=f"{fake_bin.dir}:/usr/bin:/bin")).facts["thunderbolt"]
    assert facts.present is True and [p.peer_model for p in facts.ports] == ["Core"]
    fake_bin("boltctl", stderr="boltctl: error: could not connect to bolt daemon", rc=1)
    facts = tb.probe(ctx_for(sysroot=str(tmp_path), path=f"{fake_bin.dir}:/usr/bin:/bin")).facts["thunderbolt"]
    assert facts.ports == [] and "could not connect" in facts.tool_errors["boltctl"]


# ============================================================================ never raise


PARSERS = [
    parse_system_profiler,
    parse_system_profiler_json,
    parse_system_profiler_text,
    parse_networksetup_hardware_ports,
    parse_ifconfig,
    parse_rdma_ctl_status,
    parse_ibv_devices,
    parse_boltctl,
    parse_proc_if_inet6,
    parse_ip_addr_json,
    parse_speed_gbps,
]


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_parsers_never_raise_on_text(text):
    for parse in PARSERS:
        parse(text)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(
        st.sampled_from(["_items", "_name", "domain_uuid_key", "receptacle_1_tag", "current_speed_key",
                         "receptacle_status_key", "receptacle_id_key", "services_title", "service_key_key",
                         "protocol_id_key", "device_name_key", "SPThunderboltDataType", "ifname", "addr_info",
                         "local", "prefixlen"]) | st.text(max_size=5),
        kids,
        max_size=5,
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_json_parsers_never_raise_on_any_json_shape(value):
    import json

    for doc in (value, {"SPThunderboltDataType": value}, {"SPThunderboltDataType": [value]}):
        text = json.dumps(doc)
        parse_system_profiler_json(text)
        parse_ip_addr_json(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([
    "Thunderbolt/USB4:", "    Thunderbolt/USB4 Bus 0:", "      Port:", "          Status: Device connected",
    "          Speed: Up to 40 Gb/s x1", "        Peer:", "          Domain UUID: X", "          Services:",
    "            Service: Unknown:", "              Service Key: rdma", "bridge0: flags=8863<UP> mtu 1500",
    "\tmember: en1 flags=3<>", "\tstatus: active", "\tinet 169.254.1.1 netmask 0xzz", "Hardware Port: Thunderbolt 1",
    "Device: en1", "", ":", "   :", " ● x", "   ├─ rx speed: Gb/s",
]), max_size=30))
def test_structured_fragments_never_raise(lines):
    text = "\n".join(lines)
    for parse in PARSERS:
        parse(text)
    assemble_macos(MacOutputs(system_profiler=text, networksetup=text, ifconfig=text, rdma_ctl=text, ibv_devices=text))


def test_rdma_capable_interface_wins_over_one_without_rdma():
    ifc = read(PER_PORT / "ifconfig.txt").replace("inet 169.254.7.9 netmask 0xffff0000 broadcast 169.254.255.255",
                                                   "inet 192.168.0.5 netmask 0xfffffffc broadcast 192.168.0.7")
    ibv = "    device          \t   node GUID\n    ------          \t----------------\n    rdma_en2        \t0000000000000000\n"
    facts = assemble_macos(per_port_outputs(ifconfig=ifc, ibv_devices=ibv))
    assert choose_thunderbolt_interface(facts).name == "en2"
    # Same addresses, every port RDMA-capable: the port with the cable wins, whatever its name.
    # (Swap the hardware ports so that en2 rides receptacle 1, the connected 80 Gb/s bus.)
    ns = read(PER_PORT / "networksetup.txt").replace("Device: en1", "Device: enX").replace("Device: en2", "Device: en1")
    ns = ns.replace("Device: enX", "Device: en2")
    facts = assemble_macos(per_port_outputs(ifconfig=ifc, networksetup=ns))
    chosen = choose_thunderbolt_interface(facts)
    assert chosen.name == "en2" and link_rate_gbps(facts, chosen) == 80.0


def test_probe_mac_rdma_state_printed_with_nonzero_exit_is_still_a_state(fake_bin, monkeypatch):
    add_mac_tools(fake_bin, rdma_ctl={"stdout": "disabled\n", "rc": 1}, ibv_devices={"stdout": ""})
    facts = tb.probe(ctx_for(host="Darwin", path=mac_path(fake_bin))).facts["thunderbolt"]
    assert facts.rdma_state == "disabled" and "rdma_ctl" not in facts.tool_errors
    assert facts.rdma_devices == []  # ibv_devices answered with nothing: no devices (a fact)
    assert next(i for i in facts.interfaces if i.name == "en1").rdma_device is None


def test_recorded_mac_replays_under_sysroot_through_the_cli(fake_bin, tmp_path):
    """A recorded Mac replays end to end with no monkeypatching: the captured tree's
    /.stackdoctor/host.json says Darwin, fake tools on PATH replay the recorded outputs, and the
    real probes (platform, apple, thunderbolt) run as they would on that Mac."""
    from helpers import machine_env, run_sd

    add_mac_tools(fake_bin)
    fake_bin("sw_vers", "ProductName:\t\tmacOS\nProductVersion:\t\t26.2\nBuildVersion:\t\t25C56\n")
    fake_bin("sysctl", script='case "$2" in\n  machdep.cpu.brand_string) echo "Apple M5 Max" ;;\n  hw.optional.arm64) echo 1 ;;\n  sysctl.proc_translated) echo 0 ;;\n  *) exit 1 ;;\nesac\n')
    root = tmp_path / "mac"
    (root / ".stackdoctor").mkdir(parents=True)
    (root / ".stackdoctor" / "host.json").write_text(json.dumps({"system": "Darwin", "machine": "arm64", "release": "25.2.0", "node": "macbook"}))
    r = run_sd(["check", "--json", "--no-kernels", "--python", sys.executable], env=machine_env(fake_bin.dir, root))
    assert r.rc in (0, 1), r.stderr
    facts = r.json()["facts"]
    assert facts["platform"]["system"] == "Darwin" and facts["platform"]["machine"] == "arm64"
    assert facts["platform"]["sources"]["system"].startswith("file:/.stackdoctor/host.json")
    assert facts["apple"]["is_macos"] is True and facts["apple"]["macos_version"] == "26.2" and facts["apple"]["arch"] == "arm64"
    tb = facts["thunderbolt"]
    assert tb["present"] is True and tb["rdma_state"] == "enabled" and tb["tool_errors"] == {}
    assert sorted(p["name"] for p in tb["ports"]) == ["thunderboltusb4_bus_0", "thunderboltusb4_bus_1", "thunderboltusb4_bus_2"]
    assert tb["rdma_devices"] == ["rdma_en1", "rdma_en2", "rdma_en3"]
