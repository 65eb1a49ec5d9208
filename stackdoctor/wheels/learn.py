"""``stackdoctor matrix learn``: matrix rows read from an index and its artifacts, never typed in.

A release is learned from what an index serves (PEP 503 HTML / PEP 691 JSON project pages; PyPI,
download.pytorch.org and their mirrors alike):

- the **wheel file names**: versions, local labels (``+cu130`` = the variant), Python tags (``cp313t`` =
  free-threaded 3.13), platform tags (``manylinux_2_28_x86_64`` = glibc 2.28 floor);
- the **core metadata** (PEP 658 / 714 ``<wheel>.metadata`` files; where an index has none, the wheel's own
  ``METADATA`` read by HTTP range requests, :mod:`stackdoctor.wheels.lazywheel`: the zip's directory and that member,
  ~2 MB of a 450 MB torch wheel; the whole wheel only where ranges are refused and ``--download`` allows it):
  ``Requires-Python``; the ``nvidia-*`` / ``cuda-toolkit`` pins, which say
  which CUDA a label-less (PyPI) build bundles (``cuda-toolkit[...]==13.2.2`` -> ``cu132``); the triton pin;
  and from torchvision's / torchaudio's own ``Requires-Dist: torch==X`` the companion pairing;
- with ``--gpu-code`` (or ``--download``), the **GPU code** of each (variant, platform)'s binaries
  (``libtorch_cuda.so``'s fat binary, ``libtorch_hip.so``'s offload bundles) with the same static readers
  ``check`` uses, the library member streamed by one range request and only its headers kept; an aarch64 or
  Windows wheel's list goes to ``arch_by_platform``, never borrowed from x86_64's.

What could not be learned (an artifact over a cap, an empty file, refused ranges, no GPU library) is skipped and
named in :attr:`LearnResult.missing` with why, never the end of the run; ``matrix learn`` then exits 1.

Each row's ``source`` is the artifact it was read from (its URL and sha256) and ``learned`` the date. The rows go
to a layer file (the user's ``~/.config/stackdoctor/learned.yaml``, ``--out FILE``, or the shipped
``compat_matrix/learned.yaml``), which :func:`stackdoctor.matrix.load_matrix` layers over the hand-kept rows: a
learned variant merges into the known one of the same name field by field.

Incremental: a release already in the layer is not fetched again (``--refresh`` re-reads it). Every read is
bounded: pages by the index client's size cap and deadline, metadata files by :data:`MAX_METADATA_BYTES`,
wheels by ``max_wheel_bytes``; index URLs are printed through :func:`stackdoctor.core.redact.redact_text`.

:func:`witness_matrix` is the run-time use: a release the matrix lacks but an index serves is learned in
memory (names and metadata only) and planned, its GPU code taken from the nearest known build of the same CUDA /
ROCm version and marked inferred. :func:`read_installed_gpu_code` reads the installed binaries afterwards.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from stackdoctor import kinds
from stackdoctor.core.errors import IndexError_, MatrixError
from stackdoctor.wheels.index import IndexFile
from stackdoctor.wheels.learn_sources import HttpSource, SnapshotSource, Source
from stackdoctor.wheels.learn_wheels import (  # noqa: F401  (read_open_library, read_wheel_metadata, read_installed_gpu_code: used through this module)
    CoreMetadata,
    WheelFacts,
    parse_core_metadata,
    pinned_version,
    public_url,
    python_key,
    read_installed_gpu_code,
    read_open_library,
    read_wheel_gpu_code,
    read_wheel_metadata,
    runtime_pins,
    tag_family,
    torch_requirement,
    triton_pin,
    variant_from_requires,
    wheel_facts,
)

__all__ = [
    "CoreMetadata",
    "HttpSource",
    "LearnResult",
    "SnapshotSource",
    "learn",
    "parse_core_metadata",
    "read_installed_gpu_code",
    "variant_from_requires",
    "wheel_facts",
    "witness_matrix",
]

COMPANIONS = ("torchvision", "torchaudio")
LAYER_HEADER = (
    "# Learned by `stackdoctor matrix learn` from the artifacts an index serves (file names, core metadata,\n"
    "# and with --download the GPU code of the binaries); each row's source is the artifact (URL, sha256).\n"
    "# Layered over the hand-kept rows (compat_matrix/SCHEMA.md, \"learned rows\"). Regenerate, do not edit.\n"
)

# ---------------------------------------------------------------------------- GPU code into a variant row, by format


def _learned_format(kind: str) -> kinds.Accelerator:
    """The kind whose builds carry GPU code of format ``kind`` (``code["kind"]``): what writes it into a variant row."""
    found = next((a for a in kinds.ALL if a.gpu_code == kind), None)
    if found is None:
        raise KeyError(kind)
    return found


# ---------------------------------------------------------------------------- learning


@dataclass
class LearnResult:
    rows: list[dict[str, Any]] = field(default_factory=list)  # release rows learned now (matrix YAML shape)
    pypi_default: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # versions already learned
    lines: list[str] = field(default_factory=list)  # what was done, one line each (URLs not yet redacted)
    errors: list[str] = field(default_factory=list)
    # what was asked for and not learned, one line each: "torch 2.15.0 cu132 manylinux_2_28_aarch64: GPU code of <wheel> (why)"
    missing: list[str] = field(default_factory=list)


def _pick(files: Sequence[WheelFacts]) -> WheelFacts:
    """The representative wheel of a group: a regular (not free-threaded) CPython, the middle one."""
    plain = [f for f in files if f.pythons and not f.pythons[0].endswith("t")] or list(files)
    plain.sort(key=lambda f: (python_key(f.pythons[0]) if f.pythons else (0, 0, 0), f.filename))
    return plain[len(plain) // 2]


def _source_of(f: IndexFile) -> str:
    sha = f" sha256:{f.sha256}" if f.sha256 else ""
    return f"{public_url(f.url)}{sha}"


def _version_ok(v: Version, since: Version) -> bool:
    return not (v.is_prerelease or v.is_devrelease) and v >= since


def learn(
    source: Source,
    *,
    existing: Mapping[str, Mapping[str, Any]] | None = None,
    since: str = "2.0",
    versions: Sequence[str] = (),
    refresh: bool = False,
    download: bool = False,
    companions: bool = True,
    today: str | None = None,
) -> LearnResult:
    """Learn the torch releases ``source`` serves (``versions``: only those). ``existing``: rows already in the
    layer, by version; those are skipped unless ``refresh``."""
    date = today or dt.date.today().isoformat()
    res = LearnResult()
    existing = existing or {}
    floor = Version(since)
    page, files = source.files("torch")
    wheels = [w for f in files if (w := wheel_facts(f)) is not None and w.project == "torch"]
    by_version: dict[Version, list[WheelFacts]] = {}
    for w in wheels:
        if _version_ok(w.version, floor):
            by_version.setdefault(w.version, []).append(w)
    wanted = {Version(v) for v in versions}
    if wanted and not wanted & set(by_version):
        res.errors.append(f"{page} serves no torch {', '.join(sorted(map(str, wanted)))}")
    todo = _todo(by_version, wanted, existing, refresh, download, res)
    pairs: dict[str, dict[str, str]] = {}
    ranged_pairs: dict[str, set[str]] = {}
    comp_pythons: dict[str, dict[str, set[str]]] = {}
    if companions and todo:
        for comp in COMPANIONS:
            pairs[comp], comp_pythons[comp], ranged_pairs[comp] = _learn_companion(source, comp, {str(v) for v in todo}, floor, res)
    by_fam_default: dict[tuple[str, str], tuple[Version, str, str]] = {}
    for v in todo:
        row = _learn_release(source, page, v, by_version[v], date, download, res)
        if row is None:
            continue
        _pair(row, str(v), pairs, ranged_pairs, comp_pythons, companions)
        _note_defaults(by_fam_default, row, v, row.pop("_by_plat"))
        res.rows.append(row)
    for (minor, fam), (_v, name, src) in sorted(by_fam_default.items()):
        res.pypi_default.append({"torch": minor, "platform": fam, "variant": name, "source": src})
    return res


def _todo(by_version: Mapping[Version, list[WheelFacts]], wanted: set[Version], existing: Mapping[str, Mapping[str, Any]], refresh: bool,
          download: bool, res: LearnResult) -> list[Version]:
    """The releases to read, newest first: those asked for (all when none is), less those the layer has (said as skipped)."""
    todo: list[Version] = []
    for v in sorted(by_version, reverse=True):
        if wanted and v not in wanted:
            continue
        old = existing.get(str(v))
        if old and old.get("learned") and not refresh and (not download or _has_gpu_code(old)):
            res.skipped.append(str(v))
            continue
        todo.append(v)
    return todo


def _pair(row: dict[str, Any], v: str, pairs: Mapping[str, Mapping[str, str]], ranged_pairs: Mapping[str, set[str]],
          comp_pythons: Mapping[str, Mapping[str, set[str]]], companions: bool) -> None:
    """The companions paired with torch ``v`` into its row, and the Pythons torch has wheels for and torchvision has not."""
    for comp in COMPANIONS:
        cv = pairs.get(comp, {}).get(v)
        if cv:
            row[comp] = cv
            if v in ranged_pairs.get(comp, set()):
                row.setdefault("paired_by_range", []).append(comp)
    tv = row.get("torchvision")
    if tv and comp_pythons.get("torchvision", {}).get(tv) is not None:
        have = comp_pythons["torchvision"][tv]
        only = [p for p in row.get("pythons", []) if p not in have]
        if only:
            row["torch_only_pythons"] = only
    elif companions and not tv and "torchvision" in pairs:
        row.setdefault("unknown", []).append("torchvision: no torchvision on the index pins this torch")


def _note_defaults(by_fam_default: dict[tuple[str, str], tuple[Version, str, str]], row: dict[str, Any], v: Version,
                   srcs: Mapping[str, Mapping[str, str]]) -> None:
    """PyPI's default build of each (minor release, platform family): the newest learned release's."""
    for vr in row.get("variants", []):
        if vr.get("index") == "pypi":
            for plat in vr["platforms"]:
                key = (f"{v.major}.{v.minor}", tag_family(plat))
                if key not in by_fam_default or by_fam_default[key][0] < v:
                    by_fam_default[key] = (v, vr["name"], srcs[vr["name"]][plat])


def _why(source: Source, filename: str) -> str | None:
    why = getattr(source, "why", None)
    return why.get(filename) if isinstance(why, dict) else None


def _gpu_code_of(source: Source, f: IndexFile, res: LearnResult) -> dict[str, Any] | None:
    """The GPU code of wheel ``f``: by range reads where the source can (:meth:`HttpSource.gpu_code`), else from
    the wheel the source hands over (a snapshot's folder of downloaded wheels)."""
    reader = getattr(source, "gpu_code", None)
    if reader is not None:
        code = reader(f)
        return code if isinstance(code, dict) or code is None else None
    with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
        try:
            path = source.wheel(f, Path(tmp))
        except IndexError_ as exc:
            res.errors.append(str(exc))
            return None
        return read_wheel_gpu_code(path) if path else None


def _has_gpu_code(row: Mapping[str, Any]) -> bool:
    """Every variant of a learned row whose builds carry GPU code has it (a CPU or XPU build has none to read)."""
    return all(vr.get("arch_list") or vr.get("gfx") or kinds.gpu_code_kind(vr.get("name")) is None for vr in row.get("variants") or [])


def _learn_companion(
    source: Source, comp: str, torch_versions: set[str], floor: Version, res: LearnResult
) -> tuple[dict[str, str], dict[str, set[str]], set[str]]:
    """torch version -> the newest ``comp`` release pinning it; ``comp`` version -> Pythons its wheels serve; the
    torch versions paired through a range (``torch>=2.14.0``) rather than an exact pin."""
    _page, files = source.files(comp)
    groups: dict[Version, list[WheelFacts]] = {}
    for f in files:
        w = wheel_facts(f)
        if w is not None and not (w.version.is_prerelease or w.version.is_devrelease):
            groups.setdefault(w.version, []).append(w)
    pairs: dict[str, str] = {}
    pythons: dict[str, set[str]] = {}
    ranged: list[tuple[str, Requirement, str]] = []
    oldest = min((Version(t) for t in torch_versions), default=floor)
    for cv in sorted(groups, reverse=True):
        if set(pairs) >= torch_versions:
            break
        said = _companion_release(source, comp, cv, groups[cv], res)
        if said is None:
            continue
        req, pys, url = said
        pythons[str(cv)] = pys
        pin = pinned_version(req)
        if pin is None:  # a range (torch>=2.14.0): every learned torch it admits (after the exact pins), the newest companion first
            ranged.append((str(cv), req, url))
            continue
        try:
            pv = Version(pin.split("+", 1)[0])
        except InvalidVersion:
            continue
        if pv < oldest:
            break
        if str(pv) in torch_versions and str(pv) not in pairs:
            pairs[str(pv)] = str(cv)
            res.lines.append(f"{comp} {cv} requires {req.name}{req.specifier}: paired with torch {pv} ({public_url(url)})")
    by_range: set[str] = set()
    for cvs, req, url in ranged:
        for t in sorted(torch_versions, key=Version, reverse=True):
            if t not in pairs and req.specifier.contains(t, prereleases=False):
                pairs[t] = cvs
                by_range.add(t)
                res.lines.append(f"{comp} {cvs} requires {req.name}{req.specifier}: paired with torch {t} ({public_url(url)})")
    return pairs, pythons, by_range


def _companion_release(source: Source, comp: str, cv: Version, ws: list[WheelFacts], res: LearnResult) -> tuple[Requirement, set[str], str] | None:
    """(its torch requirement, the Pythons its wheels serve, the wheel read) of one ``comp`` release; None when it says
    nothing of torch (or its metadata could not be read, said in ``res``)."""
    linux = [w for w in ws if any(p.endswith("x86_64") and p.startswith(("manylinux", "linux")) for p in w.platforms)] or ws
    w = _pick(linux)
    meta, _used = source.metadata(IndexFile(w.filename, w.url, w.sha256, w.requires_python, metadata_sha256=w.metadata_sha256))
    if meta is None:
        why = _why(source, w.filename)
        if why:
            res.missing.append(f"{comp} {cv}: core metadata of {w.filename} ({why}); its torch pairing is unknown")
        return None
    req = torch_requirement(meta)
    if req is None:
        return None  # no torch requirement at all: it pairs with nothing it says
    pys = {p for x in ws for p in x.pythons}
    if not pys and meta.requires_python:  # py3-none wheels: Requires-Python decides
        pys = {f"3.{n}{t}" for n in range(8, 20) for t in ("", "t") if _spec_ok(meta.requires_python, f"3.{n}")}
    return req, pys, w.url


def _spec_ok(spec: str, python: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec).contains(python + ".0")
    except InvalidSpecifier:
        return True


@dataclass
class _Release:
    """What is learned of one release while its (label, platform) groups are read: the variants, the Python and
    triton pins, what could not be learned."""

    source: Source
    page: str
    v: Version
    date: str
    download: bool
    res: LearnResult
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    req_python: str | None = None
    triton: tuple[str | None, str | None] = (None, None)
    unknown: list[str] = field(default_factory=list)
    py_by_plat: dict[str, set[str]] = field(default_factory=dict)

    def _name(self, label: str | None, plat: str, rep: WheelFacts, meta: CoreMetadata | None) -> str | None:
        """The variant a group is: its local label, or (label-less) what its runtime pins say; None: not learned."""
        if meta is None:
            why = _why(self.source, rep.filename) or "no core metadata on the index (--download reads the wheel's own)"
            self.unknown.append(f"{rep.filename}: core metadata not read ({why})")
            self.res.missing.append(f"torch {self.v} {label or 'default build'} {plat}: core metadata of {rep.filename} ({why})")
            if label is None:
                return None
        name = label if label else variant_from_requires(meta, plat, rep.pythons[0] if rep.pythons else None) if meta else None
        if label and not re.match(rf"^(cpu|{'|'.join(a.learned_variant for a in kinds.ALL if a.learned_variant)})$", label):
            self.unknown.append(f"{rep.filename}: local label +{label} is not a variant name; not learned")
            return None
        if name is None:
            pinned = next((a.build_label for a in kinds.ALL if a.separate_runtime_wheels), "GPU")  # the runtime a label-less build pins
            self.unknown.append(f"{rep.filename}: which build it is (its runtime pins name no {pinned} runtime)")
        return name

    def group(self, label: str | None, plat: str, members: list[WheelFacts]) -> None:
        """One (label, platform) group of wheels: its representative's metadata, and with ``download`` its GPU code."""
        rep = _pick(members)
        meta, used = self.source.metadata(IndexFile(rep.filename, rep.url, rep.sha256, rep.requires_python, metadata_sha256=rep.metadata_sha256))
        name = self._name(label, plat, rep, meta)
        if name is None:
            return
        if meta is not None:
            self.req_python = self.req_python or meta.requires_python
            if self.triton == (None, None):
                self.triton = triton_pin(meta, plat, rep.pythons[0] if rep.pythons else None)
        pys = {p for m in members for p in m.pythons}
        self.py_by_plat.setdefault(tag_family(plat), set()).update(pys)
        vr = self.variants.setdefault(name, {"name": name, "platforms": [], "pythons": set(), "learned": self.date})
        vr["platforms"].append(plat)
        vr["pythons"] |= pys
        if label is None:
            vr["index"] = "pypi"
        pins = runtime_pins(meta, plat, ranges=True) if meta else {}  # range pins kept as written (issue 43)
        if pins:
            vr.setdefault("runtime", {}).update(pins)
        what = "file names and core metadata"
        if self.download and kinds.gpu_code_kind(name) is not None:
            what += self._gpu_code(vr, name, plat, rep, used)
        vr.setdefault("_sources", []).append(_source_of(used))
        vr.setdefault("_what", set()).add(what)
        vr.setdefault("_by_plat", {})[plat] = f"{_source_of(used)} ({what}; learned {self.date} by stackdoctor matrix learn)"

    def _gpu_code(self, vr: dict[str, Any], name: str, plat: str, rep: WheelFacts, used: IndexFile) -> str:
        """The group's GPU code into its variant row; what was read, for its source (", GPU code read from ...")."""
        code = _gpu_code_of(self.source, used, self.res)
        found = bool(code and (code.get("arch_list") or code.get("gfx")))
        if not found:
            why = (code or {}).get("error") or "no GPU library or GPU code found in it"
            self.res.missing.append(f"torch {self.v} {name} {plat}: GPU code of {used.filename} ({why})")
        if code and not code.get("error") and found:
            _learned_format(code["kind"]).learned_code_into(vr, code, plat)
            return f", GPU code read from {code['library']}"
        if code and code.get("error"):
            self.unknown.append(f"{rep.filename}: GPU code not read ({code['error']})")
        return ""

    def finished_variants(self) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
        out_variants = []
        by_plat: dict[str, dict[str, str]] = {}
        for vr in self.variants.values():
            vr["pythons"] = sorted(vr["pythons"], key=python_key)
            what = "; ".join(sorted(vr.pop("_what"), key=len, reverse=True))
            vr["source"] = "; ".join(vr.pop("_sources")) + f" ({what}; learned {self.date} by stackdoctor matrix learn)"
            by_plat[vr["name"]] = vr.pop("_by_plat")
            kind = kinds.gpu_code_kind(vr["name"])
            if kind is not None and kind.unread_code_fields and not any(f in vr for f in kind.unread_code_fields):
                vr["unknown"] = ["arch list: not read from the binaries (stackdoctor matrix learn --download reads it)"]
            out_variants.append(vr)
        return out_variants, by_plat

    def row(self, ws: list[WheelFacts]) -> dict[str, Any]:
        all_pys = sorted({p for s in self.py_by_plat.values() for p in s}, key=python_key)
        fam_tags: dict[str, str] = {}
        for w in ws:
            for t in w.platforms:
                fam_tags.setdefault(tag_family(t), t)
        python_platforms = {
            p: sorted(fam_tags[f] for f, s in self.py_by_plat.items() if p in s) for p in all_pys if not all(p in s for s in self.py_by_plat.values())
        }
        out_variants, by_plat = self.finished_variants()
        macs = sorted({p for w in ws for p in w.platforms if p.startswith("macosx_") and p.endswith("arm64")})
        row: dict[str, Any] = {
            "version": str(self.v),
            "learned": self.date,
            "source": f"{public_url(self.page)} (file names{', core metadata' if self.req_python else ''}; learned {self.date} by stackdoctor matrix learn)",
            "pythons": all_pys,
        }
        m = re.match(r"^macosx_(\d+)_(\d+)_", macs[0]) if macs else None
        extra = {"requires_python": self.req_python, "python_platforms": python_platforms, "min_macos": f"{m.group(1)}.{m.group(2)}" if m else None,
                 "triton": self.triton[0], "triton_requirement": self.triton[1], "unknown": self.unknown}
        row.update({k: val for k, val in extra.items() if val})
        row["variants"] = out_variants
        row["_by_plat"] = by_plat
        self.res.lines.append(
            f"torch {self.v}: " + ", ".join(f"{x['name']} ({', '.join(x['platforms'])})" for x in out_variants)
            + (f"; Python {all_pys[0]}-{all_pys[-1]}" if all_pys else "")
        )
        return row


def _learn_release(
    source: Source, page: str, v: Version, ws: list[WheelFacts], date: str, download: bool, res: LearnResult
) -> dict[str, Any] | None:
    groups: dict[tuple[str | None, str], list[WheelFacts]] = {}
    for w in ws:
        for p in w.platforms:
            groups.setdefault((w.label, p), []).append(w)
    rel = _Release(source, page, v, date, download, res)
    for (label, plat), members in sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        rel.group(label, plat, members)
    if not rel.variants:
        unknown = rel.unknown
        res.errors.append(f"torch {v}: no build could be learned from {page}" + (f" ({unknown[0]})" if unknown else ""))
        res.missing.append(f"torch {v}: no build learned" + (f" ({'; '.join(unknown[:3])})" if unknown else ""))
        return None
    return rel.row(ws)


# ---------------------------------------------------------------------------- the layer file


def read_layer(path: Path) -> dict[str, Any]:
    """The layer document at ``path`` (``{}`` when absent); validated as a matrix file."""
    import yaml

    from stackdoctor.matrix import parse_matrix_text
    from stackdoctor.matrix.load import read_user_file

    if not os.path.lexists(path):
        return {}
    text = read_user_file(path)  # bounded; a FIFO or /dev/zero is one sentence, never a hang (issue 44)
    parse_matrix_text(text, str(path))
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise MatrixError(f"compat matrix {path} line 1: not a mapping.")
    return data


def write_layer(path: Path, doc: dict[str, Any], result: LearnResult) -> dict[str, Any]:
    """Merge ``result`` into the layer ``doc`` and write it atomically (validated first)."""
    import yaml

    from stackdoctor.matrix import parse_matrix_text

    rows = {str(r["version"]): r for r in doc.get("releases") or []}
    for r in result.rows:
        rows[r["version"]] = r
    defaults = {(d["torch"], d["platform"]): d for d in doc.get("pypi_default") or []}
    for d in result.pypi_default:
        defaults[(d["torch"], d["platform"])] = d
    out: dict[str, Any] = {"schema": "stackdoctor.matrix/1"}
    out["releases"] = [rows[k] for k in sorted(rows, key=Version, reverse=True)]
    if defaults:
        out["pypi_default"] = [defaults[k] for k in sorted(defaults, key=lambda k: (Version(k[0]), k[1]), reverse=True)]
    text = LAYER_HEADER + yaml.safe_dump(out, sort_keys=False, width=1000, allow_unicode=True)
    parse_matrix_text(text, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return out


# ---------------------------------------------------------------------------- run time: the index as a witness


def witness_matrix(
    matrix: Any, sources: Iterable[Source], *, newer_only: bool = True, versions: Sequence[str] = (), artifacts: Sequence[str] = ()
) -> tuple[Any, list[str]]:
    """``matrix`` plus the torch releases ``sources`` serve that it lacks (names and metadata only, nothing
    downloaded), and one note per release learned. A learned CUDA / ROCm build without a read arch list gets the
    list of the nearest known build of the same CUDA / ROCm version, marked inferred in its ``derived_from``
    (the resolver's reasons carry it). Index failures leave the matrix as it is (a note says so, starting
    ``index witness:``). ``versions``: only those (``newer_only`` does not apply to them). A source whose
    ``serves_index`` is false (a find-links page or folder) is no index: its builds keep their variant's index.
    ``artifacts``: releases the matrix knows but whose build for the target a source serves and the matrix lacks
    (a missing (release, variant, platform)): learned too, and merged into the known row variant by variant."""
    from stackdoctor.matrix import build, parse_matrix_text

    notes: list[str] = []
    newest = matrix.releases[0].version if matrix.releases else Version("0")
    known = {str(r.version) for r in matrix.releases} | {str(p.version) for r in matrix.releases for p in r.patches}
    rows: list[dict[str, Any]] = []
    only = {Version(v) for v in versions}
    also = {Version(v) for v in artifacts}

    def wanted(v: Version) -> bool:
        return (str(v) not in known and (v in only if only else (not newer_only or v > newest))) or v in also

    for src in sources:
        try:
            _page, files = src.files("torch")
            vs = {w.version for f in files if (w := wheel_facts(f)) is not None and w.project == "torch" and _version_ok(w.version, Version("2.0"))}
            new = sorted(v for v in vs if wanted(v))
            res = learn(src, versions=[str(v) for v in new], companions=True) if new else None
        except IndexError_ as exc:
            notes.append(f"index witness: {exc}")
            continue
        for row in res.rows if res is not None else []:
            rows.append(_witnessed(matrix, src, row, known, notes))
            known.add(row["version"])
    if not rows:
        return matrix, notes
    import yaml

    text = yaml.safe_dump({"schema": "stackdoctor.matrix/1", "releases": rows}, sort_keys=False)
    parsed = parse_matrix_text(text, "index witness")
    base = [(f, _parsed_of(matrix)) for f in ("matrix",)]
    return build([*base, ("index witness", parsed)]), notes


def _witnessed(matrix: Any, src: Source, row: dict[str, Any], known: set[str], notes: list[str]) -> dict[str, Any]:
    """A row learned at run time: GPU code inferred where it was not read, the source's index on each build, a note."""
    for vr in row["variants"]:
        _infer_gpu_code(matrix, row["version"], vr)
        if vr.get("index") != "pypi" and getattr(src, "serves_index", True):
            vr["index"] = getattr(src, "index_url", None) or src.name
    if row["version"] in known:  # a build of a known release: say which builds were learned
        builds = ", ".join(f"{vr['name']} ({', '.join(vr['platforms'])})" for vr in row["variants"])
        notes.append(f"torch {row['version']} {builds}: a build the matrix lacks; learned from {public_url(src.name)} (its file names and core metadata)")
    else:
        notes.append(f"torch {row['version']}: not in the matrix; learned from {public_url(src.name)} (its file names and core metadata)")
    return row


def _parsed_of(matrix: Any) -> Any:
    """A :class:`Matrix` as a parsed layer (so :func:`_build` can layer witness rows over it): every declared table's rows."""
    from stackdoctor.matrix import TABLES, Parsed

    return Parsed({t.key: t.rows(matrix.table(t.key)) for t in TABLES}, layered=True)


def _infer_gpu_code(matrix: Any, version: str, vr: dict[str, Any]) -> None:
    name = vr["name"]
    kind = kinds.gpu_code_kind(name)
    if kind is None or kind.gpu_code is None or vr.get("arch_list") or vr.get("gfx"):
        return
    for r in matrix.releases:  # newest first: the nearest older release with that build
        known = r.variant(name)
        if known is None or not (known.arch_list or known.gfx):
            continue
        kind.learned_code_from(vr, known)
        vr["derived_from"] = (f"inferred: GPU code of torch {r.version} {name} (the nearest known build of the same {kind.build_label} version); "
                              "read from the installed binaries after installing")
        vr["unknown"] = [u for u in vr.get("unknown", []) if "arch list" not in u]
        return
