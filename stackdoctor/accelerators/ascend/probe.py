"""The Ascend probe: what drives a Huawei Ascend NPU, read through :class:`~stackdoctor.system.System` only.

- ``npu-smi info``: the chips (one torch device per chip row), their health and HBM, and npu-smi's version;
- the NPU driver's ``/usr/local/Ascend/driver/version.info`` (``Version=``);
- CANN: ``ascend_toolkit_install.info`` under ``$ASCEND_HOME_PATH`` / ``$ASCEND_TOOLKIT_HOME`` or the default roots
  (``/usr/local/Ascend/cann`` since CANN 8.5, ``/usr/local/Ascend/ascend-toolkit/latest`` before), its
  ``set_env.sh``, and whether its libraries (``libhccl.so``, ``libascendcl.so``) are there;
- whether the CANN environment is active in the environment the target inherits (``ASCEND_HOME_PATH`` /
  ``ASCEND_TOOLKIT_HOME`` set and a CANN ``lib64`` on ``LD_LIBRARY_PATH``) — what ``source set_env.sh`` does;
- the device nodes (``/dev/davinci<N>``, ``/dev/davinci_manager``) and ``ASCEND_RT_VISIBLE_DEVICES``.

The facts are plain data in ``Facts.plugins["ascend"]`` (the plug-in seam's form). Parsers are pure and tested on
the recorded outputs under ``tests/fixtures/real/asc-*`` and ``doc-ascend-*``.
"""

from __future__ import annotations

import re
from typing import Any

from stackdoctor.model.probing import ProbeContext, ProbeOutput

__all__ = ["CANN_ROOTS", "DRIVER_INFO", "parse_install_info", "parse_npu_smi_info", "parse_visible_devices", "probe"]

DRIVER_INFO = "/usr/local/Ascend/driver/version.info"
# CANN's roots, most specific first: the variables set_env.sh exports, then the default install roots
CANN_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
CANN_ROOTS = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
CANN_LIBS = ("libhccl.so", "libascendcl.so")  # what torch_npu's import opens first (its error names libhccl.so)
ARCHES = ("aarch64", "x86_64")

_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_BANNER = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_FIRST = re.compile(r"^(\d+)\s+(\S+)$")  # "0     910B4-1"
_SECOND = re.compile(r"^(\d+)(?:\s+(\d+))?$")  # "0" | "0     1" (Chip Phy-ID / Chip Device)
_BUS = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi_info(text: str) -> dict[str, Any]:
    """``npu-smi info``'s table: ``{"version": "25.2.2" | None, "chips": [...]}``, one chip per pair of rows
    (``NPU Name | Health | Power Temp Hugepages`` then ``Chip [Phy-ID|Device] | Bus-Id | AICore Memory [HBM]``),
    in the order npu-smi prints them (the order torch numbers them). The process table (four cells) is skipped.

    >>> parse_npu_smi_info("| 0     910B4-1   | OK   | 78.2  40  0 / 0 |\\n| 0    | 0000:0E:00.0 | 0  0 / 0  61825/ 65536 |")["chips"][0]["name"]
    '910B4-1'
    """
    version = None
    chips: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for line in text.splitlines():
        m = _BANNER.search(line)
        if m and version is None:
            version = m.group(2)
            continue
        row = _ROW.match(line)
        if not row:
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        if len(cells) != 3:
            pending = None
            continue
        first, second = _FIRST.match(cells[0]), _SECOND.match(cells[0])
        if first and not first.group(2).isdigit() and not _BUS.match(cells[1]) and cells[1] not in ("", "NA"):
            pending = {"npu": int(first.group(1)), "name": first.group(2), "health": cells[1] or None}
            continue
        if second and pending is not None:
            chip: dict[str, Any] = {**pending, "chip": int(second.group(1)), "bus_id": cells[1] if _BUS.match(cells[1]) else None}
            if second.group(2) is not None:
                chip["phy_id"] = int(second.group(2))
            pairs = [(int(a), int(b)) for a, b in _PAIR.findall(cells[2])]
            if pairs:  # the last pair is the device memory: HBM where there are two, the only one on 310P
                used, total = pairs[-1] if len(pairs) < 2 or pairs[-1][1] else pairs[0]
                chip["memory_used_mib"], chip["memory_total_mib"] = used, total
            chips.append(chip)
            pending = None
    return {"version": version, "chips": chips}


def parse_install_info(text: str) -> dict[str, str]:
    """A ``key=value`` file (the driver's ``version.info``, CANN's ``ascend_toolkit_install.info``), keys as written.

    >>> parse_install_info("package_name=Ascend-cann-toolkit\\nversion=8.3.RC2\\n")["version"]
    '8.3.RC2'
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and key not in out:
            out[key] = value.strip()
    return out


def parse_visible_devices(text: str | None) -> list[int] | None:
    """``ASCEND_RT_VISIBLE_DEVICES``: the device ids it keeps, or None when unset (every device visible).
    An entry that is not a number keeps nothing after it (CANN rejects the value).

    >>> parse_visible_devices("0,1"), parse_visible_devices(""), parse_visible_devices(None)
    ([0, 1], [], None)
    """
    if text is None:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            break
        out.append(int(part))
    return out


def _cann(ctx: ProbeContext) -> dict[str, Any]:
    """The CANN install the target would use: its root, version, info file, set_env.sh and libraries."""
    sys_ = ctx.system
    seen: list[tuple[str, str]] = [(v, sys_.getenv(v) or "") for v in CANN_VARS]
    roots = [(p.rstrip("/"), f"${v}") for v, p in seen if p] + [(r, "default path") for r in CANN_ROOTS]
    for root, how in roots:
        for arch in ARCHES:
            info_path = f"{root}/{arch}-linux/ascend_toolkit_install.info"
            info = sys_.read_text(info_path)
            if info.status != "ok":
                continue
            data = parse_install_info(info.text)
            set_env = next((p for p in (f"{root}/set_env.sh", f"{root.rsplit('/', 1)[0]}/set_env.sh") if sys_.is_file(p)), None)
            libs = {lib: sys_.exists(f"{root}/lib64/{lib}") or sys_.exists(f"{root}/{arch}-linux/lib64/{lib}") for lib in CANN_LIBS}
            return {"root": root, "found_by": how, "version": data.get("version") or None, "info_file": info_path,
                    "path": data.get("path"), "arch": data.get("arch") or arch, "set_env": set_env, "libs": libs}
    return {}


def _env(ctx: ProbeContext) -> dict[str, Any]:
    sys_ = ctx.system
    homes = {v: sys_.getenv(v) for v in CANN_VARS if sys_.getenv(v)}
    ld = [p for p in (sys_.getenv("LD_LIBRARY_PATH") or "").split(":") if p]
    cann_ld = [p for p in ld if "ascend" in p.lower() and p.rstrip("/").endswith(("lib64", "lib64/common", "lib64/driver"))]
    return {"homes": homes, "ld_library_path_cann": cann_ld[:8], "active": bool(homes) and bool(cann_ld)}


def probe(ctx: ProbeContext) -> ProbeOutput:
    sys_ = ctx.system
    facts: dict[str, Any] = {"sources": {}}
    src = facts["sources"]
    smi = sys_.which("npu-smi")
    facts["npu_smi"] = {"state": "absent", "version": None}
    chips: list[dict[str, Any]] = []
    if smi:
        res = sys_.run([smi, "info"], timeout=ctx.timeout_s)
        state = res.status if res.status != "ok" else ("ok" if res.returncode == 0 else "error")
        facts["npu_smi"] = {"state": state, "version": None}
        if res.status == "ok":
            parsed = parse_npu_smi_info(res.stdout)
            facts["npu_smi"]["version"] = parsed["version"]
            chips = parsed["chips"]
            if state == "error":
                tail = (res.stderr or res.stdout).strip().splitlines()
                facts["npu_smi"]["error"] = tail[-1][:300] if tail else None
            if chips:
                src["devices"] = "npu-smi info"
    nodes = sorted((n for n in sys_.listdir("/dev") if re.fullmatch(r"davinci\d+", n)), key=lambda n: int(n[7:]))
    facts["device_nodes"] = [f"/dev/{n}" for n in nodes]
    facts["davinci_manager"] = sys_.exists("/dev/davinci_manager")
    if not chips and nodes:  # no npu-smi (a container without it mounted): the device nodes still count the chips
        chips = [{"npu": int(n[7:]), "name": None, "chip": 0, "node": f"/dev/{n}"} for n in nodes]
        src["devices"] = "/dev/davinci*"
    facts["devices"] = [{"index": i, **c} for i, c in enumerate(chips)]
    drv = sys_.read_text(DRIVER_INFO)
    facts["driver"] = None
    if drv.status == "ok":
        facts["driver"] = parse_install_info(drv.text).get("Version") or None
        src["driver"] = DRIVER_INFO
    facts["cann"] = _cann(ctx)
    if facts["cann"]:
        src["cann"] = facts["cann"]["info_file"]
    facts["env"] = _env(ctx)
    raw = sys_.getenv("ASCEND_RT_VISIBLE_DEVICES")
    facts["visible_devices"] = raw
    facts["visible_ids"] = parse_visible_devices(raw)
    return ProbeOutput(facts={"ascend": facts})
