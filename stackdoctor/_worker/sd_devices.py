"""The devices the kernel and allreduce workers run on, read from the accelerator kinds' device specs.

Standalone (stdlib only; never imports stackdoctor) because it runs inside the *target* interpreter, imported by
``sd_kernels.py`` and ``sd_allreduce.py`` from their own folder. The parent hands over every kind's spec
(``stackdoctor.accelerators.device_specs()``, the kinds' ``DeviceSpec``) as JSON in ``STACKDOCTOR_DEVICES``::

    {"nvidia": {"device": "cuda", "torch_api": "cuda", "synchronize": "cuda.synchronize", "backend": "nccl", ...},
     "ascend": {"device": "npu", "torch_api": "npu", "imports": ["torch_npu"], "backend": "hccl", ...}}

Nothing here names a device: the CPU is the only device the workers know without a spec (without the variable they
run on the CPU alone). Dotted names ("backends.mps.is_available") are looked up from ``torch``. Must stay importable
by Python 3.8+.
"""

import importlib
import json
import os

# a spec's fields the parent leaves out when they have their defaults (stackdoctor/kinds/base.py: DeviceSpec)
DEFAULTS = {"synchronize": "", "backend": "gloo", "imports": [], "indexed": True, "available": "", "label": "", "name": "",
            "sync_takes_device": False, "set_device": "", "fast_dtypes": ["bf16"], "tf32_switch": "", "conv_tf32": "",
            "backend_check": "", "fall_through": False, "library": "", "reasons": {}, "init_device": False}


def specs():
    """Every kind's device spec, in the kinds' priority order, one per torch device type (NVIDIA, AMD and Jetson all
    reach theirs as "cuda"), each with its defaults filled in."""
    try:
        data = json.loads(os.environ.get("STACKDOCTOR_DEVICES") or "{}")
    except ValueError:
        return []
    out, seen = [], set()
    for spec in data.values() if isinstance(data, dict) else []:
        if isinstance(spec, dict) and spec.get("device") and spec["device"] not in seen:
            seen.add(spec["device"])
            full = dict(DEFAULTS)
            full.update(spec)
            out.append(full)
    return out


def attr(torch, dotted):
    """``torch.<dotted>`` ("npu.synchronize"), or None when any part is missing."""
    obj = torch
    for part in str(dotted or "").split("."):
        obj = getattr(obj, part, None) if part else None
        if obj is None:
            return None
    return obj


def set_attr(torch, dotted, value):
    """Set ``torch.<dotted>`` (a flag such as "backends.cuda.matmul.allow_tf32"); its value before, or None."""
    head, _, name = str(dotted).rpartition(".")
    owner = attr(torch, head) if head else torch
    if owner is None or not hasattr(owner, name):
        return None
    before = getattr(owner, name)
    setattr(owner, name, value)
    return before


def api(torch, spec):
    """torch's module for the spec's kind (``torch.<torch_api>``), after the modules it needs are imported."""
    for name in spec.get("imports") or []:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    return attr(torch, spec.get("torch_api"))


def available(torch, spec):
    """torch can use the kind's devices (``torch.<available>()`` or ``torch.<torch_api>.is_available()``); never raises."""
    try:
        mod = api(torch, spec)
        ask = attr(torch, spec["available"]) if spec.get("available") else getattr(mod, "is_available", None)
        return bool(ask is not None and ask())
    except Exception:
        return False


def count(torch, spec):
    """How many devices of the kind torch sees (1 for a kind of one unindexed device)."""
    if not spec.get("indexed", True):
        return 1
    try:
        return int(api(torch, spec).device_count())
    except Exception:
        return 0


def devices_of(torch, spec):
    """The kind's devices as torch names them: ``<device>:<i>``, or ``<device>`` for an unindexed kind; [] when
    torch cannot use it."""
    if not available(torch, spec):
        return []
    if not spec.get("indexed", True):
        return [spec["device"]]
    return ["%s:%d" % (spec["device"], i) for i in range(count(torch, spec))]


def list_devices(torch):
    """Every device torch can use here: the CPU, then each spec'd kind's devices."""
    out = ["cpu"]
    for spec in specs():
        out += devices_of(torch, spec)
    return out


def spec_for(device):
    """The spec whose devices ``device`` ("npu:0", "mps") is one of; None for the CPU (or an unknown device)."""
    kind = str(device).split(":", 1)[0]
    return next((s for s in specs() if s["device"] == kind), None)


def by_backend(backend):
    """The spec whose collectives' backend is ``backend`` ("hccl"), else None (gloo, the default, is the CPU's)."""
    if backend == DEFAULTS["backend"]:
        return None
    return next((s for s in specs() if s.get("backend") == backend), None)


def index(device):
    """The ordinal of ``device`` ("cuda:1" -> 1; "mps" -> 0)."""
    _, _, i = str(device).partition(":")
    return int(i) if i.isdigit() else 0


def first(device):
    """``device`` made explicit: a bare indexed kind ("cuda") is its first device ("cuda:0")."""
    spec = spec_for(device)
    if spec is not None and spec.get("indexed", True) and device == spec["device"]:
        return device + ":0"
    return device


def synchronize(torch, device):
    """Wait for ``device`` (nothing for the CPU, or a kind that needs no wait)."""
    spec = spec_for(device)
    sync = attr(torch, spec["synchronize"]) if spec is not None and spec.get("synchronize") else None
    if sync is None:
        return
    if spec.get("sync_takes_device"):
        sync(torch.device(device))
    else:
        sync()


def device_name(torch, device):
    """The device's name: its spec's fixed name, else ``torch.<torch_api>.get_device_name(i)``; the CPU's processor."""
    try:
        spec = spec_for(device)
        if spec is None:
            import platform

            return platform.processor() or platform.machine()
        if spec.get("name"):
            return spec["name"]
        name = getattr(api(torch, spec), "get_device_name", None)
        return name(index(device)) if name is not None else None
    except Exception:
        return None


def _dtype_fits(torch, spec, device, entry):
    if spec.get("torch_api") and entry.get("capability") is not None:
        major = attr(torch, spec["torch_api"] + ".get_device_capability")(torch.device(device))[0]
        if major < int(entry["capability"]):
            return False
    if entry.get("unless") and attr(torch, entry["unless"]):
        return False
    return not entry.get("when") or bool(attr(torch, entry["when"])())


def fast_dtypes(torch, device):
    """The reduced-precision matmul types this device is expected to run fast (its spec's ``fast_dtypes``, each
    entry's conditions asked of torch); bf16 on the CPU; fp16 when torch cannot say."""
    spec = spec_for(device)
    if spec is None:
        return ["bf16"]
    try:
        out = []
        for entry in spec.get("fast_dtypes") or ["bf16"]:
            entry = entry if isinstance(entry, dict) else {"dtype": entry}
            if _dtype_fits(torch, spec, device, entry):
                out.append(entry["dtype"])
        return out or ["bf16"]
    except Exception:
        return ["fp16"]
