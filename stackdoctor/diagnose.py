"""The doctor: pure rules that turn facts (+ the compat matrix) into findings.

``diagnose(facts, matrix, probes=..., lang=...)`` does no I/O and reads no environment:
everything comes from :class:`~stackdoctor.facts.Facts` (``facts.environment`` holds the
variables that shape the stack), so a replayed report is judged exactly as a live run.

Each rule is a small function ``_rule_x(ctx)`` that adds zero or more findings. Every
``warn``/``fail`` finding carries a ``fix`` (a command where one exists); after the rules,
one ``<layer>-ok`` finding is added per layer that was checked and is healthy.
Codes, severities and layers live in :mod:`stackdoctor.catalog`; texts in
``stackdoctor/locale/{en,zh}.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackdoctor import catalog
from stackdoctor import matrix as mx
from stackdoctor.redact import address_family, address_kind
from stackdoctor.facts import Facts, NvidiaGpu, RocmFacts
from stackdoctor.report import Finding, ProbeStatus

__all__ = ["detect_lang", "diagnose", "list_checks", "select"]

detect_lang = catalog.detect_lang

PYTORCH_INDEX = "https://download.pytorch.org/whl"
_SEV_RANK = {"ok": 0, "warn": 1, "fail": 2}


# ---------------------------------------------------------------------------- public API


def diagnose(
    facts: Facts,
    matrix: Any = None,
    *,
    probes: Sequence[ProbeStatus] | None = None,
    lang: str = "en",
) -> list[Finding]:
    """Findings for ``facts``: problems first (fail, then warn), then one ``<layer>-ok`` per healthy layer.

    ``matrix`` is a :class:`stackdoctor.matrix.Matrix` (``None``: the rules that need it are skipped).
    ``probes`` are the probe outcomes of the run (for ``probe-failed`` / ``probe-timeout``).
    A rule that trips over unexpected data is skipped, never raised.
    """
    ctx = _Ctx(facts=facts, matrix=matrix, lang=lang if lang in catalog.LANGS else "en", probes=list(probes or []))
    for rule in _RULES:
        try:
            rule(ctx)
        except Exception:  # pragma: no cover - a rule bug must not take the diagnosis down
            continue
    problems = sorted(ctx.out, key=lambda f: -_SEV_RANK.get(f.severity, 0))
    return problems + _ok_findings(ctx)


def select(findings: Iterable[Finding], only: Sequence[str] | None = None, skip: Sequence[str] | None = None) -> list[Finding]:
    """Keep the findings whose code is in ``only`` (all when None) and not in ``skip``.

    A pattern ending in ``*`` matches a prefix (``thunderbolt-*``).
    """

    def hit(code: str, patterns: Sequence[str]) -> bool:
        return any(code == p or (p.endswith("*") and code.startswith(p[:-1])) for p in patterns)

    out = []
    for f in findings:
        if only and not hit(f.code, only):
            continue
        if skip and hit(f.code, skip):
            continue
        out.append(f)
    return out


def list_checks(lang: str = "en") -> list[tuple[str, str, str, str]]:
    """``(code, severity, layer, title)`` for every known code, in catalogue order."""
    return [(c.code, c.severity, c.layer, catalog.title(c.code, lang)) for c in catalog.CHECKS]


# ---------------------------------------------------------------------------- context


@dataclass
class _Ctx:
    facts: Facts
    matrix: Any
    lang: str
    probes: list[ProbeStatus]
    out: list[Finding] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)  # layers with enough facts to say "ok"

    def add(
        self,
        code: str,
        *,
        severity: str | None = None,
        detail: str = "default",
        fix: str | None = "default",
        facts: Iterable[str] = (),
        fix_text: str | None = None,
        **values: Any,
    ) -> Finding:
        """Add ``code`` with its ``detail`` / ``fix`` templates filled from ``values``.

        ``fix_text`` is used verbatim (a command); ``fix=None`` means no template.
        """
        text_fix = fix_text
        if text_fix is None and fix is not None:
            text_fix = catalog.message(code, "fix", fix, self.lang, **values) or None
        f = catalog.make_finding(
            code,
            self.lang,
            severity=severity,
            detail=catalog.message(code, "detail", detail, self.lang, **values),
            fix=text_fix,
            facts=list(facts),
        )
        self.out.append(f)
        return f

    def has(self, *codes: str) -> bool:
        return any(f.code in codes for f in self.out)

    def msg(self, code: str, kind: str, key: str, **values: Any) -> str:
        return catalog.message(code, kind, key, self.lang, **values)


# ---------------------------------------------------------------------------- helpers


def _vt(s: str | None) -> tuple[int, ...]:
    """Leading numeric dotted part of a version as a tuple ("2.13.0+cu130" -> (2, 13, 0))."""
    if not s:
        return ()
    m = re.match(r"\s*(\d+(?:\.\d+)*)", s)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def _public(v: str | None) -> str | None:
    return v.split("+", 1)[0] if v else v


def _local(v: str | None) -> str | None:
    return v.split("+", 1)[1] if v and "+" in v else None


def _mm(v: str | None) -> str | None:
    t = _vt(v)
    return ".".join(str(x) for x in t[:2]) if len(t) >= 2 else None


def _variant_name(facts: Facts) -> str | None:
    t = facts.torch
    if t.variant:
        return t.variant
    return mx.variant_from_version(t.version)


def _build_kind(facts: Facts) -> str | None:
    """What the installed torch was built for: "cuda" | "rocm" | "xpu" | "cpu" | None (not installed)."""
    t = facts.torch
    if not t.installed or _import_failed(t) or t.import_error_kind == "timeout":
        return None
    if t.hip:
        return "rocm"
    if t.cuda:
        return "cuda"
    v = (_variant_name(facts) or "").lower()
    if v.startswith("rocm"):
        return "rocm"
    if v.startswith("cu"):
        return "cuda"
    if v == "xpu" or t.xpu_available:
        return "xpu"
    return "cpu"


def _nvidia_pci(facts: Facts) -> list[Any]:
    return [d for d in facts.platform.nvidia_pci_devices if (d.class_id or "").lower().startswith("0x03")]


def _amd_pci(facts: Facts) -> list[Any]:
    return [d for d in facts.platform.amd_pci_devices if (d.class_id or "").lower().startswith("0x03")]


def _has_nvidia(facts: Facts) -> bool:
    return bool(facts.nvidia.gpus or _nvidia_pci(facts))


def _has_amd_gpu(facts: Facts) -> bool:
    return bool([g for g in facts.rocm.gpus if not g.integrated] or (_amd_pci(facts) and not facts.rocm.gpus))


def _windows_driver(facts: Facts) -> bool:
    """The NVIDIA driver number is a Windows one (native Windows, or WSL where the host driver serves)."""
    return facts.platform.system == "Windows" or facts.platform.is_wsl


def _python(facts: Facts) -> str:
    return facts.python.executable or "python"


def _gpu_label(g: NvidiaGpu) -> str:
    return f"GPU{g.index} {g.name or '?'}"


def _gpu_cc(ctx: _Ctx, g: NvidiaGpu) -> str | None:
    if g.compute_capability:
        return g.compute_capability
    for d in ctx.facts.torch.devices:
        if d.index == g.index and d.kind == "cuda" and d.capability and re.match(r"^\d+\.\d+$", d.capability):
            return d.capability
    if ctx.matrix is not None:
        try:
            return ctx.matrix.gpu_compute_capability(g.name)  # type: ignore[no-any-return]
        except Exception:
            return None
    return None


def _sm(cc: str) -> str:
    return "sm_" + cc.replace(".", "")


def _platform_tag(facts: Facts) -> str | None:
    return facts.python.platform_tag


def _release(ctx: _Ctx, version: str | None) -> Any:
    if ctx.matrix is None or not version:
        return None
    try:
        return ctx.matrix.release(_public(version))
    except Exception:
        return None


def _variant_row(ctx: _Ctx) -> Any:
    rel = _release(ctx, ctx.facts.torch.version)
    name = _variant_name(ctx.facts)
    if rel is None:
        return None
    try:
        if name:
            return rel.variant(name)
        # no local suffix (PyPI / macOS): the variant whose CUDA matches torch.version.cuda, else cpu
        kind = _build_kind(ctx.facts)
        for v in rel.variants:
            if kind == "cuda" and v.kind == "cuda" and v.cuda == _mm(ctx.facts.torch.cuda):
                return v
            if kind == "cpu" and v.kind == "cpu":
                return v
    except Exception:
        return None
    return None


def _install_fix(ctx: _Ctx, *, keep_torch: bool = True, exclude: str | None = None) -> str:
    """The ``stackdoctor install ...`` line that resolves the machine, from the pure resolver when present.

    Tries the installed torch version first (``--torch X --variant V``), then the newest usable
    (``--variant V``); falls back to plain ``stackdoctor install`` (which resolves by itself).
    """
    facts = ctx.facts
    current = (_public(facts.torch.version), _variant_name(facts))
    from stackdoctor.plan import Request
    from stackdoctor.resolve import resolve

    want_gpu = _usable_accelerator(facts) is not None
    attempts: list[Any] = []
    if keep_torch and facts.torch.installed and current[0]:
        attempts.append(Request(torch=current[0]))
    attempts.append(Request())
    for req in attempts:
        try:
            plan = resolve(facts, ctx.matrix, req)
        except Exception:
            continue
        if not getattr(plan, "satisfiable", False) or not plan.variant:
            continue
        if plan.variant == exclude or (plan.torch_version, plan.variant) == current:
            continue
        if want_gpu and plan.variant == "cpu":
            continue  # a CPU build is no fix on a machine whose GPU should work
        if req.torch:
            return f"stackdoctor install --torch {plan.torch_version} --variant {plan.variant}"
        return f"stackdoctor install --variant {plan.variant}"
    return "stackdoctor install"  # it explains, with reasons, why nothing better fits


def _index_for(variant: str | None) -> str | None:
    return f"{PYTORCH_INDEX}/{variant}" if variant else None


# ---------------------------------------------------------------------------- rules: probes


def _rule_probes(ctx: _Ctx) -> None:
    t = ctx.facts.torch
    seen_target = False
    if t.import_error_kind == "timeout":
        seen_target = True
        ctx.add(
            "probe-timeout",
            severity="fail",
            detail="import",
            fix="import",
            facts=["torch.import_error"],
            error=t.import_error or "",
            python=_python(ctx.facts),
        )
    for p in ctx.probes:
        if p.status not in ("error", "timeout"):
            continue
        if p.name == "target" and (seen_target or t.import_error_kind in ("exception", "crash")):
            continue  # already told by probe-timeout / torch-import-failed
        code = "probe-timeout" if p.status == "timeout" else "probe-failed"
        target = p.name == "target"
        ctx.add(
            code,
            severity="fail" if target else "warn",
            detail="target" if target else "default",
            fix="target" if target else "default",
            facts=[f"probes.{p.name}"],
            probe=p.name,
            error=p.error or "",
            seconds=f"{p.duration_s:g}",
            python=_python(ctx.facts),
        )
    n = ctx.facts.nvidia
    if n.smi_state == "timeout":
        ctx.add("probe-timeout", severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state"], error=n.smi_message or "")
    elif n.smi_state == "error" and n.smi_message and not ctx.has("probe-failed"):
        ctx.add("probe-failed", severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state", "nvidia.smi_message"], error=n.smi_message)
    elif n.smi_state == "cuda-err" and not ctx.facts.platform.is_wsl:
        ctx.add("probe-failed", severity="warn", detail="cuda_err", fix="cuda_err", facts=["nvidia.smi_state"])
    kfd_told = _kfd_permission_applies(ctx.facts.rocm)
    for subject, errors in (("rocm", ctx.facts.rocm.tool_errors), ("thunderbolt", ctx.facts.thunderbolt.tool_errors)):
        for tool, err in sorted(errors.items()):
            if not err or "not installed" in err or (kfd_told and "kfd" in err.lower()):
                continue  # absence is a fact; kfd trouble, when /dev/kfd is seen refusing us, is rocm-kfd-permission
            ctx.add("probe-failed", severity="warn", facts=[f"{subject}.tool_errors.{tool}"], probe=tool, error=err, seconds="")


# ---------------------------------------------------------------------------- rules: platform / driver


def _rule_container(ctx: _Ctx) -> None:
    p = ctx.facts.platform
    if not p.container or p.container_nvidia_devices is not False:
        return
    wants = bool(_nvidia_pci(ctx.facts)) or bool(ctx.facts.environment.get("NVIDIA_VISIBLE_DEVICES", "").strip() not in ("", "void", "none"))
    if not wants:
        return
    fix = {"podman": "podman", "kubernetes": "kubernetes"}.get(p.container, "docker")
    ctx.add(
        "container-no-gpu",
        fix=fix,
        facts=["platform.container", "platform.container_nvidia_devices"],
        container=p.container,
        pci=", ".join(d.name or d.device_id for d in _nvidia_pci(ctx.facts)) or "-",
    )


def _rule_driver_missing(ctx: _Ctx) -> None:
    n, p = ctx.facts.nvidia, ctx.facts.platform
    if ctx.has("container-no-gpu") or ctx.facts.jetson.is_jetson:
        return
    pci = _nvidia_pci(ctx.facts)
    said_no_driver = n.smi_state == "no-driver" or n.nvml_state == "no-driver"
    silent = bool(pci) and not n.driver_version and not n.kernel_module_version and n.smi_state in (None, "absent", "no-driver") and n.nvml_state in (
        None,
        "absent",
        "no-driver",
        "skipped",
    )
    if not (said_no_driver or silent):
        return
    if not pci and not said_no_driver:
        return
    devices = ", ".join(f"{d.name or d.device_id} ({d.address}, driver {d.driver or 'none'})" for d in pci) or "-"
    nouveau = any(d.driver == "nouveau" for d in pci)
    key = "wsl" if p.is_wsl else ("nouveau" if nouveau else ("ubuntu" if p.os_id == "ubuntu" else "default"))
    ctx.add(
        "driver-missing",
        detail="default" if pci else "no_pci",
        fix=key,
        facts=["platform.nvidia_pci_devices", "nvidia.smi_state", "nvidia.nvml_state"],
        devices=devices,
        message=n.smi_message or n.nvml_error or "-",
    )


def _rule_driver_library_mismatch(ctx: _Ctx) -> None:
    n = ctx.facts.nvidia
    if n.smi_state == "lib-mismatch" or n.nvml_state == "lib-mismatch":
        m = re.search(r"NVML library version:\s*([\d.]+)", (n.smi_message or "") + "\n" + (n.nvml_error or ""))
        user = n.driver_version or (m.group(1) if m else None) or "?"
        ctx.add(
            "driver-library-mismatch",
            facts=["nvidia.smi_state", "nvidia.nvml_state", "nvidia.kernel_module_version"],
            user=user,
            kernel=n.kernel_module_version or "?",
            message=n.smi_message or n.nvml_error or "",
        )


def _rule_source_conflict(ctx: _Ctx) -> None:
    n, p = ctx.facts.nvidia, ctx.facts.platform
    if not ctx.has("driver-library-mismatch") and not p.is_wsl and n.driver_version and n.kernel_module_version:
        if not _same_version(n.driver_version, n.kernel_module_version):
            ctx.add(
                "source-conflict",
                detail="module",
                fix="module",
                facts=["nvidia.driver_version", "nvidia.kernel_module_version"],
                user=n.driver_version,
                user_source=n.sources.get("driver_version", "NVML"),
                kernel=n.kernel_module_version,
                kernel_source=n.sources.get("kernel_module_version", "/sys/module/nvidia/version"),
            )
    for key, by_src in sorted(n.observed.items()):
        if key.endswith("_raw") or len(by_src) < 2:
            continue
        values = [v for v in by_src.values() if v]
        if all(_same_version(values[0], v) for v in values[1:]):
            continue
        ctx.add(
            "source-conflict",
            detail="observed",
            fix="observed",
            facts=[f"nvidia.observed.{key}"],
            key=key,
            values="; ".join(f"{src}: {val}" for src, val in sorted(by_src.items())),
        )
    t = ctx.facts.torch
    hidden = any(k in ctx.facts.environment for k in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"))
    if t.cuda_available and t.cuda and t.device_count is not None and n.gpus and not hidden and t.device_count != len(n.gpus):
        if not any(g.mig_mode == "Enabled" for g in n.gpus):
            ctx.add(
                "source-conflict",
                detail="count",
                fix="count",
                facts=["torch.device_count", "nvidia.gpus"],
                torch_count=t.device_count,
                smi_count=len(n.gpus),
            )


def _same_version(a: str, b: str) -> bool:
    """Equal, or one a dotted prefix of the other (nvidia-smi's table prints "550.54" for 550.54.14)."""
    a, b = a.strip(), b.strip()
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _rule_wsl(ctx: _Ctx) -> None:
    p, n = ctx.facts.platform, ctx.facts.nvidia
    if not p.is_wsl:
        return
    foreign = [x for x in n.libcuda_paths if not x.startswith("/usr/lib/wsl/")]
    if foreign:
        ctx.add(
            "wsl-driver",
            facts=["nvidia.libcuda_paths", "platform.is_wsl"],
            paths=", ".join(foreign),
        )
    elif n.smi_state == "cuda-err":
        broken = ctx.facts.torch.cuda_available is False
        ctx.add(
            "wsl-driver",
            severity="fail" if broken else "warn",
            detail="cuda_err",
            fix="cuda_err",
            facts=["nvidia.smi_state", "platform.is_wsl"],
            driver=n.driver_version or "?",
            smi=n.smi_version or "?",
        )


def _cuda_row(ctx: _Ctx, cuda: str | None) -> Any:
    if ctx.matrix is None or not cuda:
        return None
    try:
        return ctx.matrix.cuda_row(cuda)
    except Exception:
        return None


def _rule_driver_too_old(ctx: _Ctx) -> None:
    f, t, n = ctx.facts, ctx.facts.torch, ctx.facts.nvidia
    if _build_kind(f) != "cuda" or not t.cuda or f.jetson.is_jetson:
        return
    driver = n.driver_version
    row = _cuda_row(ctx, t.cuda)
    windows = _windows_driver(f)
    verdict: str | None = None
    if row is not None and driver:
        verdict = mx.driver_meets(row, driver, windows)
    elif n.cuda_driver_version and _vt(n.cuda_driver_version) and _vt(t.cuda):
        # without a matrix row: the driver's own CUDA level against the wheel's major
        verdict = "no" if _vt(t.cuda)[0] > _vt(n.cuda_driver_version)[0] else None
    err = t.cuda_error or ""
    if verdict is None and "too old" in err.lower():
        verdict = "no"
    if verdict is None or verdict == "full":
        return
    floor = minimum = "?"
    if row is not None:
        floor = (row.minor_compat_floor_windows if windows else row.minor_compat_floor_linux) or "?"
        minimum = (row.min_driver_windows if windows else row.min_driver_linux) or floor
    values = dict(
        torch=t.version,
        cuda=t.cuda,
        driver=driver or "?",
        driver_cuda=n.cuda_driver_version or "?",
        floor=floor,
        minimum=minimum,
        os="Windows" if windows else "Linux",
    )
    if verdict == "no":
        ctx.add(
            "driver-too-old",
            facts=["nvidia.driver_version", "torch.cuda"],
            install=_install_fix(ctx),
            error=err,
            **values,
        )
    else:
        ctx.add("driver-minor-compat", facts=["nvidia.driver_version", "torch.cuda"], install=_install_fix(ctx), **values)


def _kfd_permission_applies(r: RocmFacts) -> bool:
    """rocm-kfd-permission's condition: /dev/kfd is there and this user cannot open it read-write."""
    return bool(r.kfd_present and r.kfd_accessible is False)


def _rule_amd_driver(ctx: _Ctx) -> None:
    r, p = ctx.facts.rocm, ctx.facts.platform
    if p.system not in (None, "Linux") or p.is_wsl:
        return
    amd = _amd_pci(ctx.facts)
    dgpu = [d for d in amd if d.driver != "amdgpu"]
    if amd and r.amdgpu_loaded is False:
        ctx.add(
            "amdgpu-not-loaded",
            facts=["rocm.amdgpu_loaded", "platform.amd_pci_devices"],
            devices=", ".join(f"{d.name or d.device_id} ({d.address})" for d in (dgpu or amd)),
            container=p.container or "",
        )
    if _kfd_permission_applies(r):
        ctx.add(
            "rocm-kfd-permission",
            fix="container" if p.container else "default",
            facts=["rocm.kfd_present", "rocm.kfd_accessible", "rocm.kfd_error"],
            error=r.kfd_error or "permission denied",
        )


# ---------------------------------------------------------------------------- rules: GPU health


def _rule_gpu_lost(ctx: _Ctx) -> None:
    n = ctx.facts.nvidia
    pci = _nvidia_pci(ctx.facts)
    if ctx.has("driver-missing", "driver-library-mismatch", "container-no-gpu"):
        return
    if n.smi_state == "no-devices":
        ctx.add(
            "gpu-lost",
            facts=["nvidia.smi_state", "platform.nvidia_pci_devices"],
            message=n.smi_message or "No devices were found",
            pci=len(pci),
            seen=0,
            flavor=n.kernel_module_flavor or "?",
        )
        return
    if pci and n.gpus and len(n.gpus) < len(pci) and (n.nvml_state == "ok" or n.smi_state == "ok"):
        seen = {(g.bus_id or "").lower()[-12:] for g in n.gpus}
        missing = [d for d in pci if d.address.lower()[-12:] not in seen]
        ctx.add(
            "gpu-lost",
            detail="partial",
            facts=["nvidia.gpus", "platform.nvidia_pci_devices"],
            message=", ".join(d.address for d in missing) or "-",
            pci=len(pci),
            seen=len(n.gpus),
            flavor=n.kernel_module_flavor or "?",
        )


_BAD_THROTTLE = ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")
_DATACENTER = re.compile(
    r"\b(tesla|[abhl]\d{1,3}[a-z]?|gh200|gb200|gb300|b[12]00|b300|h[12]00|h800|a800|l40s?|t4|v100|p100|p40|mi\d{3})\b", re.I
)


def _rule_gpu_health(ctx: _Ctx) -> None:
    f = ctx.facts
    for g in f.nvidia.gpus:
        if (g.ecc_uncorrected or 0) > 0 or g.retired_pages_pending:
            ctx.add(
                "gpu-ecc-errors",
                detail="pending" if g.retired_pages_pending and not g.ecc_uncorrected else "default",
                facts=[f"nvidia.gpus[{g.index}].ecc_uncorrected", f"nvidia.gpus[{g.index}].retired_pages_pending"],
                gpu=_gpu_label(g),
                index=g.index,
                count=g.ecc_uncorrected or 0,
            )
        bad = [r for r in g.throttle_reasons if r in _BAD_THROTTLE]
        if bad:
            ctx.add(
                "gpu-throttled",
                facts=[f"nvidia.gpus[{g.index}].throttle_reasons"],
                gpu=_gpu_label(g),
                index=g.index,
                reasons=", ".join(bad),
            )
    if f.platform.system in (None, "Linux") and not f.platform.is_wsl:
        off = [g for g in f.nvidia.gpus if g.persistence_mode == "Disabled" and g.name and _DATACENTER.search(g.name.replace("NVIDIA ", ""))]
        if off:
            ctx.add(
                "gpu-persistence-off",
                facts=[f"nvidia.gpus[{g.index}].persistence_mode" for g in off],
                gpus=", ".join(_gpu_label(g) for g in off),
            )


# ---------------------------------------------------------------------------- rules: python


def _py_tag(facts: Facts) -> str | None:
    mm = _mm(facts.python.version)
    if not mm:
        return None
    return mm + ("t" if facts.python.free_threaded else "")


def _rule_python(ctx: _Ctx) -> None:
    f = ctx.facts
    tag = _py_tag(f)
    if tag is None or ctx.matrix is None:
        return
    t = f.torch
    if t.installed:
        v = _variant_row(ctx)
        rel = _release(ctx, t.version)
        pythons = tuple(getattr(v, "pythons", ()) or ()) or tuple(getattr(rel, "pythons", ()) or ())
        if pythons and tag not in pythons:
            ctx.add(
                "python-unsupported",
                severity="warn" if t.import_error is None else "fail",
                detail="installed",
                facts=["python.version", "torch.version"],
                python=tag,
                torch=t.version,
                pythons=", ".join(pythons),
                suggested=_suggest_python(pythons),
            )
        return
    releases = [r for r in getattr(ctx.matrix, "releases", ()) or () if r.pythons and r.variants]
    if not releases:
        return
    newest_for = next((r for r in releases if tag in tuple(r.pythons or ())), None)
    if newest_for is None:
        newest = releases[0]
        ctx.add(
            "python-unsupported",
            facts=["python.version"],
            python=tag,
            torch=str(newest.version),
            pythons=", ".join(newest.pythons),
            suggested=_suggest_python(tuple(newest.pythons)),
        )


def _suggest_python(pythons: Sequence[str]) -> str:
    plain = [p for p in pythons if not p.endswith("t")]
    plain.sort(key=_vt)
    # the newest regular Python that is not the newest one (wider ecosystem support), else the newest
    return (plain[-2] if len(plain) >= 2 else plain[-1]) if plain else "3.12"


def _rule_pynvml(ctx: _Ctx) -> None:
    d = ctx.facts.torch.distributions
    shim = d.get("pynvml")
    if not shim:
        return
    if "nvidia-ml-py" in d or (_vt(shim)[:1] and _vt(shim)[0] >= 13):
        ctx.add(
            "pynvml-deprecated",
            facts=["torch.distributions.pynvml"],
            version=shim,
            official=d.get("nvidia-ml-py") or "-",
            python=_python(ctx.facts),
        )


# ---------------------------------------------------------------------------- rules: torch


def _usable_accelerator(facts: Facts) -> str | None:
    """"cuda" / "rocm" when the machine has a GPU torch could use with the right build, else None."""
    if facts.apple.is_macos or facts.platform.system == "Darwin":
        return None
    if facts.jetson.is_jetson:
        return "cuda"
    if facts.nvidia.gpus and facts.nvidia.driver_version:
        return "cuda"
    if facts.platform.system in (None, "Linux") and not facts.platform.is_wsl:
        if [g for g in facts.rocm.gpus if not g.integrated] and facts.rocm.amdgpu_loaded is not False:
            return "rocm"
    return None


_MISSING_RE = re.compile(r"No module named ['\"]?torch['\"]?\s*$")


def _import_failed(t: Any) -> bool:
    """torch is there but `import torch` raised or crashed (the target probe may still say installed=True)."""
    return bool(t.import_error) and t.import_error_kind != "timeout" and not _MISSING_RE.search(t.import_error or "")


def _rule_torch_presence(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if f.python.error and not t.installed and not t.import_error:
        return  # the target interpreter itself is unknown: probe-failed says so
    if _import_failed(t):
        if ctx.has("glibc-too-old", "lib-path-shadowing"):
            return  # explained, with its own fix
        ctx.add(
            "torch-import-failed",
            facts=["torch.import_error", "torch.import_error_kind"],
            fix_text=_install_fix(ctx, keep_torch=False),
            error=t.import_error,
            python=_python(f),
        )
        return
    if t.import_error_kind == "timeout":
        return  # probe-timeout
    if not t.installed:
        if _mac_x86(f):
            return  # macos-x86-torch-too-new tells the whole story
        ctx.add("torch-missing", facts=["torch.installed"], fix_text="stackdoctor install", python=_python(f))
        return
    ctx.checked.add("torch")


def _rule_torch_build(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    kind = _build_kind(f)
    if kind is None:
        return
    usable = _usable_accelerator(f)
    if f.jetson.is_jetson:
        return  # jetson-wrong-wheel
    if kind == "cpu" and usable:
        gpus = _gpu_names(f, usable)
        ctx.add(
            "torch-cpu-only",
            facts=["torch.version", "torch.cuda", "nvidia.gpus" if usable == "cuda" else "rocm.gpus"],
            fix_text=_install_fix(ctx, exclude="cpu"),
            torch=t.version,
            gpus=gpus,
        )
        return
    has_nv, has_amd = _has_nvidia(f), _has_amd_gpu(f)
    has_intel = any(g.discrete for g in f.intel.gpus) or bool(f.intel.gpus)
    mismatch = (
        (kind == "rocm" and has_nv and not has_amd)
        or (kind == "cuda" and has_amd and not has_nv)
        or (kind == "xpu" and (has_nv or has_amd) and not has_intel)
    )
    if mismatch:
        machine = "NVIDIA" if has_nv else ("AMD" if has_amd else "Intel")
        ctx.add(
            "torch-backend-mismatch",
            facts=["torch.version", "torch.cuda", "torch.hip"],
            fix_text=_install_fix(ctx, exclude=_variant_name(f)),
            torch=t.version,
            build=kind.upper() if kind != "rocm" else "ROCm",
            machine=machine,
            gpus=_gpu_names(f, "cuda" if has_nv else "rocm"),
        )


def _gpu_names(f: Facts, kind: str) -> str:
    if kind == "cuda":
        names = [g.name or f"GPU{g.index}" for g in f.nvidia.gpus] or [d.name or d.device_id for d in _nvidia_pci(f)]
        if not names and f.jetson.is_jetson:
            names = [f.jetson.model or "Jetson"]
    else:
        names = [g.name or g.gfx or f"GPU{g.index}" for g in f.rocm.gpus if not g.integrated]
    return ", ".join(names) or "-"


def _rule_arch(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if _build_kind(f) != "cuda" or f.jetson.is_jetson:
        return
    arch = list(t.arch_list)
    source = "torch.cuda.get_arch_list()"
    if not arch:
        v = _variant_row(ctx)
        if v is not None:
            arch = list(v.arch_for(_platform_tag(f)) if hasattr(v, "arch_for") else v.arch_list)
            source = "compat matrix"
    if not arch:
        return
    bad = []
    for g in f.nvidia.gpus:
        cc = _gpu_cc(ctx, g)
        if cc and not mx.arch_runs(arch, cc):
            bad.append((g, cc))
    for g, cc in bad:
        ctx.add(
            "gpu-arch-unsupported",
            facts=[f"nvidia.gpus[{g.index}].compute_capability", "torch.arch_list"],
            fix_text=_install_fix(ctx, exclude=_variant_name(f)),
            gpu=_gpu_label(g),
            sm=_sm(cc),
            cc=cc,
            torch=t.version,
            arch=" ".join(arch),
            source=source,
        )


def _rule_rocm_gfx(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if _build_kind(f) != "rocm" or not f.rocm.gpus:
        return
    v = _variant_row(ctx)
    if v is None or not getattr(v, "gfx", None):
        return
    env = f.environment
    override = env.get("HSA_OVERRIDE_GFX_VERSION") or f.rocm.hsa_override_gfx_version
    unsupported = [g for g in f.rocm.gpus if g.gfx and not mx.gfx_supported(v, g.gfx)]
    if not unsupported:
        return
    supported = [g for g in f.rocm.gpus if g.gfx and mx.gfx_supported(v, g.gfx)]
    dgpus_bad = [g for g in unsupported if not g.integrated]
    igpus_bad = [g for g in unsupported if g.integrated]
    hip_visible = env.get("HIP_VISIBLE_DEVICES") or f.rocm.hip_visible_devices
    for g in dgpus_bad:
        ov = ctx.matrix.rocm_override(g.gfx) if ctx.matrix is not None else None
        if ov is not None and override == ov.value:
            continue  # running on the documented override
        if ov is not None and override and override != ov.value:
            ctx.add(
                "rocm-gfx-unsupported",
                detail="wrong_override",
                fix="override",
                facts=["rocm.gpus", "environment.HSA_OVERRIDE_GFX_VERSION"],
                gpu=f"GPU{g.index} {g.name or ''}".strip(),
                gfx=g.gfx,
                variant=v.name,
                torch=t.version,
                targets=" ".join(v.gfx),
                override=override,
                value=ov.value,
                as_gfx=ov.as_gfx,
            )
            continue
        fix_key = "override" if ov is not None else None
        ctx.add(
            "rocm-gfx-unsupported",
            fix=fix_key,
            fix_text=None if ov is not None else _install_fix(ctx, exclude=v.name),
            facts=["rocm.gpus", "torch.hip"],
            gpu=f"GPU{g.index} {g.name or ''}".strip(),
            gfx=g.gfx,
            variant=v.name,
            torch=t.version,
            targets=" ".join(v.gfx),
            override=override or "-",
            value=ov.value if ov else "",
            as_gfx=ov.as_gfx if ov else "",
        )
    if igpus_bad and (supported or [g for g in f.rocm.gpus if not g.integrated]):
        keep = [g for g in f.rocm.gpus if not g.integrated]
        if hip_visible is not None and all(str(g.index) not in hip_visible.split(",") for g in igpus_bad):
            return
        ctx.add(
            "rocm-gfx-unsupported",
            severity="warn",
            detail="igpu",
            fix="igpu",
            facts=["rocm.gpus", "environment.HIP_VISIBLE_DEVICES"],
            gpu=", ".join(f"GPU{g.index} {g.name or ''} ({g.gfx})".replace("  ", " ") for g in igpus_bad),
            gfx=", ".join(g.gfx or "?" for g in igpus_bad),
            variant=v.name,
            torch=t.version,
            targets=" ".join(v.gfx),
            keep=",".join(str(g.index) for g in keep),
        )


def _pair_rule(ctx: _Ctx, pkg: str, installed: str | None, expected: str | None, code: str, strict_suffix: bool) -> None:
    t = ctx.facts.torch
    if not installed or not t.version:
        return
    tv, iv = _local(t.version), _local(installed)
    reason = None
    if expected and _public(installed) != expected:
        reason = "version"
    elif tv and iv and tv != iv:
        kinds = [mx.variant_kind(x) for x in (tv, iv)]
        same_kind = all(kinds) and kinds[0][0] == kinds[1][0]  # type: ignore[index]
        if strict_suffix or not same_kind:
            reason = "variant"
    if reason is None:
        return
    variant = _variant_name(ctx.facts)
    want = expected or _public(installed)
    index = _index_for(variant) if tv else None
    cmd = f"{_python(ctx.facts)} -m pip install --force-reinstall --no-deps \"{pkg}=={want}\""
    if index:
        cmd += f" --index-url {index}"
    ctx.add(
        code,
        detail=reason,
        facts=["torch.version", f"torch.{pkg}_version"],
        fix_text=cmd,
        torch=t.version,
        installed=installed,
        expected=(want + (f"+{tv}" if tv else "")),
        pkg=pkg,
    )


def _rule_pairs(ctx: _Ctx) -> None:
    t = ctx.facts.torch
    if not t.installed or ctx.matrix is None:
        return
    try:
        tv_exp, ta_exp = ctx.matrix.paired(_public(t.version))
    except Exception:
        tv_exp = ta_exp = None
    if _release(ctx, t.version) is None:
        return
    # torchvision: exact pairing and the same variant (aarch64 torchvision wheels carry no suffix: no suffix, no check)
    _pair_rule(ctx, "torchvision", t.torchvision_version, tv_exp, "torchvision-mismatch", strict_suffix=True)
    # torchaudio: built on the stable ABI from 2.12 on (cu130 relabelled cu132): the build kind must match
    _pair_rule(ctx, "torchaudio", t.torchaudio_version, ta_exp, "torchaudio-mismatch", strict_suffix=False)


def _rule_jetson(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    j = f.jetson
    if not j.is_jetson or not t.installed:
        return
    row = None
    if ctx.matrix is not None:
        try:
            row = ctx.matrix.jetson_row(j.l4t_release, j.jetpack)
        except Exception:
            row = None
    variant = _variant_name(f) or ""
    thor = _vt(j.l4t_release)[:1] >= (38,) if j.l4t_release else False
    pytorch_ok = bool(row is not None and getattr(row, "use_pytorch_index", False)) or thor
    wrong = None
    if t.cuda is None and not t.hip:
        wrong = "cpu"
    elif re.match(r"^cu\d+$", variant):
        if not pytorch_ok:
            wrong = "pytorch"
        elif thor and _vt(t.cuda)[:1] < (13,):
            wrong = "thor"
    if wrong is None:
        return
    if row is not None and getattr(row, "variant", None):
        fix_text = f"stackdoctor install --variant {row.variant}"
    elif thor:
        fix_text = "stackdoctor install --variant cu130"
    else:
        fix_text = None
    ctx.add(
        "jetson-wrong-wheel",
        detail=wrong,
        fix=None if fix_text else "default",
        fix_text=fix_text,
        facts=["jetson.l4t_release", "torch.version", "torch.cuda"],
        torch=t.version,
        model=j.model or "Jetson",
        l4t=j.l4t_release or "?",
        jetpack=j.jetpack or "?",
    )


def _mac_x86(f: Facts) -> bool:
    """macOS where the target Python runs x86_64 (an Intel Mac, or Rosetta on Apple silicon)."""
    if not (f.apple.is_macos or f.platform.system == "Darwin"):
        return False
    return bool(f.apple.rosetta) or f.apple.arch == "x86_64" or (f.platform.machine == "x86_64" and f.apple.arch != "arm64")


def _rule_macos(ctx: _Ctx) -> None:
    f, t, a = ctx.facts, ctx.facts.torch, ctx.facts.apple
    if not (a.is_macos or f.platform.system == "Darwin"):
        return
    if _mac_x86(f) and (not t.installed or _vt(t.version) > (2, 2, 2)):
        ctx.add(
            "macos-x86-torch-too-new",
            detail="rosetta" if a.rosetta or a.arch == "arm64" else "intel",
            fix="rosetta" if a.rosetta or a.arch == "arm64" else "intel",
            facts=["apple.arch", "apple.rosetta", "platform.machine"],
            torch=t.version or "-",
            python=_python(f),
        )
    if not t.installed or t.mps_available is not False:
        return
    rel = _release(ctx, t.version)
    mps_floor = getattr(rel, "mps_min_macos", None) if rel is not None else None
    if a.rosetta or _mac_x86(f) and a.arch == "arm64":
        key = "rosetta"
    elif t.mps_built is False:
        key = "not_built"
    elif mps_floor and a.macos_version and _vt(a.macos_version) < _vt(mps_floor):
        key = "old_macos"
    elif a.arch == "x86_64" or (a.chip and "Intel" in a.chip):
        return  # Intel Macs have no MPS in current torch: not a problem to fix
    else:
        key = "default"
    older = None
    if key == "old_macos" and ctx.matrix is not None:
        for r in getattr(ctx.matrix, "releases", ()):
            if r.mps_min_macos and _vt(a.macos_version) >= _vt(r.mps_min_macos):
                older = str(r.version)
                break
    ctx.add(
        "mps-unavailable",
        detail=key,
        fix=key if (key != "old_macos" or older) else "old_macos_no_torch",
        facts=["torch.mps_available", "torch.mps_built", "apple.macos_version", "apple.rosetta"],
        torch=t.version,
        macos=a.macos_version or "?",
        floor=mps_floor or "?",
        older=older or "",
        python=_python(f),
    )


_CONDA_CUDA = ("cudatoolkit", "cudnn", "nccl", "pytorch-cuda", "cuda-runtime", "cuda-cudart", "cuda-libraries", "cuda-toolkit", "libcublas", "libcusparse", "libnvjitlink")


def _rule_conda_pip(ctx: _Ctx) -> None:
    t = ctx.facts.torch
    if not t.installed or not t.conda_packages:
        return
    pip_torch = bool(_local(t.version)) or any(k.startswith("nvidia-") for k in t.distributions)
    conda_torch = "pytorch" in t.conda_packages
    cuda_libs = [p for p in t.conda_packages if p in _CONDA_CUDA]
    if pip_torch and (conda_torch or cuda_libs):
        names = (["pytorch"] if conda_torch else []) + cuda_libs
        ctx.add(
            "conda-pip-mix",
            facts=["torch.conda_packages", "torch.version", "torch.distributions"],
            fix_text=f"conda remove --force {' '.join(names)}",
            packages=", ".join(names),
            torch=t.version,
        )


# ---------------------------------------------------------------------------- rules: runtime


def _visible(value: str, gpus: Sequence[Any], uuid_attr: str = "uuid") -> int:
    """How many devices a CUDA_VISIBLE_DEVICES-style value leaves (CUDA stops at the first invalid entry)."""
    v = value.strip()
    if v == "" or v in ("-1", "NoDevFiles", "none", "void"):
        return 0
    seen: list[int] = []
    for tok in v.split(","):
        tok = tok.strip()
        if re.fullmatch(r"-?\d+", tok):
            i = int(tok)
            if i < 0 or i >= len(gpus) or i in seen:
                break
            seen.append(i)
        elif tok.startswith(("GPU-", "MIG-")):
            if tok.startswith("MIG-"):
                seen.append(-len(seen) - 1)
                continue
            hit = [k for k, g in enumerate(gpus) if (getattr(g, uuid_attr, None) or "").startswith(tok)]
            if not hit:
                # uuids unknown to the facts: cannot judge this entry, count it
                if not any(getattr(g, uuid_attr, None) for g in gpus):
                    seen.append(-len(seen) - 1)
                    continue
                break
            seen.append(hit[0])
        else:
            break
    return len(seen)


def _rule_visible_devices(ctx: _Ctx) -> None:
    env = ctx.facts.environment
    n, r = ctx.facts.nvidia, ctx.facts.rocm
    if "CUDA_VISIBLE_DEVICES" in env and n.gpus and _visible(env["CUDA_VISIBLE_DEVICES"], n.gpus) == 0:
        ctx.add(
            "cuda-visible-devices-hides-all",
            facts=["environment.CUDA_VISIBLE_DEVICES", "nvidia.gpus"],
            var="CUDA_VISIBLE_DEVICES",
            value=env["CUDA_VISIBLE_DEVICES"],
            count=len(n.gpus),
        )
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if var in env and r.gpus and _visible(env[var], r.gpus) == 0:
            ctx.add(
                "cuda-visible-devices-hides-all",
                facts=[f"environment.{var}", "rocm.gpus"],
                var=var,
                value=env[var],
                count=len(r.gpus),
            )


def _rule_cuda_unavailable(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    kind = _build_kind(f)
    if kind not in ("cuda", "rocm") or t.cuda_available is not False:
        return
    if kind == "cuda" and not (f.nvidia.gpus or _nvidia_pci(f) or f.jetson.is_jetson):
        return
    if kind == "rocm" and not f.rocm.gpus:
        return
    causes = [
        c
        for c in (
            "driver-missing",
            "driver-library-mismatch",
            "driver-too-old",
            "cuda-visible-devices-hides-all",
            "container-no-gpu",
            "wsl-driver",
            "rocm-kfd-permission",
            "amdgpu-not-loaded",
            "gpu-lost",
            "torch-backend-mismatch",
            "jetson-wrong-wheel",
            "gpu-arch-unsupported",
            "rocm-gfx-unsupported",
        )
        if ctx.has(c)
    ]
    key = "explained" if causes else "default"
    err = (t.cuda_error or "").strip()
    if not causes and "too old" in err.lower():
        key = "too_old"
    ctx.add(
        "cuda-unavailable",
        detail=key,
        fix=key,
        facts=["torch.cuda_available", "torch.cuda_error"],
        torch=t.version,
        error=err or "-",
        causes=", ".join(causes),
        explain_cmd=f"stackdoctor explain {causes[0]}" if causes else "",
        python=_python(f),
    )
    ctx.checked.discard("runtime")


_SHADOW_DIR = re.compile(r"(/cuda[^/]*/|/cuda$|/cuda[^/]*$|cudnn|nccl|/conda[^/]*/|/miniconda|/anaconda|/mambaforge|/miniforge|/envs/)", re.I)


def _rule_lib_path(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if f.platform.system not in (None, "Linux"):
        return
    ld = f.environment.get("LD_LIBRARY_PATH", "")
    entries = [e for e in ld.split(":") if e]
    conda_prefix = f.environment.get("CONDA_PREFIX")
    bad = [e for e in entries if _SHADOW_DIR.search(e + "/") or (conda_prefix and e.rstrip("/").startswith(conda_prefix.rstrip("/") + "/lib"))]
    if f.platform.is_wsl:
        bad = [e for e in bad if not e.startswith("/usr/lib/wsl")]
    err = t.import_error or t.cuda_error or ""
    symptom = re.search(r"undefined symbol: __nvJitLink\w*|lib(cudnn|cublas|cusparse|nvJitLink|nccl)[\w.]*: cannot open shared object file", err)
    bundled = _build_kind(f) == "cuda" and any(k.startswith("nvidia-") for k in t.distributions)
    if not bad or not (bundled or symptom):
        return
    keep = [e for e in entries if e not in bad]
    fix = f"export LD_LIBRARY_PATH={':'.join(keep)}" if keep else "unset LD_LIBRARY_PATH"
    ctx.add(
        "lib-path-shadowing",
        severity="fail" if symptom else "warn",
        detail="symptom" if symptom else "default",
        facts=["environment.LD_LIBRARY_PATH", "torch.distributions"],
        fix_text=fix,
        dirs=", ".join(bad),
        error=symptom.group(0) if symptom else "",
    )


def _rule_glibc(ctx: _Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if f.platform.system not in (None, "Linux") or f.platform.libc not in (None, "glibc") or not f.platform.glibc_version:
        return
    err = t.import_error or ""
    sym = re.search(r"GLIBC_(\d+\.\d+)", err)
    need: tuple[int, ...] | None = _vt(sym.group(1)) if sym else None
    what = t.version or ""
    if need is None and ctx.matrix is not None:
        v = _variant_row(ctx) if t.installed else None
        published = [r for r in getattr(ctx.matrix, "releases", ()) or () if r.variants]
        rel = _release(ctx, t.version) if t.installed else (published[0] if published else None)
        if rel is not None and not t.installed:
            what = str(rel.version)
            v = rel.variant("cpu") or (rel.variants[0] if rel.variants else None)
        floors = []
        arch = (f.platform.machine or "x86_64").lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
        for tag in getattr(v, "platforms", ()) or ():
            os_, tarch, floor = mx.parse_platform(tag)
            if os_ == "linux" and tarch == arch:
                floors.append(floor or _vt(getattr(rel, "manylinux_glibc", None) or "") or None)
        floors = [x for x in floors if x]
        if floors:
            need = tuple(min(floors))  # type: ignore[arg-type]
    if not need or _vt(f.platform.glibc_version) >= tuple(need):
        return
    need_s = ".".join(str(x) for x in need)
    broken = bool(sym) or t.installed
    ctx.add(
        "glibc-too-old",
        severity="fail" if broken else "warn",
        detail="import" if sym else ("installed" if t.installed else "default"),
        facts=["platform.glibc_version", "torch.version"],
        glibc=f.platform.glibc_version,
        need=need_s,
        torch=what or "-",
        error=sym.group(0) if sym else "",
        os=f.platform.os_name or f.platform.os_id or "Linux",
    )


def _rule_nvcc(ctx: _Ctx) -> None:
    f, t, tk = ctx.facts, ctx.facts.torch, ctx.facts.cuda_toolkit
    if _build_kind(f) != "cuda" or not t.cuda or not tk.nvcc_version:
        return
    ctx.checked.add("toolkit")
    if _vt(tk.nvcc_version)[:1] == _vt(t.cuda)[:1]:
        return
    major = _vt(t.cuda)[0]
    match = next((k for k in tk.toolkits if _vt(k.nvcc_version or k.version_json)[:1] == (major,)), None)
    if match is not None:
        root = re.sub(r"[/\\]bin[/\\]nvcc(\.exe)?$", "", match.path)  # C:\...\v12.4\bin\nvcc.exe too
        fix_text = f"export CUDA_HOME={root} PATH={root}/bin:$PATH"
    else:
        fix_text = None
    ctx.add(
        "nvcc-mismatch",
        fix=None if fix_text else "default",
        fix_text=fix_text,
        facts=["cuda_toolkit.nvcc_version", "torch.cuda"],
        nvcc=tk.nvcc_version,
        nvcc_path=tk.nvcc_path or "nvcc",
        cuda=t.cuda,
        major=major,
        torch=t.version,
    )


# ---------------------------------------------------------------------------- rules: thunderbolt


def _tb_speed_ok(p: Any) -> bool:
    return p.link_speed_gbps is not None and p.link_speed_gbps > 40


def _rule_thunderbolt(ctx: _Ctx) -> None:
    f, tb = ctx.facts, ctx.facts.thunderbolt
    if not tb.present and not tb.interfaces:
        return
    macos = f.apple.is_macos or f.platform.system == "Darwin"
    peers = [p for p in tb.ports if p.peer or p.peer_uuid]
    bridges = [i for i in tb.interfaces if i.kind == "thunderbolt-bridge"]
    if tb.bridge_enabled and len(peers) >= 2:
        ctx.add(
            "thunderbolt-bridge-loop",
            facts=["thunderbolt.bridge_enabled", "thunderbolt.ports"],
            bridge=bridges[0].name if bridges else "bridge0",
            peers=", ".join(f"{p.name} -> {p.peer or p.peer_uuid}" for p in peers),
        )
    if not macos:
        return
    tb5 = [p for p in tb.ports if _tb_speed_ok(p) or p.generation == "TB5"]
    ver = f.apple.macos_version or f.platform.os_version
    if tb.rdma_state == "disabled" and tb5 and ver and _vt(ver) >= (26, 2):
        ctx.add(
            "thunderbolt-rdma-disabled",
            facts=["thunderbolt.rdma_state", "apple.macos_version"],
            macos=ver,
            ports=", ".join(p.name for p in tb5),
        )
    rdma_on = tb.rdma_state == "enabled" or bool(tb.rdma_devices)
    slow = [p for p in peers if p.link_speed_gbps is not None and p.link_speed_gbps <= 40]
    if rdma_on and slow:
        ctx.add(
            "thunderbolt-link-slow",
            facts=["thunderbolt.ports"],
            ports=", ".join(f"{p.name} ({p.link_speed_gbps:g} Gb/s, peer {p.peer or p.peer_uuid})" for p in slow),
        )
    by_name = {i.name: i for i in tb.interfaces}
    for dev in tb.rdma_devices:
        ifname = dev[len("rdma_") :] if dev.startswith("rdma_") else dev
        iface = by_name.get(ifname)
        if iface is None or not iface.up:
            continue
        # address_kind also reads redacted addresses ("<ip-linklocal-1>"), so a redacted report replays the same
        v4 = [a for a in iface.addresses if address_family(a) == 4]
        if v4 and all(address_kind(a) == "linklocal" for a in v4) or (not v4 and tb.bridge_enabled):
            ctx.add(
                "thunderbolt-link-local-ip",
                facts=[f"thunderbolt.interfaces.{ifname}.addresses"],
                iface=ifname,
                device=dev,
                addresses=", ".join(iface.addresses) or "-",
            )


# ---------------------------------------------------------------------------- ok findings

_OK_LAYERS = ("platform", "driver", "gpu", "python", "torch", "runtime", "toolkit", "network")


def _checked_layers(ctx: _Ctx) -> set[str]:
    f = ctx.facts
    layers = set(ctx.checked)
    if f.platform.system:
        layers.add("platform")
    if f.nvidia.driver_version or f.rocm.amdgpu_loaded:
        layers.add("driver")
    if f.nvidia.gpus or f.rocm.gpus or f.apple.chip or f.jetson.is_jetson:
        layers.add("gpu")
    if f.python.version:
        layers.add("python")
    t = f.torch
    if t.installed and not t.import_error and (t.cuda_available or t.mps_available or t.xpu_available or (_build_kind(f) == "cpu" and not _usable_accelerator(f))):
        layers.add("runtime")
    if f.thunderbolt.present and (f.thunderbolt.ports or f.thunderbolt.interfaces):
        layers.add("network")
    return layers


def _ok_detail(ctx: _Ctx, layer: str) -> str:
    f = ctx.facts
    t = f.torch
    if layer == "platform":
        return ctx.msg(f"{layer}-ok", "detail", "default", os=f.platform.os_name or f.platform.system or "?", machine=f.platform.machine or "?")
    if layer == "driver":
        what = f"NVIDIA {f.nvidia.driver_version} (CUDA {f.nvidia.cuda_driver_version or '?'})" if f.nvidia.driver_version else "amdgpu"
        return ctx.msg("driver-ok", "detail", "default", driver=what)
    if layer == "gpu":
        names = [f"{g.name or '?'}" + (f" (sm_{g.compute_capability.replace('.', '')})" if g.compute_capability else "") for g in f.nvidia.gpus]
        names += [f"{g.name or '?'} ({g.gfx})" for g in f.rocm.gpus]
        if not names and f.apple.chip:
            names = [f.apple.chip]
        if not names and f.jetson.is_jetson:
            names = [f.jetson.model or "Jetson"]
        return ctx.msg("gpu-ok", "detail", "default", gpus=", ".join(names) or "-")
    if layer == "python":
        return ctx.msg("python-ok", "detail", "default", python=f.python.version or "?", executable=_python(f))
    if layer == "torch":
        return ctx.msg("torch-ok", "detail", "default", torch=t.version or "?", variant=_variant_name(f) or "-")
    if layer == "runtime":
        if t.cuda_available:
            dev = "ROCm/HIP" if t.hip else "CUDA"
            return ctx.msg("runtime-ok", "detail", "gpu", backend=dev, count=t.device_count if t.device_count is not None else "?")
        if t.mps_available:
            return ctx.msg("runtime-ok", "detail", "gpu", backend="MPS", count=1)
        if t.xpu_available:
            return ctx.msg("runtime-ok", "detail", "gpu", backend="XPU", count=t.device_count if t.device_count is not None else "?")
        return ctx.msg("runtime-ok", "detail", "cpu")
    if layer == "toolkit":
        return ctx.msg("toolkit-ok", "detail", "default", nvcc=f.cuda_toolkit.nvcc_version or "?", cuda=t.cuda or "?")
    if layer == "network":
        return ctx.msg("network-ok", "detail", "default", ports=len(f.thunderbolt.ports), interfaces=len(f.thunderbolt.interfaces))
    return ""


def _ok_findings(ctx: _Ctx) -> list[Finding]:
    bad_layers = {f.layer for f in ctx.out if f.severity in ("warn", "fail")}
    if any(f.code in ("probe-failed", "probe-timeout") and "target" in " ".join(f.facts) for f in ctx.out):
        bad_layers |= {"python", "torch", "runtime"}
    out = []
    for layer in _OK_LAYERS:
        if layer in _checked_layers(ctx) and layer not in bad_layers:
            out.append(catalog.make_finding(f"{layer}-ok", ctx.lang, severity="ok", detail=_ok_detail(ctx, layer)))
    return out


# ---------------------------------------------------------------------------- rule order

_RULES: tuple[Callable[[_Ctx], None], ...] = (
    _rule_probes,
    _rule_container,
    _rule_driver_missing,
    _rule_driver_library_mismatch,
    _rule_source_conflict,
    _rule_wsl,
    _rule_amd_driver,
    _rule_gpu_lost,
    _rule_gpu_health,
    _rule_python,
    _rule_pynvml,
    _rule_glibc,
    _rule_lib_path,
    _rule_torch_presence,
    _rule_torch_build,
    _rule_driver_too_old,
    _rule_arch,
    _rule_rocm_gfx,
    _rule_pairs,
    _rule_jetson,
    _rule_macos,
    _rule_conda_pip,
    _rule_visible_devices,
    _rule_cuda_unavailable,
    _rule_nvcc,
    _rule_thunderbolt,
)
