"""The ``releases`` table: torch releases and their variants (the builds an index publishes), parsed and validated,
and how a later layer's row (a user's, a learned one) meets an earlier one."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from stackdoctor.matrix.model import (
    PatchRow,
    Release,
    Variant,
)
from stackdoctor.matrix.pure import (
    ARCH_RE,
    GFX_RE,
    PLUGIN_VARIANT_KINDS,
    PY_RE,
    VARIANT_KINDS,
    parse_platform,
    variant_kind,
)
from stackdoctor.matrix.reader import Ctx, LDict, check_keys
from stackdoctor.matrix.table import DERIVED, NOTE, UNKNOWN, Field, Part, Table, one_row, read_pythons

# ---------------------------------------------------------------------------- releases


def read_arch_list(ctx: Ctx, values: Sequence[str], line: int, where: str) -> tuple[str, ...]:
    """A variant's GPU arch list (``arch_list``, ``arch_by_platform``), each ``+PTX`` entry read as its arch and its PTX."""
    out: list[str] = []
    for a in values:
        m = ARCH_RE.match(a)
        if not m:
            raise ctx.fail(line, where, f"unparsable CUDA arch {a!r} (expected like \"sm_90\", \"sm_120+PTX\" or \"compute_90\")")
        base = f"{m.group('kind')}_{m.group('num')}{m.group('suffix')}"
        out.append(base)
        if m.group("ptx"):
            out.append(f"compute_{m.group('num')}{m.group('suffix')}")
    return tuple(out)


_VARIANTS = Part(
    "releases[].variants[]",
    (
        Field("name", "string, required", "the index directory: `cpu`, `cuXYZ` (`cu126` = CUDA 12.6), `rocmX.Y[.Z]`, `xpu`; anything else is an error"),
        Field("kind", "string", "optional; if given must agree with the name (`cpu`, `cuda`, `rocm`, `xpu`)"),
        Field("source", "string, required", ""),
        Field(
            "platforms", "list",
            "**compatibility** platform tags: what the target must accept. `manylinux_2_28_x86_64` (glibc 2.28), `manylinux_2_17_x86_64` "
            "(wheels named `linux_x86_64` but built on manylinux2014), `manylinux_2_28_aarch64`, `win_amd64`, `macosx_11_0_arm64`, "
            "`macosx_10_9_x86_64`; a plain `linux_<arch>` takes the release's `manylinux_glibc`",
        ),
        Field("pythons", "list", "overrides the release's list"),
        Field(
            "arch_list", "list",
            "CUDA only. The Linux x86_64 list in `torch.cuda.get_arch_list()` notation: `sm_90`, `sm_90a`, `compute_90`; `sm_120+PTX` is "
            "shorthand for `sm_120` + `compute_120`. Write `+PTX` only where the **release** wheels carry PTX",
        ),
        Field(
            "arch_by_platform", "mapping",
            "CUDA only: platform tag -> list, for platforms whose list differs (Windows, aarch64). A platform other than Linux x86_64 without "
            "an entry is **unknown**: the resolver then judges the GPUs by another platform's list of the same variant (the Linux x86_64 "
            "list first) and says so in a warning; with no list at all it refuses the variant",
        ),
        Field("gfx", "list", "ROCm only: `gfx90a`, `gfx1100`, ...; empty with an `unknown` entry when not known"),
        Field("learned", "string", "the date the variant was learned from an index"),
        Field(
            "index", "string",
            "where a learned build is served: `pypi` (a label-less default build: planned as `torch==X` from the matrix's `pypi` index) or "
            "the URL of the index it was learned from; absent: `<pytorch>/<name>`",
        ),
        Field("runtime", "mapping", "the runtime wheels the build pins (`cuda-toolkit: \"13.2.2\"`, `nvidia-cudnn-cu13: \"9.26.0.51\"`), from its core metadata"),
        Field(
            "state", "string",
            "`announced`: a release-day source (the release's build matrix) says this build is made for these platforms, and no artifact "
            "has been seen yet; the resolver plans it and says so, and an artifact a learned row reads (an index the user reaches) makes "
            "that platform known. Absent: known",
        ),
        Field(
            "absent_on", "mapping",
            "index URL -> platform tags: that index listed the project without this build for those platforms (learned at run time by "
            "the install flow); the build is known absent there, for those platforms only",
        ),
        UNKNOWN,
        DERIVED,
        NOTE,
    ),
)
_PATCHES = Part(
    "releases[].patches",
    (
        Field("torchvision", "string", "the torchvision paired with that patch"),
        Field("torchaudio", "string", "the torchaudio paired with it"),
        Field("triton", "string", "the triton it pins"),
        Field("source", "string", ""),
    ),
    "A mapping patch version -> pairings: `\"2.9.0\": {torchvision: \"0.24.0\", torchaudio: \"2.9.0\", triton: ...}`.",
)
_RELEASE_FIELDS = (
    Field("version", "string, required", "newest patch of the minor, no local suffix: `\"2.9.1\"`"),
    Field("source", "string, required", ""),
    Field("released", "string", "date"),
    Field("pythons", "list", "default Pythons of the variants: `\"3.10\"`, free-threaded `\"3.13t\"`"),
    Field("torch_only_pythons", "list", "Pythons with torch wheels but no torchvision/torchaudio"),
    Field(
        "python_platforms", "mapping",
        "Python -> platform tags, for a Python whose wheels exist only on some platforms: `{\"3.13t\": [manylinux_2_17_x86_64]}`. Only the "
        "OS and arch of a tag count (not its floor); a Python not named here is on every platform of the variant",
    ),
    Field("torchvision", "string / null", "paired version; null when unknown"),
    Field("torchaudio", "string / null", "paired version; null when unknown"),
    Field("triton", "string / null", "paired version; null when unknown"),
    Field("min_macos", "string", "the arm64 wheel's macOS floor (`\"11.0\"`, `\"14.0\"`)"),
    Field("mps_min_macos", "string", "macOS that MPS needs with this release (may be stricter than the wheel)"),
    Field("manylinux_glibc", "string", "glibc floor of plain `linux_*` platform tags of this release"),
    Field("patches", "mapping", "older patch versions and their pairings (below)"),
    Field("unknown", "list of strings", "what is not known about the release"),
    DERIVED,
    Field(
        "variants", "list",
        "see below; an empty list means \"builds unknown\" (the resolver skips the release and says so). A hand-kept row's list is the "
        "release's whole build list (a build it does not name is known absent); a release with only learned rows knows what one index "
        "served, so a build they do not name is unknown, never \"not published\"",
    ),
    Field(
        "builds", "string",
        "`listed` (the default for a hand-kept row with variants): its variants and platforms are every build of the release, so a build "
        "it does not name is known absent; `partial` (a learned row, or a row whose source announces only some builds): a build it does "
        "not name is unknown",
    ),
    Field("requires_python", "string", "the wheels' `Requires-Python` (`\">=3.11\"`)"),
    Field("triton_requirement", "string", "the torch wheel's triton requirement as written (`\"triton~=3.9.0\"`); `triton` holds an exact pin only"),
    Field("learned", "string", "the date `stackdoctor matrix learn` read the row from an index (a learned row: see \"Learned rows\")"),
    Field(
        "paired_by_range", "list",
        "companions (`torchvision`, `torchaudio`) paired because their own `Requires-Dist` range admits this torch (`torch>=2.11`), not an "
        "exact pin; a hand-kept pairing wins over them",
    ),
    NOTE,
)


def read_variant(ctx: Ctx, raw: Any, where: str, line: int, rel_pythons: tuple[str, ...], rel_source: str) -> Variant:
    d = ctx.mapping(raw, where, line)
    check_keys(ctx, d, _VARIANTS.names, where)
    name = ctx.text(d, "name", where, required=True)
    assert name is not None
    kind = _variant_kind(ctx, d, where, name)
    source = ctx.text(d, "source", f"{where}", required=True)
    assert source is not None
    platforms = ctx.strings(d, "platforms", where)
    for p in platforms:
        if parse_platform(p)[0] == "unknown":
            raise ctx.fail(ctx.line_of(d, "platforms"), f"{where}.platforms", f"unknown platform tag {p!r}")
    state = ctx.text(d, "state", where)
    if state not in (None, "known", "announced"):
        raise ctx.fail(ctx.line_of(d, "state"), f"{where}.state", f"must be \"announced\" or \"known\", not {state!r}")
    arch = read_arch_list(ctx, ctx.strings(d, "arch_list", where), ctx.line_of(d, "arch_list"), f"{where}.arch_list")
    by_platform = _arch_by_platform(ctx, d, where)
    gfx = tuple(g.lower() for g in ctx.strings(d, "gfx", where))
    for g in gfx:
        if not GFX_RE.match(g):
            raise ctx.fail(ctx.line_of(d, "gfx"), f"{where}.gfx", f"unparsable gfx target {g!r}")
    _kind_fields(ctx, d, where, name, kind[0], arch_list=bool(arch or by_platform), gfx=bool(gfx))
    pythons = read_pythons(ctx, d, "pythons", where) or rel_pythons
    index = ctx.text(d, "index", where)
    if index is not None and index != "pypi" and not re.match(r"^(https?|file)://\S+$", index):
        raise ctx.fail(ctx.line_of(d, "index"), f"{where}.index", f"must be \"pypi\" (a label-less build of a PyPI-shaped index) or the URL of the index that serves it, not {index!r}")
    runtime: dict[str, str] = {}
    if d.get("runtime") is not None:
        rm = ctx.mapping(d["runtime"], f"{where}.runtime", ctx.line_of(d, "runtime"))
        for dist in rm:
            runtime[str(dist)] = ctx.text(rm, dist, f"{where}.runtime") or ""
    absent_on: dict[str, tuple[str, ...]] = {}
    if d.get("absent_on") is not None:
        am = ctx.mapping(d["absent_on"], f"{where}.absent_on", ctx.line_of(d, "absent_on"))
        for url in am:
            tags = ctx.strings(am, url, f"{where}.absent_on")
            if not re.match(r"^(https?|file)://\S+$", str(url)) or any(parse_platform(t)[0] == "unknown" for t in tags):
                raise ctx.fail(ctx.line_of(d, "absent_on"), f"{where}.absent_on", f"expected an index URL -> platform tags, not {url!r}")
            absent_on[str(url)] = tags
    return Variant(
        name=name,
        kind=kind[0],
        cuda=kind[1],
        rocm=kind[2],
        platforms=platforms,
        pythons=pythons,
        arch_list=arch,
        gfx=gfx,
        source=source,
        unknown=ctx.strings(d, "unknown", where),
        derived_from=ctx.text(d, "derived_from", where),
        arch_by_platform=by_platform,
        line=d.line,
        learned=ctx.text(d, "learned", where),
        index=index,
        runtime=runtime,
        announced=platforms if state == "announced" else (),
        announced_by=source if state == "announced" else None,
        absent_on=absent_on,
    )


def _variant_kind(ctx: Ctx, d: LDict, where: str, name: str) -> tuple[str, str | None, str | None]:
    """(kind, CUDA, ROCm) of a variant from its name; a declared ``kind:`` must agree."""
    kind = variant_kind(name)
    if kind is None:
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name", f"unknown variant kind {name!r} (expected cpu, cuXYZ, rocmX.Y[.Z] or xpu)")
    declared = ctx.text(d, "kind", where)
    if declared is not None and declared != kind[0]:
        if declared not in (*VARIANT_KINDS, *PLUGIN_VARIANT_KINDS):
            raise ctx.fail(ctx.line_of(d, "kind"), f"{where}.kind", f"unknown variant kind {declared!r} (expected {', '.join((*VARIANT_KINDS, *PLUGIN_VARIANT_KINDS))})")
        raise ctx.fail(ctx.line_of(d, "kind"), f"{where}.kind", f"{declared!r} does not match the name {name!r}")
    return kind


def _arch_by_platform(ctx: Ctx, d: LDict, where: str) -> dict[str, tuple[str, ...]]:
    by_platform: dict[str, tuple[str, ...]] = {}
    if d.get("arch_by_platform") is not None:
        bp = ctx.mapping(d["arch_by_platform"], f"{where}.arch_by_platform", ctx.line_of(d, "arch_by_platform"))
        for tag in bp:
            if parse_platform(tag)[0] == "unknown":
                raise ctx.fail(ctx.line_of(bp, tag), f"{where}.arch_by_platform", f"unknown platform tag {tag!r}")
            by_platform[tag] = read_arch_list(ctx, ctx.strings(bp, tag, f"{where}.arch_by_platform"), ctx.line_of(bp, tag), f"{where}.arch_by_platform.{tag}")
    return by_platform


# A variant field only one kind's builds carry: the field, the kind, and how the error names it.
_KIND_FIELDS = (
    ("arch_list", "cuda", "only CUDA variants carry a CUDA arch list"),
    ("gfx", "rocm", "only ROCm variants carry a gfx list"),
)


def _kind_fields(ctx: Ctx, d: LDict, where: str, name: str, kind: str, **given: bool) -> None:
    """A field of one kind's builds (a CUDA arch list, a gfx list) given for a variant of another kind is an error."""
    for key, owner, what in _KIND_FIELDS:
        if given[key] and kind != owner:
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"{what}, not {name!r}")


def read_release(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[Release]:
    version = ctx.version(d, "version", where)
    where = f"releases[{version}]"
    source = ctx.text(d, "source", where, required=True)
    assert source is not None
    pythons = read_pythons(ctx, d, "pythons", where)
    variants: list[Variant] = []
    if d.get("variants") is not None:
        vs = ctx.seq(d["variants"], f"{where}.variants", ctx.line_of(d, "variants"))
        seen: set[str] = set()
        for i, vraw in enumerate(vs):
            v = read_variant(ctx, vraw, f"{where}.variants[{i}]", ctx.line_of(vraw) if isinstance(vraw, dict) else ctx.line_of(d, "variants"), pythons, source)
            if v.name in seen:
                raise ctx.fail(v.line, f"{where}.variants[{i}].name", f"variant {v.name!r} listed twice")
            seen.add(v.name)
            variants.append(v)
    patches: list[PatchRow] = []
    if d.get("patches") is not None:
        pm = ctx.mapping(d["patches"], f"{where}.patches", ctx.line_of(d, "patches"))
        for pv, prow in pm.items():
            pl = ctx.line_of(pm, pv)
            try:
                pver = Version(pv)
            except InvalidVersion:
                raise ctx.fail(pl, f"{where}.patches", f"unparsable version {pv!r}") from None
            pd = ctx.mapping(prow, f"{where}.patches.{pv}", pl)
            check_keys(ctx, pd, _PATCHES.names, f"{where}.patches.{pv}")
            patches.append(
                PatchRow(
                    pver,
                    ctx.text(pd, "torchvision", f"{where}.patches.{pv}"),
                    ctx.text(pd, "torchaudio", f"{where}.patches.{pv}"),
                    ctx.text(pd, "triton", f"{where}.patches.{pv}"),
                )
            )
    python_platforms: dict[str, tuple[str, ...]] = {}
    if d.get("python_platforms") is not None:
        pp = ctx.mapping(d["python_platforms"], f"{where}.python_platforms", ctx.line_of(d, "python_platforms"))
        for py in pp:
            if not PY_RE.match(py):
                raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms", f"unparsable Python version {py!r} (expected like \"3.13t\")")
            tags = ctx.strings(pp, py, f"{where}.python_platforms")
            if not tags:
                raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms.{py}", "expected a non-empty list of platform tags")
            for tag in tags:
                if parse_platform(tag)[0] == "unknown":
                    raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms.{py}", f"unknown platform tag {tag!r}")
            python_platforms[py] = tags
    for key in ("min_macos", "mps_min_macos", "manylinux_glibc"):
        val = ctx.text(d, key, where)
        if val is not None and not re.match(r"^\d+(\.\d+)*$", val):
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable version {val!r}")
    for key in ("torchvision", "torchaudio", "triton"):
        val = ctx.text(d, key, where)
        if val is not None:
            try:
                Version(val)
            except InvalidVersion:
                raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable version {val!r}") from None
    return one_row(Release(
        version=version,
        variants=tuple(variants),
        torchvision=ctx.text(d, "torchvision", where),
        torchaudio=ctx.text(d, "torchaudio", where),
        triton=ctx.text(d, "triton", where),
        min_macos=ctx.text(d, "min_macos", where),
        mps_min_macos=ctx.text(d, "mps_min_macos", where),
        manylinux_glibc=ctx.text(d, "manylinux_glibc", where),
        pythons=pythons,
        torch_only_pythons=read_pythons(ctx, d, "torch_only_pythons", where),
        python_platforms=python_platforms,
        released=ctx.text(d, "released", where),
        source=source,
        derived_from=ctx.text(d, "derived_from", where),
        unknown=ctx.strings(d, "unknown", where),
        patches=tuple(patches),
        line=d.line,
        requires_python=ctx.text(d, "requires_python", where),
        triton_requirement=ctx.text(d, "triton_requirement", where),
        learned=ctx.text(d, "learned", where),
        paired_by_range=ctx.strings(d, "paired_by_range", where),
        builds_listed=_builds_listed(ctx, d, where, bool(variants)),
    ))


def _builds_listed(ctx: Ctx, d: LDict, where: str, has_variants: bool) -> bool:
    """Whether the row's variants are the release's whole build list: a hand-kept row's are unless it says
    ``builds: partial``; a learned row's never (one index's files)."""
    builds = ctx.text(d, "builds", where)
    if builds not in (None, "listed", "partial"):
        raise ctx.fail(ctx.line_of(d, "builds"), f"{where}.builds", f"must be \"listed\" or \"partial\", not {builds!r}")
    if builds is not None:
        return builds == "listed"
    return has_variants and ctx.text(d, "learned", where) is None


def merge_variant(base: Variant, over: Variant) -> Variant:
    """A learned variant over a known one of the same name: what the artifacts say wins field by field (their
    arch list, Pythons, runtime pins), platforms add up, and both sources are kept (the known one still
    answers for the platforms the learned index does not serve)."""
    # a platform family the known row has keeps the known tag: its glibc / macOS floor is sourced, while a wheel's
    # tag can claim less (PyPI's torch 2.6.0 is tagged manylinux1 but needs glibc 2.28)
    fams = {parse_platform(t)[:2] for t in base.platforms}
    platforms = base.platforms + tuple(t for t in dict.fromkeys(over.platforms) if parse_platform(t)[:2] not in fams)
    by_platform = {**base.arch_by_platform, **over.arch_by_platform}
    arch = over.arch_list or base.arch_list
    source = over.source if over.source == base.source else f"{over.source}; {base.source}"
    return dataclasses.replace(
        base,
        platforms=platforms,
        pythons=tuple(dict.fromkeys(base.pythons + over.pythons)) if over.pythons else base.pythons,
        arch_list=arch,
        arch_by_platform=by_platform,
        gfx=over.gfx or base.gfx,
        source=source,
        # a learned (Linux x86_64) arch list settles what was unknown about that list, not another platform's
        unknown=tuple(u for u in base.unknown if not (over.arch_list and any(w in u.lower() for w in ("not verified", "unverified", "arch list"))
                                                      and not any(w in u.lower() for w in ("windows", "aarch64", "sbsa")))) + tuple(
            u for u in over.unknown if u not in base.unknown and not (base.arch_list and "arch list" in u)
        ),
        derived_from=over.derived_from or base.derived_from,
        learned=over.learned,
        # the known build's index serves it; the learned index is one more witness (over a build only announced, the learned
        # index is the only witness: its platforms are served there, the announced ones by <pytorch>/<name>)
        index=over.index if set(base.announced) >= set(base.platforms) else None,
        runtime={**base.runtime, **over.runtime},
        # an artifact the learned row read confirms what was only announced for its platforms
        announced=tuple(t for t in base.announced if parse_platform(t)[:2] not in {parse_platform(o)[:2] for o in over.platforms}),
        announced_by=base.announced_by,
        absent_on={u: tuple(dict.fromkeys(base.absent_on.get(u, ()) + over.absent_on.get(u, ()))) for u in {**base.absent_on, **over.absent_on}},
    )


def merge_release(base: Release, over: Release) -> Release:
    """A user release row over an embedded one: given fields replace, variants merge by name (a learned
    variant merges into the known one field by field: :func:`merge_variant`)."""
    overs = {v.name: v for v in over.variants}
    # the known variants keep their order (a learned one merged in place), new ones follow
    variants = tuple(
        (merge_variant(v, overs[v.name]) if overs[v.name].learned else overs[v.name]) if v.name in overs else v for v in base.variants
    ) + tuple(v for v in over.variants if v.name not in {b.name for b in base.variants})
    if over.learned and base.source and base.source != over.source:
        over = dataclasses.replace(over, source=f"{over.source}; {base.source}")
    # a pairing a companion's range implies yields to a hand-kept one (an exact pin or a release's own word)
    tv = base.torchvision if "torchvision" in over.paired_by_range and base.torchvision else over.torchvision or base.torchvision
    ta = base.torchaudio if "torchaudio" in over.paired_by_range and base.torchaudio else over.torchaudio or base.torchaudio
    given = {f: getattr(over, f) or getattr(base, f) for f in _OVER_OR_BASE}
    return Release(
        **given,
        version=over.version,
        variants=variants,
        torchvision=tv,
        torchaudio=ta,
        source=over.source,
        unknown=_merged_unknown(base, over),
        line=over.line,
        learned=over.learned or base.learned,
        paired_by_range=tuple(c for c in over.paired_by_range if not getattr(base, c)),
        builds_listed=base.builds_listed or over.builds_listed,
    )


# the release fields a later row gives or leaves to the earlier one
_OVER_OR_BASE = (
    "triton", "min_macos", "mps_min_macos", "manylinux_glibc", "pythons", "torch_only_pythons", "python_platforms", "released",
    "derived_from", "patches", "requires_python", "triton_requirement",
)


def _merged_unknown(base: Release, over: Release) -> tuple[str, ...]:
    """What stays unknown of a release: the later row's word, and (a learned row) what the artifacts did not settle."""
    if not over.learned:
        return over.unknown or base.unknown
    said = [k for k, given in (("triton", over.triton or over.triton_requirement), ("torchvision", over.torchvision),
                               ("torchaudio", over.torchaudio), ("pythons", over.pythons), ("3.", over.pythons)) if given]
    return tuple(dict.fromkeys(over.unknown + tuple(u for u in base.unknown if not any(u.lower().startswith(k) for k in said))))


def patch_base(releases: dict[Version, Release], version: Version) -> Release | None:
    """The row a patch version lives in (``patches:`` of a newer row of its minor), as that version's own row."""
    for r in releases.values():
        for p in r.patches:
            if p.version == version:
                # the newer row's date is not this patch's (2.12.0 is no 2.12.1 of June): unknown until a row of its own says
                return dataclasses.replace(r, version=p.version, torchvision=p.torchvision, torchaudio=p.torchaudio, triton=p.triton, patches=(),
                                           released=None)
    return None


def _layer_release(acc: dict[Any, Release], r: Release) -> Release:
    """A release row over the rows so far: over the same version, or (a learned row) over the row that lists it
    under ``patches:``."""
    base = acc.get(r.version) or (patch_base(acc, r.version) if r.learned else None)
    return merge_release(base, r) if base is not None else r


def _release_data(r: Release) -> dict[str, Any]:
    from stackdoctor.model.facts import to_data

    d = {f.name: to_data(getattr(r, f.name)) for f in dataclasses.fields(r) if f.name not in ("line", "version", "patches")}
    d["version"] = str(r.version)
    d["patches"] = [{"version": str(p.version), "torchvision": p.torchvision, "torchaudio": p.torchaudio, "triton": p.triton} for p in r.patches]
    for v in d["variants"]:
        v.pop("line", None)
    return d


RELEASES: Table[Release] = Table(
    key="releases",
    summary="torch releases",
    shape="list",
    fields=_RELEASE_FIELDS,
    parse=read_release,
    key_of=lambda r: r.version,
    merge=_layer_release,
    attr="releases",
    holds="tuple",
    order=lambda rows: sorted(rows, key=lambda r: r.version, reverse=True),
    layering=(
        "a row with the version of an earlier one replaces the fields it gives; its variants replace the earlier variants of the same "
        "`name` and add the others (a learned row: see \"Learned rows\"); a new version is added"
    ),
    doc="`matrix.release(\"2.9.0\")` returns the 2.9.1 row with 2.9.0's pairings; `matrix.release(\"2.9\")` the newest patch.",
    parts=(_VARIANTS, _PATCHES),
    row_data=_release_data,
)


# the learned rows' section of SCHEMA.md (after every table's): how a learned ``releases`` row layers
LEARNED = """\
## Learned rows (`compat_matrix/learned.yaml`, `~/.config/stackdoctor/learned.yaml`)

Written by `stackdoctor matrix learn`, never by hand; each `source` is the artifact read (its URL and sha256), plus what
was read from it (file names, core metadata, GPU code of `torch/lib/libtorch_cuda.so`). The shipped `learned*.yaml`
files load after the other files; the user's learned layer (`STACKDOCTOR_LEARNED`, else
`$XDG_CONFIG_HOME/stackdoctor/learned.yaml`) loads after the shipped files and before `--matrix` files. A learned release
row layers like any other, with three differences:

- a learned variant merges into a known variant of the same name field by field: its arch lists, Pythons and runtime
  pins win, platforms add up, both sources are kept (the known one still answers for platforms the index does not serve);
- a learned row for a version that a hand-kept row lists under `patches:` starts from that row (its download.pytorch.org
  variants) with that patch's pairings;
- entries of the hand-kept `unknown:` list that the learned row now answers (triton, torchvision, torchaudio, Pythons)
  are dropped.

A learned CUDA build whose GPU code was not read (no `--download`) says so in `unknown`; at run time the index witness
(`stackdoctor.wheels.learn.witness_matrix`) gives such a build the list of the nearest known build of the same CUDA version,
with `derived_from: "inferred: ..."`, which the plan's reasons repeat.
"""
