"""The ``rocm_kernel_user_space`` table (issue 43): AMD's window between the kernel driver (KMD, ``amdgpu``) and the ROCm
user space releases tested with it, from AMD's "User and kernel-space support matrix". Declared here, beside its row,
and registered in :data:`stackdoctor.matrix.tables.TABLES`; read by :func:`stackdoctor.accelerators.amd.fit.userspace_window`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackdoctor.matrix.reader import Ctx, LDict
from stackdoctor.matrix.table import NOTE, SOURCE, Field, Table, one_row

_RELEASE = re.compile(r"^\d+\.\d+$")


@dataclass(frozen=True)
class KernelUserSpace:
    """One kernel driver release and the ROCm user space releases AMD supports on it."""

    driver: str  # "6.3" (a 6.x KMD is named by its ROCm release) | "30.30" (amdgpu released apart from ROCm)
    user_space: tuple[str, ...]  # ROCm releases: ("6.1", "6.2", "6.3", "6.4", "7.0")
    source: str
    rocm: str | None = None  # the ROCm release that ships this driver, where a source pairs them
    note: str | None = None


def _release(ctx: Ctx, d: LDict, key: str, where: str, value: str | None) -> str | None:
    if value is not None and not _RELEASE.match(value):
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable release {value!r} (expected major.minor like \"6.3\")")
    return value


def _row(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[KernelUserSpace]:
    driver = _release(ctx, d, "driver", where, ctx.text(d, "driver", where, required=True)) or ""
    user = ctx.strings(d, "user_space", where)
    if not user:
        raise ctx.fail(ctx.line_of(d, "user_space"), f"{where}.user_space", "missing (every row lists the user space releases)")
    for u in user:
        _release(ctx, d, "user_space", where, u)
    return one_row(KernelUserSpace(driver, user, ctx.text(d, "source", where, required=True) or "",
                                   _release(ctx, d, "rocm", where, ctx.text(d, "rocm", where)), ctx.text(d, "note", where)))


ROCM_KERNEL_USER_SPACE: Table[KernelUserSpace] = Table(
    key="rocm_kernel_user_space",
    summary="AMD kernel driver (amdgpu) release -> the ROCm user space releases supported on it",
    shape="list",
    fields=(
        Field("driver", "string, required", "the kernel driver's release: `\"6.3\"` (named by its ROCm release) or `\"30.30\"` (amdgpu 30.30.x)"),
        Field("user_space", "list, required", "the ROCm user space releases supported on it: `[\"6.1\", \"6.2\", \"6.3\"]`"),
        Field("rocm", "string", "the ROCm release that ships this driver, where a source pairs them; absent otherwise"),
        SOURCE, NOTE,
    ),
    parse=_row,
    key_of=lambda r: r.driver,
    holds="tuple",
    layering="by `driver`",
    doc=(
        "```yaml\n"
        "rocm_kernel_user_space:\n"
        "  - {driver: \"6.3\", rocm: \"6.3\", user_space: [\"6.1\", \"6.2\", \"6.3\", \"6.4\", \"7.0\"], source: \"...\"}\n"
        "```\n"
        "\n"
        "A torch ROCm wheel brings its own ROCm user space; the plan warns when its release is not among the host kernel\n"
        "driver's `user_space` (the driver: the loaded amdgpu's version where it names a listed release, else the one the\n"
        "host's ROCm release ships). A driver this table does not list is said as unknown, never as inside the window."
    ),
)
