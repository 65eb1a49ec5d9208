"""The compatibility matrix's tables, declared once each.

A :class:`Table` says everything about one top-level table of a matrix file: its YAML key and shape, its fields
(which are the allowed keys, and the rows of its section in ``compat_matrix/SCHEMA.md``), how one row is parsed and
validated, how a later layer's row meets an earlier one (its key and merge rule), which :class:`Matrix` field holds
it and how ``matrix show --json`` shows it. Parsing, layering, validation, ``Matrix.to_data`` and the generated
``SCHEMA.md`` (:mod:`stackdoctor.matrix.schema_doc`) all iterate :data:`TABLES`: adding a table is one declaration
here (its row parser beside it) and its row dataclass in :mod:`stackdoctor.matrix.model`.

The declaration itself is :mod:`.table`; the ``releases`` table, the largest, is :mod:`.releases`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from stackdoctor.matrix.errors_table import RUNTIME_ERRORS
from stackdoctor.matrix.kmd_table import ROCM_KERNEL_USER_SPACE
from stackdoctor.matrix.model import (
    ApuRow,
    CondaInfo,
    CondaRelease,
    CudaRow,
    Fp32Lanes,
    GpuRow,
    IndexRow,
    IntelFamily,
    JetsonRow,
    L4tRow,
    MirrorRow,
    Peak,
    PypiDefault,
    RocmOverride,
    Threshold,
)
from stackdoctor.matrix.pure import (
    GFX_RE,
    INDEX_NAME_RE,
    VARIANT_RE,
    cc_tuple,
    normalise_gpu_name,
)
from stackdoctor.matrix.reader import Ctx, LDict, check_keys, type_name
from stackdoctor.matrix.releases import RELEASES
from stackdoctor.matrix.table import DERIVED, NOTE, SOURCE, UNKNOWN, Field, Part, Table, key_check, one_row, read_driver, read_pythons, read_url

# ---------------------------------------------------------------------------- cuda


def _cuda(ctx: Ctx, d: LDict, where: str, ver: str) -> tuple[CudaRow]:
    src = ctx.text(d, "source", where, required=True)
    return one_row(CudaRow(
        version=ver,
        min_driver_linux=read_driver(ctx, d, "min_driver_linux", where),
        min_driver_windows=read_driver(ctx, d, "min_driver_windows", where),
        minor_compat_floor_linux=read_driver(ctx, d, "minor_compat_floor_linux", where),
        minor_compat_floor_windows=read_driver(ctx, d, "minor_compat_floor_windows", where),
        source=src or "",
        derived_from=ctx.text(d, "derived_from", where),
        unknown=ctx.strings(d, "unknown", where),
    ))


CUDA: Table[CudaRow] = Table(
    key="cuda",
    summary="CUDA version -> driver requirements",
    shape="mapping",
    fields=(
        Field("min_driver_linux", "string / null", "the toolkit's minimum Linux driver (NVIDIA release notes, Table 3, GA row); null: unknown"),
        Field("min_driver_windows", "string / null", "the same for Windows (Table 3 prints N/A for 13.x on Windows: null)"),
        Field("minor_compat_floor_linux", "string / null", "the major's minor-version-compatibility floor on Linux"),
        Field("minor_compat_floor_windows", "string / null", "the same on Windows"),
        SOURCE, DERIVED, UNKNOWN, NOTE,
    ),
    parse=_cuda,
    key_of=lambda r: r.version,
    attr="cuda_versions",
    check_key=key_check(r"^\d+\.\d+$", "unparsable CUDA version {} (expected like \"12.6\")"),
    key_doc="the CUDA version: `\"13.0\"`",
    doc=(
        "```yaml\n"
        "cuda:\n"
        "  \"13.0\":\n"
        "    min_driver_linux: \"580.65.06\"        # toolkit minimum (NVIDIA release notes, Table 3, GA row)\n"
        "    min_driver_windows: null             # null: unknown (Table 3 prints N/A for 13.x on Windows)\n"
        "    minor_compat_floor_linux: \"580\"      # the major's minor-version-compatibility floor\n"
        "    minor_compat_floor_windows: \"580\"\n"
        "    source: \"...\"\n"
        "```\n"
        "\n"
        "`driver_meets(row, driver, windows)` answers `full` (toolkit minimum met), `minor-compat` (only the floor met: the\n"
        "wheel runs, PTX JIT and newer features may not) or `no`. Where the toolkit minimum is unknown the floor is the\n"
        "documented requirement and meeting it counts as `full`. Under WSL2 the driver is the Windows one: use the Windows\n"
        "columns."
    ),
)


# ---------------------------------------------------------------------------- gpus


def _gpus(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[GpuRow, ...]:
    cc = ctx.text(d, "cc", where, required=True)
    assert cc is not None
    if cc_tuple(cc) is None or "." not in cc:
        raise ctx.fail(ctx.line_of(d, "cc"), f"{where}.cc", f"unparsable compute capability {cc!r} (expected like \"8.9\")")
    src = ctx.text(d, "source", where, required=True) or ""
    return tuple(GpuRow(n, cc, src) for n in ctx.strings(d, "names", where))


GPUS: Table[GpuRow] = Table(
    key="gpus",
    summary="GPU name -> compute capability",
    shape="list",
    fields=(
        Field("cc", "string, required", "the compute capability: `\"8.9\"`"),
        Field("names", "list", "marketing names with that capability (each becomes one row)"),
        SOURCE, NOTE,
    ),
    parse=_gpus,
    key_of=lambda g: normalise_gpu_name(g.name),
    attr="gpu_rows",
    holds="tuple",
    layering="by GPU name (normalised)",
    doc=(
        "```yaml\n"
        "gpus:\n"
        "  - {cc: \"8.9\", names: [RTX 4090, L40S], source: \"https://developer.nvidia.com/cuda-gpus\"}\n"
        "```\n"
        "\n"
        "Names are matched after lower-casing and dropping `NVIDIA`, `GeForce`, `Tesla`, `Quadro` and parentheses; an\n"
        "exact match wins, else the longest listed name that prefixes the GPU's name at a word boundary\n"
        "(`Tesla V100-SXM2-32GB` -> `V100`)."
    ),
)


# ---------------------------------------------------------------------------- rocm_overrides


def _override(ctx: Ctx, d: LDict, where: str, gfx: str) -> tuple[RocmOverride]:
    value = ctx.text(d, "value", where, required=True) or ""
    if not re.match(r"^\d+\.\d+\.\d+$", value):
        raise ctx.fail(ctx.line_of(d, "value"), f"{where}.value", f"unparsable override {value!r} (expected like \"10.3.0\")")
    as_gfx = ctx.text(d, "as_gfx", where, required=True) or ""
    return one_row(RocmOverride(gfx, value, as_gfx, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where)))


_GFX_KEY = key_check(GFX_RE.pattern, "unparsable gfx target {}")

ROCM_OVERRIDES: Table[RocmOverride] = Table(
    key="rocm_overrides",
    summary="gfx -> HSA_OVERRIDE_GFX_VERSION",
    shape="mapping",
    fields=(
        Field("value", "string, required", "the `HSA_OVERRIDE_GFX_VERSION` value: `\"10.3.0\"`"),
        Field("as_gfx", "string, required", "the target whose code objects the override makes the GPU load"),
        SOURCE, NOTE,
    ),
    parse=_override,
    key_of=lambda o: o.gfx,
    attr="rocm_overrides",
    check_key=_GFX_KEY,
    key_doc="the GPU's gfx target: `gfx1031`",
    doc=(
        "```yaml\n"
        "rocm_overrides:\n"
        "  gfx1031: {value: \"10.3.0\", as_gfx: gfx1030, source: \"...\", note: \"RX 6700 XT\"}\n"
        "```\n"
        "\n"
        "The resolver uses the override only when `as_gfx` is in the variant's `gfx` list, and only when one value serves\n"
        "every GPU of the process."
    ),
)


# ---------------------------------------------------------------------------- jetson


def _jetson(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[JetsonRow]:
    upi = d.get("use_pytorch_index", False)
    if not isinstance(upi, bool):
        raise ctx.fail(ctx.line_of(d, "use_pytorch_index"), f"{where}.use_pytorch_index", "expected true or false")
    torch_versions = ctx.strings(d, "torch", where)
    for tv in torch_versions:
        try:
            Version(tv)
        except InvalidVersion:
            raise ctx.fail(ctx.line_of(d, "torch"), f"{where}.torch", f"unparsable version {tv!r}") from None
    return one_row(JetsonRow(
        jetpack=ctx.text(d, "jetpack", where, required=True) or "",
        l4t=ctx.strings(d, "l4t", where),
        cuda=ctx.text(d, "cuda", where),
        variant=ctx.text(d, "variant", where),
        index_url=ctx.text(d, "index_url", where),
        torch=torch_versions,
        pythons=read_pythons(ctx, d, "pythons", where),
        gpu_cc=ctx.strings(d, "gpu_cc", where),
        use_pytorch_index=upi,
        note=ctx.text(d, "note", where),
        source=ctx.text(d, "source", where, required=True) or "",
        unknown=ctx.strings(d, "unknown", where),
    ))


JETSON: Table[JetsonRow] = Table(
    key="jetson",
    summary="L4T / JetPack -> wheel source",
    shape="list",
    fields=(
        Field("jetpack", "string, required", "JetPack major"),
        Field("l4t", "list", "L4T prefixes covered (`[\"36.4\"]` matches 36.4.3)"),
        Field("cuda", "string / null", "JetPack's CUDA"),
        Field("variant", "string / null", "plan variant name, e.g. `jetson-jp6-cu126`; null when no index is known"),
        Field("index_url", "string / null", "the pip index of that source"),
        Field("torch", "list", "torch versions known on that index, newest first"),
        Field("pythons", "list", "Pythons of those wheels"),
        Field("gpu_cc", "list", "compute capabilities of the JetPack's modules"),
        Field("use_pytorch_index", "true/false", "true when download.pytorch.org's aarch64 CUDA builds serve this JetPack (Thor)"),
        NOTE, SOURCE, UNKNOWN,
    ),
    parse=_jetson,
    key_of=lambda j: f"{j.jetpack}|{','.join(j.l4t)}",
    attr="jetson",
    holds="tuple",
    layering="by (`jetpack`, `l4t`)",
)


# ---------------------------------------------------------------------------- peaks


def _peak(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[Peak]:
    gpu = ctx.text(d, "gpu", where, required=True) or ""
    nums: dict[str, float | None] = {}
    for k in ("fp32", "tf32", "bf16", "fp16"):
        v = d.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ctx.fail(ctx.line_of(d, k), f"{where}.{k}", f"expected a number of TFLOP/s, got {type_name(v)}")
        nums[k] = float(v) if v is not None else None
    return one_row(Peak(gpu, nums["fp32"], nums["bf16"], nums["fp16"], ctx.text(d, "source", where, required=True) or "", tf32=nums["tf32"]))


PEAKS: Table[Peak] = Table(
    key="peaks",
    summary="peak TFLOP/s per GPU (optional)",
    shape="list",
    fields=(
        Field("gpu", "string, required", "the GPU's name (matched like `gpus` names; the longest listed prefix wins)"),
        Field("fp32", "number", "dense TFLOP/s on the CUDA cores"),
        Field("tf32", "number", "the Tensor Core figure for float32 matmuls with TF32 allowed (the kernels' `tf32` rows)"),
        Field("bf16", "number", "dense Tensor Core TFLOP/s"),
        Field("fp16", "number", "dense Tensor Core TFLOP/s"),
        SOURCE, NOTE,
    ),
    parse=_peak,
    key_of=lambda p: normalise_gpu_name(p.gpu),
    attr="peaks",
    layering="by GPU name (normalised)",
    doc=(
        "`{gpu: \"H100 SXM\", fp32: 67.0, tf32: 494.5, bf16: 989.0, fp16: 989.0, source: \"...\"}` — dense TFLOP/s; leave out what is\n"
        "not sourced (a dtype without a figure gets no \"% of peak\"). The embedded matrix ships rows for data-center GPUs from\n"
        "NVIDIA's specification pages (`peaks.yaml`: H200, H100, A100, L40S, L40, L4, V100, T4); a GPU without a row gets no\n"
        "\"% of peak\"."
    ),
)


# ---------------------------------------------------------------------------- indexes


def _index(ctx: Ctx, d: LDict, where: str, name: str) -> tuple[IndexRow]:
    url = ctx.text(d, "url", where, required=True) or ""
    if not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
        raise ctx.fail(ctx.line_of(d, "url"), f"{where}.url", f"expected an http(s) URL, got {url!r}")
    return one_row(IndexRow(name, url.rstrip("/"), ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where)))


INDEXES: Table[IndexRow] = Table(
    key="indexes",
    summary="package indexes the plans point at (pytorch, pypi)",
    shape="mapping",
    fields=(Field("url", "string, required", "http(s) URL; a trailing `/` is dropped"), SOURCE, NOTE),
    parse=_index,
    key_of=lambda i: i.name,
    attr="indexes",
    check_key=key_check(INDEX_NAME_RE.pattern, "unparsable index name {} (expected like \"pytorch\")"),
    key_doc="the index name: `pytorch` (variant indexes are `<url>/cu126`, `<url>/cpu`, ...), `pypi`",
    doc=(
        "```yaml\n"
        "indexes:\n"
        "  pytorch: {url: \"https://download.pytorch.org/whl\", source: \"...\"}   # the base of <url>/<variant>\n"
        "  pypi: {url: \"https://pypi.org/simple\", source: \"...\"}               # default builds (macOS)\n"
        "```\n"
        "\n"
        "Code reads them through one accessor, `Matrix.index_url(name=\"pytorch\")` (`stackdoctor.matrix.default_index_url(name)`\n"
        "where no matrix is at hand: the embedded value). `--index-base` / `STACKDOCTOR_INDEX_BASE` still win over the matrix\n"
        "for the `pytorch` index."
    ),
)


# ---------------------------------------------------------------------------- l4t_releases, rocm_apus, intel_gpus, fp32_lanes_per_sm, thresholds


def _l4t(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[L4tRow]:
    l4t = ctx.text(d, "l4t", where, required=True) or ""
    if not re.match(r"^\d+\.\d+\.\d+$", l4t):
        raise ctx.fail(ctx.line_of(d, "l4t"), f"{where}.l4t", f"unparsable L4T release {l4t!r} (expected like \"36.4.3\")")
    cuda = ctx.text(d, "cuda", where)
    if cuda is not None and not re.match(r"^\d+\.\d+$", cuda):
        raise ctx.fail(ctx.line_of(d, "cuda"), f"{where}.cuda", f"unparsable CUDA version {cuda!r}")
    return one_row(L4tRow(l4t, ctx.text(d, "jetpack", where, required=True) or "", cuda, ctx.text(d, "source", where, required=True) or ""))


L4T_RELEASES: Table[L4tRow] = Table(
    key="l4t_releases",
    summary="L4T release -> JetPack and its CUDA",
    shape="list",
    fields=(
        Field("l4t", "string, required", "the L4T release: `\"36.4.3\"`"),
        Field("jetpack", "string, required", "the JetPack it ships in: `\"6.2\"`"),
        Field("cuda", "string", "JetPack's default CUDA; absent where no source gives it"),
        SOURCE, NOTE,
    ),
    parse=_l4t,
    key_of=lambda r: r.l4t,
    attr="l4t_releases",
    layering="by `l4t`",
    doc="`Matrix.jetpack_for(\"32.5\")` reads `\"32.5\"` as `\"32.5.0\"`.",
)


def _apu(ctx: Ctx, d: LDict, where: str, gfx: str) -> tuple[ApuRow]:
    return one_row(ApuRow(gfx, ctx.text(d, "name", where, required=True) or "", ctx.text(d, "source", where, required=True) or ""))


ROCM_APUS: Table[ApuRow] = Table(
    key="rocm_apus",
    summary="AMD gfx targets that are integrated GPUs (APUs)",
    shape="mapping",
    fields=(Field("name", "string, required", "what the part is sold as"), SOURCE, NOTE),
    parse=_apu,
    key_of=lambda a: a.gfx,
    attr="rocm_apus",
    check_key=_GFX_KEY,
    key_doc="the gfx target: `gfx1036`",
)


def _intel(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[IntelFamily]:
    flags = {}
    for key in ("discrete", "xpu"):
        v = d.get(key)
        if not isinstance(v, bool):
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", "expected true or false")
        flags[key] = v
    ids = []
    for did in ctx.strings(d, "device_ids", where):
        try:
            ids.append(f"0x{int(did, 16):04x}")
        except ValueError:
            raise ctx.fail(ctx.line_of(d, "device_ids"), f"{where}.device_ids", f"unparsable PCI device id {did!r}") from None
    return one_row(IntelFamily(
        ctx.text(d, "family", where, required=True) or "",
        ctx.text(d, "name", where, required=True) or "",
        flags["discrete"],
        flags["xpu"],
        tuple(ids),
        ctx.text(d, "source", where, required=True) or "",
    ))


INTEL_GPUS: Table[IntelFamily] = Table(
    key="intel_gpus",
    summary="Intel GPU families by PCI device id",
    shape="list",
    fields=(
        Field("family", "string, required", "the family: `DG2`"),
        Field("name", "string, required", "what it is sold as: `Arc A-series (Alchemist)`"),
        Field("discrete", "true/false, required", "a discrete GPU (not integrated)"),
        Field("xpu", "true/false, required", "listed among the GPUs PyTorch's XPU build supports"),
        Field("device_ids", "list", "PCI device ids (`\"0x56a0\"`; stored lower case, four digits)"),
        SOURCE, NOTE,
    ),
    parse=_intel,
    key_of=lambda f: f.family,
    attr="intel_families",
    holds="tuple",
    layering="by `family`",
)


def _lanes(ctx: Ctx, d: LDict, where: str, cc: str) -> tuple[Fp32Lanes]:
    lanes = d.get("lanes")
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes <= 0:
        raise ctx.fail(ctx.line_of(d, "lanes"), f"{where}.lanes", f"expected a positive whole number, got {type_name(lanes)}")
    return one_row(Fp32Lanes(cc, lanes, ctx.text(d, "source", where, required=True) or ""))


def _cc_key(cc: str) -> str | None:
    return None if cc_tuple(cc) is not None and "." in cc else f"unparsable compute capability {cc!r} (expected like \"8.9\")"


FP32_LANES: Table[Fp32Lanes] = Table(
    key="fp32_lanes_per_sm",
    summary="FP32 lanes per SM by compute capability (peak = SMs x lanes x 2 x clock)",
    shape="mapping",
    fields=(Field("lanes", "whole number, required", "FP32 fused multiply-add results per clock per SM"), SOURCE, NOTE),
    parse=_lanes,
    key_of=lambda r: r.cc,
    attr="fp32_lanes",
    check_key=_cc_key,
    key_doc="the compute capability: `\"8.9\"`",
)


def _threshold(ctx: Ctx, d: LDict, where: str, name: str) -> tuple[Threshold]:
    mv = ctx.text(d, "min_version", where, required=True) or ""
    if not re.match(r"^\d+(\.\d+)*$", mv):
        raise ctx.fail(ctx.line_of(d, "min_version"), f"{where}.min_version", f"unparsable version {mv!r}")
    return one_row(Threshold(name, mv, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where)))


THRESHOLDS: Table[Threshold] = Table(
    key="thresholds",
    summary="versions a platform feature needs",
    shape="mapping",
    fields=(Field("min_version", "string, required", "the version it needs: `\"26.2\"`"), SOURCE, NOTE),
    parse=_threshold,
    key_of=lambda t: t.name,
    attr="thresholds",
    key_doc="the feature: `macos.rdma_over_thunderbolt`",
)


# ---------------------------------------------------------------------------- mirrors, pypi_default, conda

MIRROR_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
PYPI_PLATFORMS = ("linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64")
CONDA_SUBDIR_RE = re.compile(r"^(linux|osx|win)-(64|aarch64|arm64|ppc64le)$")


def _mirror(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[MirrorRow]:
    name = (ctx.text(d, "name", where, required=True) or "").lower()
    if not MIRROR_NAME_RE.match(name):
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name", f"not a mirror name (lower-case letters, digits, '.', '-', '_'): {name!r}")
    url = read_url(ctx, d, "url", where, required=True) or ""
    layout = ctx.text(d, "layout", where, required=True) or ""
    if layout not in ("simple", "flat"):
        raise ctx.fail(ctx.line_of(d, "layout"), f"{where}.layout", f"must be simple or flat, not {layout!r}")
    listing = ctx.text(d, "listing", where)
    if layout == "flat" and not listing:
        listing = "{url}/{variant}/"
    if listing is not None and "{url}" not in listing:
        raise ctx.fail(ctx.line_of(d, "listing"), f"{where}.listing", "must start from {url} (e.g. \"{url}/{variant}/\")")
    return one_row(MirrorRow(
        name, url, layout, listing, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where),
        ctx.text(d, "derived_from", where), ctx.strings(d, "unknown", where),
    ))


MIRRORS: Table[MirrorRow] = Table(
    key="mirrors",
    summary="mirrors of the PyTorch wheel index (mirrors.yaml)",
    shape="list",
    fields=(
        Field("name", "string, required", "lower-case letters, digits, `.`, `-`, `_`"),
        Field("url", "string, required", "`http(s)://` or `file://`"),
        Field("layout", "string, required", "`simple` or `flat` (below)"),
        Field("listing", "string", "flat only: the page of file links (default `\"{url}/{variant}/\"`; `{url}` and `{variant}` are filled in)"),
        SOURCE, NOTE, DERIVED, UNKNOWN,
    ),
    parse=_mirror,
    key_of=lambda m: m.name,
    attr="mirrors",
    holds="tuple",
    layering="by `name`",
    doc=(
        "A mirror of https://download.pytorch.org/whl that `stackdoctor install --mirror NAME` (or `STACKDOCTOR_MIRROR`)\n"
        "uses instead of it. A user file can add an internal one.\n"
        "\n"
        "```yaml\n"
        "mirrors:\n"
        "  - name: aliyun\n"
        "    url: https://mirrors.aliyun.com/pytorch-wheels\n"
        "    layout: flat\n"
        "    listing: \"{url}/{variant}/\"\n"
        "    source: \"...\"\n"
        "```\n"
        "\n"
        "| layout | what the mirror serves | what the installer is given |\n"
        "|---|---|---|\n"
        "| `simple` | a PEP 503 copy of `/whl/<variant>/`: pages `<url>/<variant>/<project>/` | `--index-url` / `--extra-index-url <url>/<variant>` (uv: `--index`) |\n"
        "| `flat` | the files of a variant in one folder, `<url>/<variant>/<file>.whl`, and a page linking them (`listing`) | `--find-links <listing>` |\n"
        "\n"
        "`--mirror URL` names a mirror the matrix does not know; its layout is found by asking both forms (the one that answers is kept)."
    ),
)


def _pypi_default(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[PypiDefault]:
    torch = ctx.text(d, "torch", where, required=True) or ""
    if not re.match(r"^\d+\.\d+$", torch):
        raise ctx.fail(ctx.line_of(d, "torch"), f"{where}.torch", f"expected a torch minor like \"2.13\", got {torch!r}")
    platform = ctx.text(d, "platform", where, required=True) or ""
    if platform not in PYPI_PLATFORMS:
        raise ctx.fail(ctx.line_of(d, "platform"), f"{where}.platform", f"must be one of {', '.join(PYPI_PLATFORMS)}, not {platform!r}")
    variant = ctx.text(d, "variant", where)
    if variant is not None and not VARIANT_RE.match(variant):
        raise ctx.fail(ctx.line_of(d, "variant"), f"{where}.variant", f"not a variant name (cpu, cuXYZ, rocmX.Y, xpu): {variant!r}")
    unknown = ctx.strings(d, "unknown", where)
    if variant is None and not unknown:
        raise ctx.fail(ctx.line_of(d), f"{where}.unknown", "a row without a variant must say what is unknown")
    return one_row(PypiDefault(torch, platform, variant, ctx.text(d, "source", where, required=True) or "", unknown))


PYPI_DEFAULT: Table[PypiDefault] = Table(
    key="pypi_default",
    summary="which variant PyPI's plain `torch` wheel is (learned.yaml)",
    shape="list",
    fields=(
        Field("torch", "string, required", "a torch minor: `\"2.13\"`"),
        Field("platform", "string, required", ", ".join(f"`{p}`" for p in PYPI_PLATFORMS)),
        Field("variant", "string / null", "a variant name; `null` when not known"),
        SOURCE,
        Field("unknown", "list of strings", "required with a `null` variant: why it is not known"),
    ),
    parse=_pypi_default,
    key_of=lambda d: (d.torch, d.platform),
    attr="pypi_defaults",
    holds="tuple",
    layering="by (`torch`, `platform`)",
    doc=(
        "Written by `stackdoctor matrix learn`. PyPI's `torch` wheels carry no local label, yet each is one variant (on Linux a\n"
        "CUDA build). A label-less torch on a PyPI-style index counts as the planned build only when it is that variant;\n"
        "otherwise `install` says what it is and whether it fits the machine.\n"
        "\n"
        "```yaml\n"
        "pypi_default:\n"
        "  - {torch: \"2.13\", platform: linux_x86_64, variant: cu130, source: \"...\"}\n"
        "  - {torch: \"2.9\", platform: linux_x86_64, variant: null, source: \"...\", unknown: [\"cu128 per ... vs cu126 per ...\"]}\n"
        "```\n"
        "\n"
        "Where the wheel itself is on disk, its METADATA decides instead (`Requires-Dist: cuda-toolkit[...]==13.0.3` -> `cu130`)."
    ),
)

_CONDA_RELEASES = Part(
    "conda.releases[]",
    (
        Field("version", "string, required", "the pytorch package version: `\"2.13.0\"`"),
        Field("cuda", "mapping", "conda platform -> the CUDA versions built for it: `{linux-64: [\"12.9\", \"13.0\"]}`"),
        Field("platforms", "list", "every conda platform with a build (`linux-64`, `linux-aarch64`, `osx-arm64`, `win-64`, ...)"),
        Field("source", "string, required", ""),
    ),
)


def _conda(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[CondaInfo]:
    releases: list[CondaRelease] = []
    if d.get("releases") is not None:
        for i, raw in enumerate(ctx.seq(d["releases"], f"{where}.releases", ctx.line_of(d, "releases"))):
            w = f"{where}.releases[{i}]"
            r = ctx.mapping(raw, w, ctx.line_of(d, "releases"))
            check_keys(ctx, r, _CONDA_RELEASES.names, w)
            version = ctx.version(r, "version", w)
            cuda: dict[str, tuple[str, ...]] = {}
            given = r.get("cuda")  # conda's CUDA builds per subdir
            if given is not None:
                cm = ctx.mapping(given, f"{w}.cuda", ctx.line_of(r, "cuda"))
                for subdir in cm:
                    if not CONDA_SUBDIR_RE.match(str(subdir)):
                        raise ctx.fail(ctx.line_of(cm, subdir), f"{w}.cuda.{subdir}", "not a conda platform (linux-64, linux-aarch64, osx-arm64, win-64, ...)")
                    vals = ctx.strings(cm, subdir, f"{w}.cuda")
                    for c in vals:
                        if not re.match(r"^\d+\.\d+$", c):
                            raise ctx.fail(ctx.line_of(cm, subdir), f"{w}.cuda.{subdir}", f"unparsable CUDA version {c!r} (expected like \"12.9\")")
                    cuda[str(subdir)] = vals
            platforms = ctx.strings(r, "platforms", w)
            for pl in platforms:
                if not CONDA_SUBDIR_RE.match(pl):
                    raise ctx.fail(ctx.line_of(r, "platforms"), f"{w}.platforms", f"not a conda platform: {pl!r}")
            releases.append(CondaRelease(str(version), cuda, platforms, ctx.text(r, "source", w, required=True) or ""))
    releases.sort(key=lambda r: Version(r.version), reverse=True)
    return one_row(CondaInfo(
        channel=ctx.text(d, "channel", where, required=True) or "",
        package=ctx.text(d, "package", where, required=True) or "",
        cpu_package=ctx.text(d, "cpu_package", where),
        gpu_package=ctx.text(d, "gpu_package", where),
        cuda_selector=ctx.text(d, "cuda_selector", where),
        cuda_build=ctx.text(d, "cuda_build", where),
        cpu_build=ctx.text(d, "cpu_build", where),
        virtual_package=ctx.text(d, "virtual_package", where),
        releases=tuple(releases),
        source=ctx.text(d, "source", where, required=True) or "",
        note=ctx.text(d, "note", where),
    ))


def merge_conda(base: CondaInfo | None, over: CondaInfo) -> CondaInfo:
    """A user ``conda`` table over the embedded one: given fields replace, releases merge by version."""
    if base is None:
        return over
    versions = {r.version for r in over.releases}
    rels = tuple(sorted(over.releases + tuple(r for r in base.releases if r.version not in versions), key=lambda r: Version(r.version), reverse=True))
    return dataclasses.replace(over, releases=rels)


CONDA: Table[CondaInfo] = Table(
    key="conda",
    summary="conda-forge's PyTorch packages (conda.yaml)",
    shape="one",
    fields=(
        Field("channel", "string, required", "`conda-forge`"),
        Field("package", "string, required", "the package; CUDA and CPU builds are told apart by the build string (`pytorch`)"),
        Field("cpu_package", "string", "`pytorch-cpu`"),
        Field("gpu_package", "string", "`pytorch-gpu`"),
        Field("cuda_selector", "string", "the package whose version selects the CUDA build (`cuda-version`: `\"cuda-version=12.9\"`)"),
        Field("cuda_build", "string", "build-string pattern of the CUDA builds (`\"cuda*\"`: spec `\"pytorch=2.13.0=cuda*\"`)"),
        Field("cpu_build", "string", "build-string pattern of the CPU builds (`\"cpu_*\"`)"),
        Field("virtual_package", "string", "what a CUDA build needs the solver to see (`__cuda`: a CUDA driver)"),
        Field("releases", "list", "the package's releases (below)"),
        SOURCE, NOTE,
    ),
    parse=_conda,
    key_of=lambda _c: "conda",
    merge=lambda acc, c: merge_conda(acc.get("conda"), c),
    attr="conda",
    holds="one",
    layering="the fields a later table gives replace, its `releases` merge by `version`",
    doc=(
        "For conda / mamba / micromamba / pixi environments: `install` offers them beside the pip wheels;\n"
        "`--installer conda|mamba|micromamba|pixi` and `--emit environment.yml` use them.\n"
        "\n"
        "```yaml\n"
        "conda:\n"
        "  channel: conda-forge\n"
        "  package: pytorch\n"
        "  cuda_selector: cuda-version\n"
        "  cuda_build: \"cuda*\"\n"
        "  cpu_build: \"cpu_*\"\n"
        "  virtual_package: __cuda\n"
        "  source: \"...\"\n"
        "  releases:\n"
        "    - version: \"2.13.0\"\n"
        "      cuda: {linux-64: [\"12.9\", \"13.0\"], linux-aarch64: [\"12.9\", \"13.0\"], win-64: [\"12.8\", \"13.0\"]}\n"
        "      platforms: [linux-64, linux-aarch64, osx-64, osx-arm64, win-64]\n"
        "      source: \"...\"\n"
        "```"
    ),
    parts=(_CONDA_RELEASES,),
)


# ---------------------------------------------------------------------------- source_build (issue 34)


@dataclass(frozen=True)
class SourceBuildFact:
    """One requirement of building torch from source (PyTorch's README, "From Source"), or a page it points to."""

    name: str  # "python", "gcc", "disk", "cudnn", ...
    minimum: str | None  # "3.10", "11.3.0", "10"; None: only needed, no version named
    unit: str | None  # "version" (default) or "GB"
    url: str | None  # where a user reads more (a support matrix, an installer)
    source: str
    note: str | None = None


_SB_UNITS = ("version", "GB")


def _source_build(ctx: Ctx, d: LDict, where: str, name: str) -> tuple[SourceBuildFact]:
    minimum = ctx.text(d, "minimum", where)
    if minimum is not None and not re.match(r"^\d+(\.\d+)*$", minimum):
        raise ctx.fail(ctx.line_of(d, "minimum"), f"{where}.minimum", f"unparsable minimum {minimum!r} (expected like \"11.3.0\" or \"10\")")
    unit = ctx.text(d, "unit", where)
    if unit is not None and unit not in _SB_UNITS:
        raise ctx.fail(ctx.line_of(d, "unit"), f"{where}.unit", f"must be version or GB, not {unit!r}")
    return one_row(SourceBuildFact(
        name, minimum, unit, read_url(ctx, d, "url", where), ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where),
    ))


SOURCE_BUILD: Table[SourceBuildFact] = Table(
    key="source_build",
    summary="what building torch from source needs (source_build.yaml; `install --from-source`)",
    shape="mapping",
    fields=(
        Field("minimum", "string", "the least version (`\"11.3.0\"`) or amount (`\"10\"` with `unit: GB`); absent: needed, no version named"),
        Field("unit", "string", "`version` (default) or `GB`"),
        Field("url", "string", "`http(s)://`: where a user reads more (a support matrix, an installer page)"),
        SOURCE, NOTE,
    ),
    parse=_source_build,
    key_of=lambda r: r.name,
    check_key=key_check(r"^[a-z][a-z0-9_]*$", "not a requirement name (lower-case letters, digits, '_'): {}"),
    key_doc="the requirement: `python`, `gcc`, `disk`, `cudnn`, `rocm`, `memory_per_job`, `repository`, ...",
    doc=(
        "Read by `stackdoctor install --from-source` (`stackdoctor/resolve/source_build.py`): each prerequisite's minimum, and the pages\n"
        "its fixes name. The code holds no version: a row missing here is planned as \"needed, no version named\".\n"
        "\n"
        "```yaml\n"
        "source_build:\n"
        "  gcc: {minimum: \"11.3.0\", source: \"https://github.com/pytorch/pytorch/blob/main/README.md#prerequisites\"}\n"
        "  disk: {minimum: \"10\", unit: GB, source: \"...\"}\n"
        "```"
    ),
)


# ---------------------------------------------------------------------------- the registry

# in the order a document's tables are read (a file with two bad tables names the first of them)
TABLES: tuple[Table[Any], ...] = (
    RELEASES, CUDA, GPUS, ROCM_OVERRIDES, JETSON, PEAKS, INDEXES,
    L4T_RELEASES, ROCM_APUS, INTEL_GPUS, FP32_LANES, THRESHOLDS,
    MIRRORS, PYPI_DEFAULT, CONDA,
    SOURCE_BUILD, RUNTIME_ERRORS, ROCM_KERNEL_USER_SPACE,
)
