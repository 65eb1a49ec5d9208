"""One NVIDIA GPU seen by several witnesses (NVML, each nvidia-smi form): joined into one record that keeps every
value by its source (``observed``), and the driver-level values each witness gave. No winner is picked here:
:mod:`stackdoctor.reconcile` weighs the witnesses."""

from __future__ import annotations

from stackdoctor.model.facts import NvidiaFacts, NvidiaGpu


def record_witness(into: NvidiaGpu, other: NvidiaGpu) -> None:
    """Keep every value ``other``'s witness gave, by its source, in ``into.observed`` (reconcile weighs them)."""
    for name, src in other.sources.items():
        value = getattr(other, name, None)
        if value not in (None, []):
            into.observed.setdefault(name, {})[src] = list(value) if isinstance(value, list) else value
    if into is other:
        return
    for name, by_src in other.observed.items():
        for src, value in by_src.items():
            into.observed.setdefault(name, {}).setdefault(src, value)


def merge_gpu(into: NvidiaGpu, other: NvidiaGpu) -> None:
    """Join ``other`` (the same GPU, seen by another witness) into ``into``: every value it gave is kept by its
    source (``observed``); the fields hold a provisional value (the first witness's, filled from the later ones)
    until :mod:`stackdoctor.reconcile` weighs the witnesses."""
    record_witness(into, other)
    for name, src in other.sources.items():
        if getattr(into, name, None) in (None, []) and getattr(other, name, None) not in (None, []):
            setattr(into, name, getattr(other, name))
            into.sources[name] = src
    for k, v in other.errors.items():
        into.errors.setdefault(k, v)


def same_gpu(a: NvidiaGpu, b: NvidiaGpu) -> bool:
    if a.uuid and b.uuid:
        return a.uuid == b.uuid
    if a.bus_id and b.bus_id:
        return a.bus_id.lower().split(":", 1)[-1] == b.bus_id.lower().split(":", 1)[-1]
    return a.index == b.index


def merge_gpus(facts: NvidiaFacts, gpus: list[NvidiaGpu]) -> None:
    for gpu in gpus:
        for have in facts.gpus:
            if same_gpu(have, gpu):
                merge_gpu(have, gpu)
                break
        else:
            record_witness(gpu, gpu)
            facts.gpus.append(gpu)
    facts.gpus.sort(key=lambda g: g.index)


def observe(facts: NvidiaFacts, name: str, source: str, value: str | None) -> None:
    """Record a system-level value by its source. No winner is picked here: ``stackdoctor.reconcile`` weighs
    the witnesses and writes the kept value into ``driver_version`` / ``cuda_driver_version`` / ``nvml_version``."""
    if value is None:
        return
    facts.observed.setdefault(name, {})[source] = value
