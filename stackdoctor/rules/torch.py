"""Rules about the installed torch wheel: missing, broken, built for the wrong accelerator or platform, mis-paired."""

from __future__ import annotations

import re
from typing import Any

from stackdoctor import kinds
from stackdoctor import matrix as mx
from stackdoctor.core import shell, texts
from stackdoctor.core.units import format_bytes
from stackdoctor.core.versions import local, public
from stackdoctor.model.facts import is_mac, runs_x86
from stackdoctor.model.view import MachineView
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import (
    build_version_facts,
    built_for,
    import_failed,
    imports,
    index_for,
    install_fix,
    python_exe,
    read_only,
    release,
    variant_name,
)

# glibc's own libraries (what a manylinux wheel needs and musl does not provide)
_GLIBC_LIBS = re.compile(r"^(?:libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux[-\w.]*\.so\.\d)$")


@rule("torch-lib-stale", severity="fail", layer="torch", defers_to=("lib-path-shadowing",))
def torch_lib_stale(ctx: Ctx) -> None:
    """A library torch loaded lacks a symbol torch (or a library of its) was linked against: the copy that
    was loaded is older or newer than the one the wheel pins. Shadowing by LD_LIBRARY_PATH has its own
    finding; otherwise the usual cause is a second family of NVIDIA runtime wheels (-cu11 beside -cu12)
    or a runtime wheel upgraded or downgraded by another package."""
    f, t = ctx.view, ctx.view.facts.torch
    if ctx.has("lib-path-shadowing"):
        return
    proof = next((e for e in f.evidence if e.proves == "torch-lib-stale" and e.source.startswith("torch.")), None)
    predicted = next((p for p in t.linkage if p.kind in ("symbol", "version")), None) if read_only(t) else None
    if proof is None and predicted is None:
        return
    extra = _stale_runtimes(f)
    version = public(t.version) if t.version else None
    index = index_for(ctx, variant_name(f)) if version else None
    reinstall = _pip(f, "install", "--force-reinstall", f"torch=={version}", *(["--index-url", index] if index else [])) if version else "stackdoctor install"
    if proof is None and predicted is not None:  # read from the files only: what the loader would say
        symbol = (predicted.symbol or "") + (f"@{predicted.version}" if predicted.version else "") if predicted.symbol else f"version {predicted.version}"
        pv: dict[str, Any] = {"torch": t.version or "?", "lib": predicted.library.rsplit("/", 1)[-1], "path": predicted.library,
                              "needed_by": predicted.needed_by.rsplit("/", 1)[-1], "symbol": symbol, "dists": ", ".join(extra)}
        facts = ["torch.linkage", "torch.distributions"]
        if extra:
            ctx.add(detail="predicted_duplicates", facts=facts, fix_text=_pip(f, "uninstall", "-y", *extra), **pv)
        else:
            ctx.add(detail="predicted", facts=facts, fix_text=reinstall, **pv)
        return
    assert proof is not None
    values: dict[str, Any] = {
        "torch": t.version or "?",
        "lib": proof.values.get("lib", "?").rsplit("/", 1)[-1],
        "symbol": proof.values.get("symbol", "?"),
        "error": proof.line,
        "dists": ", ".join(extra),
    }
    if extra:
        ctx.add(detail="duplicates", facts=[proof.source, "torch.distributions"], fix_text=_pip(f, "uninstall", "-y", *extra), **values)
    else:
        ctx.add(detail="default", facts=[proof.source, "torch.distributions"], fix_text=reinstall, **values)


def _stale_runtimes(f: MachineView) -> list[str]:
    """Every kind's runtime wheels of another family beside its build's own (``nvidia-cublas-cu11`` beside -cu12)."""
    return [d for a in kinds.ALL for d in a.stale_runtimes(f)]


_IMPORT_OWN = ("glibc-too-old", "lib-path-shadowing", "torch-lib-stale")


# the kinds' findings whose evidence can be the import error itself ("hipErrorNoBinaryForGpu" aborts `import torch`)
# say they precede this one (rules.core: precedes=): the codes it defers to beyond its own
@rule("torch-import-failed", severity="fail", layer="torch", defers_to=_IMPORT_OWN)
def torch_import_failed(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if f.facts.python.error and not t.installed and not t.import_error:
        return  # the target interpreter itself is unknown: probe-failed says so
    broken = next((p for p in t.linkage if p.kind in ("missing", "unloadable")), None) if read_only(t) else None
    glibc_lib = next((p for p in t.linkage if p.kind == "missing" and _GLIBC_LIBS.match(p.library.rsplit("/", 1)[-1])), None)
    if f.facts.platform.libc == "musl" and glibc_lib is not None and read_only(t):  # a manylinux wheel on musl (Alpine)
        ctx.add(detail="predicted_musl", fix="musl", facts=["platform.libc", "torch.linkage"], lib=glibc_lib.library,
                needed_by=glibc_lib.needed_by, loader=f.facts.platform.sources.get("libc", "its loader").removeprefix("file:"), python=python_exe(f))
        return
    if broken is not None and not ctx.has("glibc-too-old", "lib-path-shadowing", "torch-lib-stale"):
        ctx.add(
            detail="predicted" if broken.kind == "missing" else "unloadable",
            facts=["torch.linkage"],
            fix_text=install_fix(ctx, keep_torch=False),
            lib=broken.library,
            needed_by=broken.needed_by,
            why=broken.detail or "-",
            python=python_exe(f),
        )
        return
    if not import_failed(t) or ctx.has("glibc-too-old", "lib-path-shadowing", "torch-lib-stale"):
        return  # explained by those, each with its own fix
    import_proven = set(ctx.current.defers_to if ctx.current else ()) - set(_IMPORT_OWN)
    proven = {e.proves for e in f.evidence if e.source == "torch.import_error"} & import_proven
    if proven and ctx.has(*proven):
        return  # the error is that finding's evidence, quoted there with its fix
    ctx.add(
        facts=["torch.import_error", "torch.import_error_kind"],
        fix_text=install_fix(ctx, keep_torch=False),
        error=t.import_error,
        python=python_exe(f),
    )


def _pip(f: MachineView, *args: str) -> str:
    """``<python> -m pip ...`` as one line to paste: every word quoted for the target's shell (a version or an index
    URL read from the machine stays one word, whatever it holds)."""
    exe = f.facts.python.executable or "python"
    return shell.format_command([exe, "-m", "pip", *args], windows=f.facts.platform.system == "Windows")


@rule("install-unfinished", severity="fail", layer="torch")
def install_unfinished(ctx: Ctx) -> None:
    """A `stackdoctor install` into the target was killed (SIGKILL, power loss) before it finished: its journal
    and the previous torch's backup are still in the environment, and the torch family may be half replaced."""
    f = ctx.view
    if not f.facts.python.unfinished_install or f.facts.python.install_live:
        return
    ctx.add(
        facts=["python.unfinished_install"],
        prefix=f.facts.python.env_prefix or "?",
        state=texts.sentence(f.facts.python.unfinished_install, ctx.lang),  # the probe's words ("phase install: ..."), in the reader's language
        python=python_exe(f),
        fix_text=f"stackdoctor install --python {python_exe(f)} --recover",
    )


@rule("install-in-progress", severity="warn", layer="torch")
def install_in_progress(ctx: Ctx) -> None:
    """A `stackdoctor install` into the target is running now (its journal's process is alive): the torch family is
    being changed, so what is read of it now may be half old, half new; it is not a stopped install to recover."""
    f = ctx.view
    if not (f.facts.python.unfinished_install and f.facts.python.install_live):
        return
    ctx.add(
        facts=["python.install_live", "python.unfinished_install"],
        prefix=f.facts.python.env_prefix or "?",
        who=f.facts.python.install_live,
        state=f.facts.python.unfinished_install,
        python=python_exe(f),
    )


@rule("install-unprinted", severity="warn", layer="torch")
def install_unprinted(ctx: Ctx) -> None:
    """The last `stackdoctor install` into the target could not print its last lines (its output, a pipe into `tee` or
    a terminal, closed: the same Ctrl-C stopped the reader); it kept them in the environment, and they are shown here."""
    f = ctx.view
    if not f.facts.python.install_unprinted:
        return
    import os

    from stackdoctor.core import shell

    path = os.path.join(f.facts.python.env_prefix or "", ".stackdoctor-unprinted.json")
    ctx.add(
        facts=["python.install_unprinted"],
        path=path,
        lines=" | ".join(f.facts.python.install_unprinted),
        count=len(f.facts.python.install_unprinted),
        word=shell.word(path, windows=f.facts.platform.system == "Windows"),
    )


@rule("install-backup-left", severity="warn", layer="torch")
def install_backup_left(ctx: Ctx) -> None:
    """A `stackdoctor install` into the target finished (it committed the new build), but was stopped right after
    `done:`, before it removed the backup of the torch it replaced: that folder takes space (hundreds of MB for a real
    torch) and nothing needs it. Any later install (or `--recover`) into the environment removes it."""
    f = ctx.view
    if not f.facts.python.install_backups:
        return
    known = [n for n in f.facts.python.install_backups.values() if n >= 0]
    ctx.add(
        facts=["python.install_backups"],
        paths=", ".join(f.facts.python.install_backups),
        size=format_bytes(sum(known)) if known else "?",
        python=python_exe(f),
        fix_text=f"stackdoctor install --python {python_exe(f)} --recover",
    )


@rule("torch-missing", severity="warn", layer="torch")
def torch_missing(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if f.facts.python.error and not t.installed and not t.import_error:
        return
    if t.installed or import_failed(t) or t.import_error_kind == "timeout":
        return
    if runs_x86(f.facts):
        return  # macos-x86-torch-too-new tells the whole story
    ctx.add(facts=["torch.installed"], fix_text="stackdoctor install", python=python_exe(f))


@rule("torch-files-unreadable", severity="warn", layer="torch")
def torch_files_unreadable(ctx: Ctx) -> None:
    """torch was read from its files only (not imported), and they do not say which torch it is."""
    f, t = ctx.view, ctx.view.facts.torch
    if not read_only(t) or (t.version and t.location):
        return
    ctx.add(
        facts=["torch.installed", "torch.static_errors"],
        location=t.location or "no torch package directory",
        errors="; ".join(t.static_errors) or "-",
        python=python_exe(f),
    )


@rule("torch-files-partial", severity="warn", layer="torch", defers_to=("torch-files-unreadable",))
def torch_files_partial(ctx: Ctx) -> None:
    """Files of torch that are there but could not be read (a FIFO, mode 000, 0 bytes, cut short, not a
    library): named, so the fast path never says "ok" about what it did not read."""
    f, t = ctx.view, ctx.view.facts.torch
    if not t.static_unreadable or ctx.has("torch-files-unreadable"):
        return
    shown = t.static_unreadable[:6]
    more = len(t.static_unreadable) - len(shown)
    ctx.add(facts=["torch.static_unreadable"], files="; ".join(shown) + (f" (and {more} more)" if more > 0 else ""), python=python_exe(f))


@rule("torch-installed-twice", severity="warn", layer="torch")
def torch_installed_twice(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if len(t.duplicate_installs) < 2:
        return
    ctx.add(facts=["torch.duplicate_installs"], dists="; ".join(t.duplicate_installs[:4]), python=python_exe(f))


@rule("torch-cpu-only", severity="fail", layer="torch")
def torch_cpu_only(ctx: Ctx) -> None:
    """A CPU build on a machine whose accelerator torch could use with the right build (the accelerator
    model's answer, the same one ``install`` plans with); the fix is ``install``'s plan."""
    f, t = ctx.view, ctx.view.facts.torch
    acc = kinds.select(f.facts)
    if built_for(f) != kinds.CPU or acc is None or acc.build_kind == kinds.CPU:
        return
    said = acc.cpu_build()  # the kind's verdict on a CPU build (XPU builds are newer: a missed opportunity on Intel)
    if said is None:
        return
    ctx.add(
        severity=said[0],
        detail=said[1],
        facts=["torch.version", *build_version_facts()[:1], "reconciled.accelerator"],  # the first kind's build version (None: a CPU build)
        fix_text=install_fix(ctx, exclude="cpu"),
        torch=t.version,
        gpus=acc.named(f.facts),
        accelerator=texts.sentence(acc.label, ctx.lang),  # a kind's label in the reader's language (华为昇腾 NPU)
    )


@rule("torch-backend-mismatch", severity="fail", layer="torch")
def torch_backend_mismatch(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    kind = built_for(f)
    if kind is None or kind == kinds.CPU or any(a.judges_build(f.facts) for a in kinds.ALL):
        return
    # the build's own kinds have no device here, and another kind's device needs a build of its own (a Jetson's
    # needs none here: its own rule judged it above), else another kind's integrated GPU its builds carry code for (an APU)
    if any(a.targeted(kind) and a.present(f.facts) for a in kinds.ALL):
        return
    acc = next((a for a in kinds.ALL if not a.targeted(kind) and a.needs_build(f.facts)), None)
    apus: list[str] = []
    if acc is None:
        acc, apus = next(((a, found) for a in kinds.ALL if not a.targeted(kind) and (found := a.integrated_served(f, ctx.matrix))), (None, []))
    if acc is None:
        return
    ctx.add(
        facts=["torch.version", *build_version_facts()] + (["reconciled.gpus"] if apus else []),
        fix_text=install_fix(ctx, exclude=variant_name(f)),
        torch=t.version,
        build=next((a.build_label for a in kinds.ALL if a.build_kind == kind), kind),
        machine=acc.vendor_label,
        gpus=", ".join(apus) if apus else acc.named(f.facts),
    )


def _pair(ctx: Ctx, pkg: str, installed: str | None, expected: str | None, strict_suffix: bool) -> None:
    t = ctx.view.facts.torch
    if not installed or not t.version:
        return
    tv, iv = local(t.version), local(installed)
    reason = None
    if expected and public(installed) != expected:
        reason = "version"
    elif tv and iv and tv != iv:
        variant_kinds = [mx.variant_kind(x) for x in (tv, iv)]
        same_kind = bool(variant_kinds[0] and variant_kinds[1] and variant_kinds[0][0] == variant_kinds[1][0])
        if strict_suffix or not same_kind:
            reason = "variant"
    if reason is None:
        return
    want = expected or public(installed) or ""
    index = index_for(ctx, variant_name(ctx.view)) if tv else None
    cmd = _pip(ctx.view, "install", "--force-reinstall", "--no-deps", f"{pkg}=={want}", *(["--index-url", index] if index else []))
    ctx.add(
        detail=reason,
        facts=["torch.version", f"torch.{pkg}_version"],
        fix_text=cmd,
        torch=t.version,
        installed=installed,
        expected=want + (f"+{tv}" if tv else ""),
        pkg=pkg,
    )


@rule("torchvision-mismatch", severity="fail", layer="torch")
def torchvision_mismatch(ctx: Ctx) -> None:
    """torchvision pairs exactly with torch, and carries the same variant (aarch64 torchvision wheels carry none)."""
    t = ctx.view.facts.torch
    if not t.installed or release(ctx, t.version) is None:
        return
    expected, _ = ctx.matrix.paired(public(t.version))
    _pair(ctx, "torchvision", t.torchvision_version, expected, strict_suffix=True)


@rule("torchaudio-mismatch", severity="fail", layer="torch")
def torchaudio_mismatch(ctx: Ctx) -> None:
    """torchaudio is built on the stable ABI from 2.12 on (cu130 relabelled cu132): the build kind must match."""
    t = ctx.view.facts.torch
    if not t.installed or release(ctx, t.version) is None:
        return
    _, expected = ctx.matrix.paired(public(t.version))
    _pair(ctx, "torchaudio", t.torchaudio_version, expected, strict_suffix=False)


def _sorted_archs(archs: set[str]) -> str:
    """Arch ids in a natural order ("sm_75 sm_80 ... sm_120 compute_120"; gfx908 before gfx1100)."""

    def key(a: str) -> tuple[int, int, str]:
        m = re.match(r"(sm|compute)_(\d+)", a)
        if m:  # by number, sm_ before compute_ (PTX)
            return (int(m.group(2)), 1 if m.group(1) == "compute" else 0, a)
        return (len(a.split(":")[0]), 0, a)  # gfx9xx before gfx1xxx

    return " ".join(sorted(archs, key=key))


def _arch_key(arch: str) -> str:
    """The target an arch id names: ROCm gfx targets without their feature flags ("gfx90a:xnack-" ->
    "gfx90a": torch's list may leave them out), CUDA ids as they are ("sm_90" vs "sm_90a" differ)."""
    return arch.split(":", 1)[0] if arch.startswith("gfx") else arch


@rule("torch-arch-list-mismatch", severity="warn", layer="torch")
def torch_arch_list_mismatch(ctx: Ctx) -> None:
    """torch's own arch list (asked of the imported torch) and the GPU code its primary library carries
    (read from the file) are two witnesses of one fact; compared as sets, they must agree. The per-file
    extras (``arch_extra``: sm_90a in a few kernels) are not the build's list and are not compared."""
    f, t = ctx.view, ctx.view.facts.torch
    if not imports(t) or not t.arch_list_torch or not t.arch_list_files:
        return
    own = {_arch_key(a) for a in t.arch_list_torch}
    files = {_arch_key(a) for a in t.arch_list_files}
    if own == files:
        return
    variant = variant_name(f)
    index = index_for(ctx, variant) if variant and variant != kinds.CPU else None
    want = public(t.version or "")
    cmd = _pip(f, "install", "--force-reinstall", "--no-deps", f"torch=={want}", *(["--index-url", index] if index else []))
    ctx.add(
        facts=["torch.arch_list_torch", "torch.arch_list_files"],
        fix_text=cmd if t.version else None,
        fix=None if t.version else "default",
        torch=t.version or "?",
        own=_sorted_archs(own),
        own_source=t.sources.get("arch_list_torch") or next((c for a in kinds.ALL if (c := a.arch_list_call())), "torch"),
        files=_sorted_archs(files),
        library=t.sources.get("arch_list_files") or "torch's library",
        only_torch=_sorted_archs(own - files) or "-",
        only_files=_sorted_archs(files - own) or "-",
    )


@rule("conda-pip-mix", severity="warn", layer="torch")
def conda_pip_mix(ctx: Ctx) -> None:
    t = ctx.view.facts.torch
    if not t.installed or not t.conda_packages:
        return
    conda_runtime = {p for a in kinds.ALL for p in a.conda_runtime_packages()}  # the kinds' runtimes as conda packages
    pip_prefixes = tuple(p for a in kinds.ALL if (p := a.pip_runtime_prefix()))  # and as pip wheels
    from stackdoctor.model.facts import conda_name

    names = [conda_name(p) for p in t.conda_packages]  # conda-meta records are name-version-build
    pip_torch = bool(local(t.version)) or any(k.startswith(pip_prefixes) for k in t.distributions)
    conda_torch = "pytorch" in names
    runtime_libs = [p for p in names if p in conda_runtime]
    if pip_torch and (conda_torch or runtime_libs):
        names = (["pytorch"] if conda_torch else []) + runtime_libs
        ctx.add(
            facts=["torch.conda_packages", "torch.version", "torch.distributions"],
            fix_text=shell.format_command(["conda", "remove", "--force", *names], windows=ctx.view.facts.platform.system == "Windows"),
            packages=", ".join(names),
            torch=t.version,
        )


__all__ = ["is_mac"]


@rule("torch-numpy-missing", severity="warn", layer="runtime", defers_to=("torch-numpy-abi",))
def torch_numpy_missing(ctx: Ctx) -> None:
    """`import torch` warned "Failed to initialize NumPy": torch runs, every NumPy interop fails (a NumPy of the major
    torch was not built against is torch-numpy-abi's: NumPy loads, torch cannot use it)."""
    f, t = ctx.view, ctx.view.facts.torch
    if ctx.has("torch-numpy-abi"):
        return
    said = next((w for w in t.import_warnings if "Failed to initialize NumPy" in w), None)
    if said is None:
        return
    kind = "missing" if "No module named" in said else "broken"
    ctx.add(detail=kind, fix=kind, facts=["torch.import_warnings"], python=python_exe(f), warning=said)


@rule("torch-newer-than-matrix", severity="warn", layer="torch")
def torch_newer_than_matrix(ctx: Ctx) -> None:
    """The installed torch is newer than every release the matrix knows: its builds, GPU code and pairings are
    judged from nothing; `stackdoctor matrix learn` reads them from the index that serves it."""
    from packaging.version import InvalidVersion, Version

    t = ctx.view.facts.torch
    if not t.installed or not t.version or ctx.matrix is None or not ctx.matrix.releases:
        return
    try:
        installed = Version(public(t.version) or "")
    except InvalidVersion:
        return
    newest = ctx.matrix.releases[0].version
    if installed <= newest or ctx.matrix.release(installed) is not None:
        return
    variant = variant_name(ctx.view)
    label = t.version.split("+", 1)[1] if "+" in t.version else None
    index = f" --index {index_for(ctx, variant)}" if label and variant else ""
    ctx.add(
        facts=["torch.version"],
        torch=t.version,
        newest=str(newest),
        command=f"stackdoctor matrix learn --torch {installed}{index}",
    )
