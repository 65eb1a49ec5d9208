"""What the Thunderbolt probe saw (``probes/thunderbolt*``): the ports and their links, the network interfaces riding
them, the bridge and RDMA (``Facts.thunderbolt``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ThunderboltPort:
    name: str  # "Thunderbolt 5 bus 0" / "domain0"
    generation: str | None = None  # "TB3" | "TB4" | "TB5"
    link_speed_gbps: float | None = None  # per direction, as the OS reports
    link_status: str | None = None
    peer: str | None = None  # peer device / host name
    peer_uuid: str | None = None
    domain_uuid: str | None = None
    receptacle: str | None = None
    kind: str | None = None  # "bus" (macOS) | "domain" | "host" | "device" | "xdomain" (Linux)
    connected: bool | None = None  # a cable with a device or host on the other end
    speed_text: str | None = None  # verbatim: "80 Gb/s", "Up to 120 Gb/s", "20.0 Gb/s x 2"
    max_speed_gbps: float | None = None  # port capability ("Up to 120 Gb/s"), not the negotiated link
    peer_model: str | None = None  # "Mac16,9"
    peer_vendor: str | None = None  # "Apple Inc." / "Razer"
    peer_services: list[str] = field(default_factory=list)  # XDomain services: "ip", "rdma", ...
    interface: str | None = None  # BSD / Linux network interface riding this port: "en2", "thunderbolt0"


@dataclass
class NetInterface:
    name: str  # "bridge0", "en5", "thunderbolt0"
    kind: str | None = None  # "thunderbolt-bridge" | "thunderbolt" | "ethernet" | "other"
    hardware_port: str | None = None  # networksetup's "Thunderbolt 1"
    up: bool | None = None
    addresses: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)  # bridge members
    mtu: int | None = None
    mac: str | None = None
    driver: str | None = None  # Linux: "thunderbolt-net"
    speed_mbps: int | None = None
    status: str | None = None  # macOS ifconfig "status:" (active | inactive); Linux operstate (up | down | ...)
    tb_port: str | None = None  # ThunderboltPort.name this interface rides on
    rdma_device: str | None = None  # macOS: "rdma_en2" when ibv_devices lists it


@dataclass
class ThunderboltFacts:
    present: bool = False
    ports: list[ThunderboltPort] = field(default_factory=list)
    interfaces: list[NetInterface] = field(default_factory=list)
    bridge_enabled: bool | None = None  # macOS Thunderbolt Bridge up with members
    rdma_state: str | None = None  # "enabled" | "disabled" | None (unknown)
    rdma_devices: list[str] = field(default_factory=list)
    tool_errors: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
