"""What joins the GPUs of the machine's view, one :class:`~stackdoctor.model.facts.GpuView` per GPU from every witness
that saw it: each kind's join (``Accelerator.joined_gpus``, in its package) takes its user-space tools, its kernel
driver's own list, the PCI bus and torch's device list, and joins them with these, by PCI address, UUID, then a name
only one GPU has; every witness's value kept in ``GpuView.seen``. A plug-in kind lists its own (``Accelerator.gpus``). Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from stackdoctor.kinds import Accelerator
from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import Facts, GpuView, ReconciledFacts, TorchDevice
from stackdoctor.model.view import W_PCI

__all__ = ["DERIVED", "NAME_LOOKUP", "W_PCI", "W_TORCH", "attach_torch", "bus_key", "derived", "display", "lookup_cc",
           "merge_torch", "publish_gpus", "same_view", "see", "tool_witness", "torch_devices", "uuid_key", "witnessed"]

DERIVED = "reconcile: "  # prefix of the source of every derived value


def derived(source: str | None) -> bool:
    return bool(source) and source.startswith(DERIVED)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- GPUs

W_TORCH = "torch"
NAME_LOOKUP = DERIVED + "compat_matrix/gpus.yaml (name lookup)"


def bus_key(bus_id: str | None) -> str | None:
    """A PCI address in one form: "00000000:01:00.0" and "0000:01:00.0" -> "01:00.0" (domain 0 dropped)."""
    if not bus_id:
        return None
    m = re.search(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])\s*$", bus_id.strip().lower())
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    key = f"{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"
    return key if domain == 0 else f"{domain:04x}:{key}"


def uuid_key(uuid: str | None) -> str | None:
    if not uuid:
        return None
    u = uuid.strip().lower()
    return u[4:] if u.startswith(("gpu-", "mig-")) else u


def display(devices: Iterable[object]) -> list[object]:
    return [d for d in devices if (getattr(d, "class_id", "") or "").lower().startswith("0x03")]


def torch_devices(f: Facts, api: str, capability: re.Pattern[str]) -> list[TorchDevice]:
    """The devices torch itself listed through ``torch.<api>`` whose capability (when given) has the form ``capability``
    (a kind's join asks it only when torch could use them)."""
    return [d for d in f.torch.devices if d.kind == api and (d.capability is None or capability.match(d.capability))]


def tool_witness(source: str, tools: tuple[str, ...]) -> str:
    """The witness a source string names: a tool's name for one of ``tools`` run some way ("<tool> --query-gpu" ->
    "<tool>"), else the source itself."""
    return source.split(" ")[0] if source.startswith(tools) else source


def see(v: GpuView, field: str, witness: str, value: object) -> None:
    """Record what ``witness`` said of ``field`` beside the value kept."""
    if value is not None and value != "":
        v.seen.setdefault(field, {})[witness] = str(value)


def witnessed(v: GpuView, witness: str) -> None:
    if witness not in v.witnesses:
        v.witnesses.append(witness)


def same_view(views: list[GpuView], *, bus: str | None, uuid: str | None, name: str | None, taken: set[int], names_left: list[str]) -> GpuView | None:
    """The view that is the same GPU: by PCI address, then UUID, then a name that only one GPU on each side has."""
    free = [v for v in views if id(v) not in taken]
    if bus:
        hit = next((v for v in free if v.bus_id and bus_key(v.bus_id) == bus), None)
        if hit is not None:
            return hit
    if uuid:
        hit = next((v for v in free if uuid_key(v.uuid) == uuid), None)
        if hit is not None:
            return hit
    if name:
        same = [v for v in free if v.name and v.name == name and not (bus and v.bus_id)]
        if len(same) == 1 and names_left.count(name) == 1:
            return same[0]
    return None


def attach_torch(views: list[GpuView], devices: list[TorchDevice], *, field: str) -> list[TorchDevice]:
    """Join torch's devices to ``views`` (by PCI address, UUID, then a unique name; one left on each side is
    the same GPU); return the unmatched ones. torch asked the device itself, so its capability replaces
    one that was only looked up by name (the lookup stays in ``seen``); a measured one stays."""
    left = list(devices)
    taken = {id(v) for v in views if v.torch_index is not None}
    names = [d.name or "" for d in devices]
    for d in list(devices):
        match = same_view(views, bus=bus_key(d.bus_id), uuid=uuid_key(d.uuid), name=d.name, taken=taken, names_left=names)
        if match is None:
            continue
        taken.add(id(match))
        left.remove(d)
        merge_torch(match, d, field)
    free = [v for v in views if id(v) not in taken and v.witnesses != [W_PCI]]
    if len(left) == 1 and len(free) == 1 and not (bus_key(left[0].bus_id) and free[0].bus_id):
        merge_torch(free[0], left.pop(), field)
    return left


def merge_torch(v: GpuView, d: TorchDevice, field: str) -> None:
    v.torch_index = d.index
    witnessed(v, W_TORCH)
    value = (d.capability or "").split(":")[0] or None
    if field == "gfx" and value:
        value = value.lower()
    see(v, field, W_TORCH, value)
    see(v, "name", W_TORCH, d.name)
    see(v, "memory_total_mib", W_TORCH, d.total_memory_mib)
    if value and (getattr(v, field) is None or derived(v.sources.get(field))):
        setattr(v, field, value)
        v.sources[field] = W_TORCH
    if v.name is None and d.name:
        v.name, v.sources["name"] = d.name, W_TORCH
    if v.memory_total_mib is None and d.total_memory_mib:
        v.memory_total_mib = d.total_memory_mib
        v.sources["memory_total_mib"] = W_TORCH
    if v.uuid is None and d.uuid:
        v.uuid, v.sources["uuid"] = d.uuid, W_TORCH
    if v.bus_id is None and bus_key(d.bus_id):
        v.bus_id, v.sources["bus_id"] = bus_key(d.bus_id), W_TORCH


def lookup_cc(v: GpuView, matrix: Matrix | None) -> None:
    """The compute capability the matrix gives the GPU's name: kept when nothing measured one, always in ``seen``."""
    if matrix is None or not v.name:
        return
    cc = matrix.gpu_compute_capability(v.name)
    if cc is None:
        return
    see(v, "compute_capability", NAME_LOOKUP, cc)
    if v.compute_capability is None:
        v.compute_capability = cc
        v.sources["compute_capability"] = NAME_LOOKUP


# ---------------------------------------------------------------------------- the stable keys carry the view

class KindGpu(Protocol):
    """A GPU in a kind's stable keys (``nvidia.gpus``, ``rocm.gpus``): what :func:`publish_gpus` reads and writes."""

    index: int
    bus_id: str | None
    sources: dict[str, str]


_G = TypeVar("_G", bound=KindGpu)


def publish_gpus(own: list[_G], rec: ReconciledFacts, acc: Accelerator, *, fill: str, fields: tuple[str, ...], make: Callable[[GpuView], _G]) -> None:
    """A kind's GPUs in its stable keys from the reconciled view: a GPU its own tools list gains the ``fill`` value
    (compute capability, gfx target) another witness gave where the tool gave none; a GPU only other witnesses list
    (the kernel driver's files, torch) is added, marked ``reconcile:``; one only the PCI bus sees is no driver's GPU."""
    tools = set(acc.tool_witnesses)
    by_bus = {bus_key(g.bus_id): g for g in own if bus_key(g.bus_id)}
    for v in (g for g in rec.gpus if g.vendor == acc.vendor):
        if set(v.witnesses) & tools:
            g = by_bus.get(v.bus_id) or next((x for x in own if x.index == v.index), None)
            value = getattr(v, fill)
            if g is not None and getattr(g, fill) is None and value:
                src = v.sources.get(fill) or "reconciled view"
                setattr(g, fill, value)
                g.sources[fill] = src if derived(src) else DERIVED + src
            continue
        if v.witnesses == [W_PCI] or not v.witnesses and v.torch_index is None:
            continue  # a GPU no driver lists (only the PCI bus sees it) is not a driver's GPU
        g = make(v)
        g.sources["index"] = DERIVED + "reconciled view (" + ", ".join(v.witnesses or ["torch"]) + ")"
        for k in fields:
            given = v.sources.get(k)
            if getattr(g, k) is not None and given:
                g.sources[k] = given if derived(given) else DERIVED + given
        own.append(g)
    own.sort(key=lambda g: g.index)
