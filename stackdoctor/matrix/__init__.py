"""The compatibility matrix: which torch builds exist, what they run on, and where each fact came from.

The data lives in ``compat_matrix/*.yaml`` (shipped as the package ``stackdoctor.compat_matrix``;
schema in ``compat_matrix/SCHEMA.md``, generated from the declarations by :mod:`stackdoctor.matrix.schema_doc`).
:func:`load_matrix` reads the embedded files, then layers user files over them (``--matrix FILE`` /
``STACKDOCTOR_MATRIX``): a user row replaces or merges into the earlier row with the same key, by its table's rule.

Every table is declared once in :mod:`stackdoctor.matrix.tables` (:data:`TABLES`): its YAML key, fields, row parser,
layering key and merge rule, the :class:`Matrix` field it fills, how it is shown. Parsing and validation
(:mod:`~stackdoctor.matrix.load`), layering (``build``), :meth:`Matrix.to_data` and ``SCHEMA.md`` iterate them.

Loading is strict: a malformed or invalid file raises :class:`~stackdoctor.core.errors.MatrixError` with
one sentence naming the file, the line and the field. Only ``yaml.safe_load`` semantics are used,
with a cap on document size and on alias resolutions (no "billion laughs") (:mod:`~stackdoctor.matrix.reader`).

Everything else here is pure: :func:`arch_runs`, :func:`gfx_supported`, :func:`driver_meets`,
:func:`variant_from_version` (:mod:`~stackdoctor.matrix.pure`) and the :class:`Matrix` look-ups
(:mod:`~stackdoctor.matrix.model`) do no I/O.

The modules: ``pure`` (helpers) <- ``model`` (rows, Matrix) <- ``reader`` (YAML, validation context) <- ``tables``
(the declarations) <- ``load`` (files, layering); ``schema_doc`` writes SCHEMA.md. This module only re-exports.
"""

from __future__ import annotations

from stackdoctor.matrix.load import (
    TOP_KEYS as TOP_KEYS,
)
from stackdoctor.matrix.load import (
    Parsed as Parsed,
)
from stackdoctor.matrix.load import (
    build as build,
)
from stackdoctor.matrix.load import (
    default_index_url as default_index_url,
)
from stackdoctor.matrix.load import (
    embedded_matrix as embedded_matrix,
)
from stackdoctor.matrix.load import (
    embedded_parts as embedded_parts,
)
from stackdoctor.matrix.load import (
    learned_layer_path as learned_layer_path,
)
from stackdoctor.matrix.load import (
    load_matrix as load_matrix,
)
from stackdoctor.matrix.load import (
    parse_document as parse_document,
)
from stackdoctor.matrix.load import (
    parse_matrix_text as parse_matrix_text,
)
from stackdoctor.matrix.load import (
    read_user_file as read_user_file,
)
from stackdoctor.matrix.load import (
    top_keys as top_keys,
)
from stackdoctor.matrix.load import (
    user_matrix_paths as user_matrix_paths,
)
from stackdoctor.matrix.load import (
    validate_file as validate_file,
)
from stackdoctor.matrix.model import (
    SCHEMA as SCHEMA,
)
from stackdoctor.matrix.model import (
    ApuRow as ApuRow,
)
from stackdoctor.matrix.model import (
    CondaInfo as CondaInfo,
)
from stackdoctor.matrix.model import (
    CondaRelease as CondaRelease,
)
from stackdoctor.matrix.model import (
    CudaRow as CudaRow,
)
from stackdoctor.matrix.model import (
    Fp32Lanes as Fp32Lanes,
)
from stackdoctor.matrix.model import (
    GpuRow as GpuRow,
)
from stackdoctor.matrix.model import (
    IndexRow as IndexRow,
)
from stackdoctor.matrix.model import (
    JetsonRow as JetsonRow,
)
from stackdoctor.matrix.model import (
    L4tRow as L4tRow,
)
from stackdoctor.matrix.model import (
    Matrix as Matrix,
)
from stackdoctor.matrix.model import (
    MirrorRow as MirrorRow,
)
from stackdoctor.matrix.model import (
    PatchRow as PatchRow,
)
from stackdoctor.matrix.model import (
    Peak as Peak,
)
from stackdoctor.matrix.model import (
    PypiDefault as PypiDefault,
)
from stackdoctor.matrix.model import (
    Release as Release,
)
from stackdoctor.matrix.model import (
    Threshold as Threshold,
)
from stackdoctor.matrix.model import (
    Variant as Variant,
)
from stackdoctor.matrix.pure import (
    ARCH_RE as ARCH_RE,
)
from stackdoctor.matrix.pure import (
    GFX_RE as GFX_RE,
)
from stackdoctor.matrix.pure import (
    INDEX_NAME_RE as INDEX_NAME_RE,
)
from stackdoctor.matrix.pure import (
    OS_WORDS as OS_WORDS,
)
from stackdoctor.matrix.pure import (
    PLUGIN_VARIANT_KINDS as PLUGIN_VARIANT_KINDS,
)
from stackdoctor.matrix.pure import (
    PY_RE as PY_RE,
)
from stackdoctor.matrix.pure import (
    TEGRA as TEGRA,
)
from stackdoctor.matrix.pure import (
    VARIANT_KINDS as VARIANT_KINDS,
)
from stackdoctor.matrix.pure import (
    VARIANT_RE as VARIANT_RE,
)
from stackdoctor.matrix.pure import (
    arch_match as arch_match,
)
from stackdoctor.matrix.pure import (
    arch_runs as arch_runs,
)
from stackdoctor.matrix.pure import (
    cc_tuple as cc_tuple,
)
from stackdoctor.matrix.pure import (
    driver_meets as driver_meets,
)
from stackdoctor.matrix.pure import (
    gfx_supported as gfx_supported,
)
from stackdoctor.matrix.pure import (
    normalise_gpu_name as normalise_gpu_name,
)
from stackdoctor.matrix.pure import (
    parse_platform as parse_platform,
)
from stackdoctor.matrix.pure import (
    platform_words as platform_words,
)
from stackdoctor.matrix.pure import (
    register_variant_kind as register_variant_kind,
)
from stackdoctor.matrix.pure import (
    sass_runs as sass_runs,
)
from stackdoctor.matrix.pure import (
    variant_from_version as variant_from_version,
)
from stackdoctor.matrix.pure import (
    variant_kind as variant_kind,
)
from stackdoctor.matrix.reader import (
    MAX_ALIASES as MAX_ALIASES,
)
from stackdoctor.matrix.reader import (
    MAX_DOCUMENT_BYTES as MAX_DOCUMENT_BYTES,
)
from stackdoctor.matrix.reader import (
    MAX_EXPANDED_NODES as MAX_EXPANDED_NODES,
)
from stackdoctor.matrix.reader import (
    Ctx as Ctx,
)
from stackdoctor.matrix.reader import (
    LDict as LDict,
)
from stackdoctor.matrix.reader import (
    LList as LList,
)
from stackdoctor.matrix.reader import (
    check_expansion as check_expansion,
)
from stackdoctor.matrix.reader import (
    check_keys as check_keys,
)
from stackdoctor.matrix.reader import (
    make_loader as make_loader,
)
from stackdoctor.matrix.reader import (
    parse_yaml as parse_yaml,
)
from stackdoctor.matrix.reader import (
    type_name as type_name,
)
from stackdoctor.matrix.releases import (
    merge_release as merge_release,
)
from stackdoctor.matrix.releases import (
    merge_variant as merge_variant,
)
from stackdoctor.matrix.releases import (
    patch_base as patch_base,
)
from stackdoctor.matrix.releases import (
    read_arch_list as read_arch_list,
)
from stackdoctor.matrix.releases import (
    read_release as read_release,
)
from stackdoctor.matrix.releases import (
    read_variant as read_variant,
)
from stackdoctor.matrix.table import (
    Field as Field,
)
from stackdoctor.matrix.table import (
    Part as Part,
)
from stackdoctor.matrix.table import (
    Table as Table,
)
from stackdoctor.matrix.table import (
    read_driver as read_driver,
)
from stackdoctor.matrix.table import (
    read_pythons as read_pythons,
)
from stackdoctor.matrix.table import (
    read_url as read_url,
)
from stackdoctor.matrix.tables import (
    CONDA_SUBDIR_RE as CONDA_SUBDIR_RE,
)
from stackdoctor.matrix.tables import (
    MIRROR_NAME_RE as MIRROR_NAME_RE,
)
from stackdoctor.matrix.tables import (
    PYPI_PLATFORMS as PYPI_PLATFORMS,
)
from stackdoctor.matrix.tables import (
    TABLES as TABLES,
)
from stackdoctor.matrix.tables import (
    merge_conda as merge_conda,
)

__all__ = [
    "CudaRow",
    "IndexRow",
    "JetsonRow",
    "Matrix",
    "Release",
    "Table",
    "TABLES",
    "Variant",
    "arch_runs",
    "arch_match",
    "default_index_url",
    "driver_meets",
    "gfx_supported",
    "load_matrix",
    "parse_platform",
    "platform_words",
    "OS_WORDS",
    "variant_from_version",
    "variant_kind",
    "MAX_DOCUMENT_BYTES",
    "MAX_ALIASES",
]
