"""The Ascend findings (``ascend-*``), declared through the seam: imported by :mod:`stackdoctor.rules` because
:attr:`Ascend.rules` names this module, with their texts in ``locale/en.yaml`` and ``zh.yaml`` beside it.

A CUDA or ROCm torch on an Ascend machine needs no rule here: ``torch-backend-mismatch`` is derived from the
registry (:meth:`Ascend.needs_build` says the machine needs torch's CPU build).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from stackdoctor import kinds
from stackdoctor.accelerators.ascend import TORCH_NPU, table, torch_npu_version
from stackdoctor.accelerators.ascend.cann import cann_key
from stackdoctor.core import shell
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for_files

__all__ = ["cann_key", "needed_cann", "paired_torch"]

CANN_DOWNLOAD = "https://www.hiascend.com/cann/download"
CONTAINER_DEVICES = "--device /dev/davinci0 --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc"


def _ascend() -> Any:
    return kinds.by_name("ascend")


def _own(ctx: Ctx) -> dict[str, Any]:
    acc = _ascend()
    return acc.own_facts(ctx.view.facts) if acc is not None else {}


def _base(version: str | None) -> str | None:
    """"2.8.0+cpu" -> "2.8.0"; torch_npu's "2.1.0.post8" -> "2.1.0" (its post releases pair with the same torch)."""
    m = re.match(r"^(\d+\.\d+\.\d+)", version or "")
    return m.group(1) if m else None


def paired_torch(npu_version: str) -> tuple[str | None, str]:
    """The torch release a torch_npu release pins and where that is said: its row in ``torch_npu.yaml`` (the
    wheel's ``Requires-Dist: torch==X.*``), else torch_npu's own numbering (release X pairs with torch X)."""
    base = _base(npu_version)
    for row in table().get("releases") or []:
        if str(row.get("version")) in (npu_version, base):
            return str(row.get("torch")), str(row.get("source") or "torch_npu.yaml")
    return base, "torch_npu's version number"


def needed_cann(npu_version: str) -> tuple[str | None, str | None]:
    """The oldest CANN the torch_npu release needs, and the table's source for it; (None, None) when unknown."""
    rows = table().get("releases") or []
    for want in (npu_version, _base(npu_version)):  # the release's own row first, then its base release's
        for row in rows:
            if str(row.get("version")) == want and row.get("cann"):
                return str(row["cann"]), str(row.get("cann_source") or "")
    return None, None


def _npu_machine(ctx: Ctx) -> bool:
    acc = _ascend()
    return acc is not None and acc.present(ctx.view.facts)


def _set_env_line(own: dict[str, Any]) -> str:
    cann = own.get("cann") or {}
    return shell.format_command(["source", cann.get("set_env") or cann.get("root", "/usr/local/Ascend/cann") + "/set_env.sh"])


@rule("ascend-torch-npu-missing", severity="fail", layer="torch")
def torch_npu_missing(ctx: Ctx) -> None:
    """An Ascend machine with torch's CPU build and no torch_npu beside it: torch cannot reach the NPUs."""
    t = ctx.view.facts.torch
    if not _npu_machine(ctx) or not t.installed or built_for_files(ctx.view) != "cpu" or torch_npu_version(t):
        return
    base = _base(t.version) or t.version
    ctx.add(facts=["torch.version", "torch.distributions", "plugins.ascend.devices"], fix_text=f"pip install {TORCH_NPU}=={base}",
            torch=t.version, chips=len(_ascend().devices(ctx.view.facts)))


@rule("ascend-torch-npu-mismatch", severity="fail", layer="torch")
def torch_npu_mismatch(ctx: Ctx) -> None:
    """torch_npu X pins torch X (its wheel's ``Requires-Dist: torch==X.*``); another torch beside it fails at import."""
    t = ctx.view.facts.torch
    npu = torch_npu_version(t)
    if not npu or not t.version:
        return
    own = _own_pin(t)
    if own is not None:  # the installed torch_npu's own METADATA: a release the table does not know is judged too
        wants, source, met = own
        if met:
            return
    else:
        wants, source = paired_torch(npu)
        if wants is None or _base(t.version) == wants:
            return
    want = wants or "?"
    pin = want if re.match(r"^\d", want) else None
    ctx.add(facts=["torch.version", f"torch.distributions.{TORCH_NPU}"] + ([f"torch.requires.{TORCH_NPU}"] if own is not None else []),
            fix_text=f"pip install {shlex.quote(f'torch=={pin}' if pin else f'torch{want}')} --index-url https://download.pytorch.org/whl/cpu",
            torch=t.version, torch_npu=npu, wants=want, source=source)


def _own_pin(t: Any) -> tuple[str | None, str, bool] | None:
    """(the torch the installed torch_npu's Requires-Dist asks: "2.14.0" for ``torch==2.14.0.*``, else its specifier;
    where that is said; whether the installed torch meets it), None when its METADATA names no torch."""
    from packaging.version import InvalidVersion, Version

    from stackdoctor.rules.pairs import requirement_on

    req = requirement_on(t.requires.get(TORCH_NPU, []), "torch")
    if req is None or not str(req.specifier):
        return None
    try:
        met = any(req.specifier.contains(Version(v), prereleases=True) for v in dict.fromkeys([t.version, _base(t.version) or t.version]))
    except InvalidVersion:
        return None
    exact = next((s.version for s in req.specifier if s.operator == "=="), None)
    wants = re.sub(r"\.\*$", "", exact.split("+", 1)[0]) if exact else str(req.specifier)
    return wants, f"its installed METADATA: Requires-Dist: {req} ({t.sources.get(f'requires.{TORCH_NPU}', 'torch_npu dist-info')})", met


@rule("ascend-cann-missing", severity="fail", layer="toolkit")
def cann_missing(ctx: Ctx) -> None:
    """NPUs (or torch_npu) here and no CANN install found: torch_npu cannot load without CANN's libraries."""
    own = _own(ctx)
    if own.get("cann") or not (_npu_machine(ctx) or torch_npu_version(ctx.view.facts.torch)):
        return
    ctx.add(facts=["plugins.ascend.cann"], url=CANN_DOWNLOAD)


@rule("ascend-cann-not-sourced", severity="fail", layer="toolkit", defers_to=("ascend-cann-missing",))
def cann_not_sourced(ctx: Ctx) -> None:
    """CANN is installed but its environment is not active where the target runs (no ``set_env.sh`` sourced), or
    torch_npu's import said it could not open CANN's libraries."""
    own = _own(ctx)
    cann = own.get("cann") or {}
    t = ctx.view.facts.torch
    said = next((e for e in (t.import_error, (t.available_errors or {}).get("ascend")) if e and re.search(r"lib(hccl|ascendcl)\S*\.so", e)), None)
    if not cann or ((own.get("env") or {}).get("active") and not said):
        return
    if not (_npu_machine(ctx) or torch_npu_version(t) or said):
        return
    ctx.add(detail="import" if said else "default", facts=["plugins.ascend.env", "plugins.ascend.cann"], fix_text=_set_env_line(own),
            version=cann.get("version") or "?", root=cann.get("root"), error=((said or "").strip().splitlines() or [""])[0][:300])


@rule("ascend-cann-too-old", severity="fail", layer="toolkit", defers_to=("ascend-cann-missing",))
def cann_too_old(ctx: Ctx) -> None:
    """The installed CANN is older than the torch_npu release needs (Ascend's compatibility table)."""
    own = _own(ctx)
    have = (own.get("cann") or {}).get("version")
    npu = torch_npu_version(ctx.view.facts.torch)
    if not have or not npu:
        return
    need, source = needed_cann(npu)
    if need is None or cann_key(have) >= cann_key(need):
        return
    ctx.add(facts=["plugins.ascend.cann.version", f"torch.distributions.{TORCH_NPU}"], have=have, need=need, torch_npu=npu,
            source=source, url=CANN_DOWNLOAD)


@rule("ascend-driver-missing", severity="fail", layer="driver")
def driver_missing(ctx: Ctx) -> None:
    """Signs of an Ascend machine (device nodes, CANN or torch_npu) and no NPU driver answering: no
    ``/usr/local/Ascend/driver/version.info`` and npu-smi absent or failing."""
    own = _own(ctx)
    if own.get("driver") or (own.get("npu_smi") or {}).get("state") == "ok":
        return
    if not (own.get("device_nodes") or (own.get("cann") and torch_npu_version(ctx.view.facts.torch))):
        return
    smi = (own.get("npu_smi") or {}).get("state") or "absent"
    ctx.add(facts=["plugins.ascend.driver", "plugins.ascend.npu_smi"], npu_smi=smi)


@rule("ascend-container-devices", severity="fail", layer="platform")
def container_devices(ctx: Ctx) -> None:
    """In a container with the Ascend stack (driver files, CANN or torch_npu) but no ``/dev/davinci*`` passed in."""
    f, own = ctx.view, _own(ctx)
    if not f.facts.platform.container or own.get("device_nodes"):
        return
    if not (own.get("driver") or own.get("cann") or torch_npu_version(f.facts.torch)):
        return
    ctx.add(facts=["platform.container", "plugins.ascend.device_nodes"], container=f.facts.platform.container, fix_text=f"docker run {CONTAINER_DEVICES} ...")


@rule("ascend-devices-hidden", severity="fail", layer="runtime")
def devices_hidden(ctx: Ctx) -> None:
    """``ASCEND_RT_VISIBLE_DEVICES`` keeps no device this machine has (CANN numbers them 0..N-1)."""
    own = _own(ctx)
    ids, raw = own.get("visible_ids"), own.get("visible_devices")
    chips = len(own.get("devices") or [])
    if ids is None or not chips or any(0 <= i < chips for i in ids):
        return
    ctx.add(facts=["plugins.ascend.visible_devices", "plugins.ascend.devices"], fix_text="unset ASCEND_RT_VISIBLE_DEVICES", value=raw, chips=chips,
            last=chips - 1)


@rule("ascend-npu-unavailable", severity="fail", layer="runtime",
      defers_to=("ascend-torch-npu-missing", "ascend-torch-npu-mismatch", "ascend-cann-missing", "ascend-cann-not-sourced", "ascend-cann-too-old",
                 "ascend-driver-missing", "ascend-container-devices", "ascend-devices-hidden"))
def npu_unavailable(ctx: Ctx) -> None:
    """torch was asked and ``torch.npu.is_available()`` is False (or raised), with no other ``ascend-*`` finding to say why."""
    t = ctx.view.facts.torch
    if t.available.get("ascend") is not False or not torch_npu_version(t):
        return
    if ctx.has("ascend-torch-npu-missing", "ascend-torch-npu-mismatch", "ascend-cann-missing", "ascend-cann-not-sourced", "ascend-cann-too-old",
               "ascend-driver-missing", "ascend-container-devices", "ascend-devices-hidden"):
        return
    ctx.add(facts=["torch.available.ascend"], error=(t.available_errors or {}).get("ascend") or "no reason given")
