"""The target's torch family, read and kept aside in the target itself (the ``sd_snapshot.py`` / ``sd_backup.py``
workers): the snapshot of its installed packages, the backup of the family's files (hard links), putting them back,
the family's state judged from its files, and pip's own stash of an uninstall it did not finish."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor._worker import worker_path
from stackdoctor.wheels.leftovers import TORCH_FAMILY

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System


SNAP_MARK = "@@stackdoctor-snapshot@@ "


BACKUP_MARK = "@@stackdoctor-backup@@ "


BACKUP_COPY_CAP = 2 * 1024**3  # bytes copied (not linked) into a backup, past which a distribution is left out


@dataclass
class Snapshot:
    """Installed distributions of the target: canonical name -> (version, requirement names)."""

    versions: dict[str, str] = field(default_factory=dict)
    requires: dict[str, list[str]] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)  # half-installed (no RECORD) or installed twice
    error: str | None = None
    prefix: str | None = None  # the target's sys.prefix

    @property
    def ok(self) -> bool:
        return self.error is None

    def torch_family(self) -> dict[str, str]:
        return {n: self.versions[n] for n in TORCH_FAMILY if n in self.versions}

    def family_damaged(self) -> list[str]:
        return [n for n in self.damaged if n in TORCH_FAMILY]

    def pins(self, names: Iterable[str]) -> list[str]:
        return [f"{n}=={self.versions[n]}" for n in names if n in self.versions]


@dataclass
class Backup:
    """The torch family's installed files, hard-linked (or copied) aside before an install (``sd_backup.py save``)."""

    dir: str
    saved: dict[str, str] = field(default_factory=dict)  # name -> version backed up (every RECORD file there)
    missing: dict[str, int] = field(default_factory=dict)  # name -> RECORD files already gone before (backed up as it is)
    linked: int = 0
    copied: int = 0
    linked_bytes: int = 0
    copied_bytes: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class BackupRestore:
    """What ``sd_backup.py restore`` put back."""

    restored: dict[str, str] = field(default_factory=dict)  # name -> version, every file back and its hash checked
    removed: list[str] = field(default_factory=list)  # what was installed for those names before
    mismatch: list[str] = field(default_factory=list)  # RECORD paths whose sha256 differs from the RECORD
    missing: list[str] = field(default_factory=list)  # RECORD paths that could not be put back
    linked: int = 0
    copied: int = 0
    seconds: float = 0.0
    error: str | None = None


def marked(stdout: str, mark: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        idx = line.find(mark)
        if idx >= 0:
            try:
                data = json.loads(line[idx + len(mark) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def snapshot(system: System, python: str, *, timeout: float = 60.0) -> Snapshot:
    res = system.run([python, "-I", str(worker_path("sd_snapshot.py"))], timeout=timeout, record=False)
    data = marked(res.stdout, SNAP_MARK) if res.ok else None
    if data is None:
        return Snapshot(error=res.describe_failure() or "the target printed no package list")
    damaged = data.pop("@damaged", [])
    prefix = data.pop("@prefix", None)
    snap = Snapshot(damaged=[d for d in damaged if isinstance(d, str)] if isinstance(damaged, list) else [])
    snap.prefix = prefix if isinstance(prefix, str) else None
    for name, info in data.items():
        if isinstance(info, dict) and isinstance(info.get("version"), str):
            snap.versions[name] = info["version"]
            snap.requires[name] = [r for r in info.get("requires") or [] if isinstance(r, str)]
    return snap


def str_dict(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def str_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def save_backup(
    system: System, python: str, names: Sequence[str], directory: str, *, copy_cap: int = BACKUP_COPY_CAP, timeout: float = 600.0
) -> Backup:
    """Back up the installed files of ``names`` into ``directory`` (in the target: ``sd_backup.py save``):
    every RECORD entry, or ``error`` says why not (then nothing may change)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "save", directory, json.dumps(list(names)), str(int(copy_cap))]
    res = system.run(argv, timeout=timeout, record=False, die_with_parent=True)
    data = marked(res.stdout, BACKUP_MARK)
    b = Backup(directory, seconds=time.monotonic() - start)
    if data is None:
        b.error = res.describe_failure() or "the backup worker printed nothing"
        return b
    b.error = data.get("error") if isinstance(data.get("error"), str) else None
    b.saved = str_dict(data.get("saved"))
    b.missing = {k: _int(v) for k, v in data.get("missing", {}).items()} if isinstance(data.get("missing"), dict) else {}
    b.linked, b.copied = _int(data.get("linked")), _int(data.get("copied"))
    b.linked_bytes, b.copied_bytes = _int(data.get("linked_bytes")), _int(data.get("copied_bytes"))
    return b


def restore_backup(
    system: System, python: str, directory: str, names: Sequence[str], planned: Mapping[str, str] | None = None, *, timeout: float = 900.0
) -> BackupRestore:
    """Remove everything of the family and put the backed-up files back (``sd_backup.py restore``)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "restore", directory, json.dumps(list(names)), json.dumps(dict(planned or {}))]
    res = system.run(argv, timeout=timeout, record=False, die_with_parent=True)
    data = marked(res.stdout, BACKUP_MARK)
    r = BackupRestore(seconds=time.monotonic() - start)
    if data is None:
        r.error = res.describe_failure() or "the backup worker printed nothing"
        return r
    r.error = data.get("error") if isinstance(data.get("error"), str) else None
    r.restored = str_dict(data.get("restored"))
    r.removed = str_list(data.get("removed"))
    r.mismatch = str_list(data.get("mismatch"))
    r.missing = str_list(data.get("missing"))
    r.linked, r.copied = _int(data.get("linked")), _int(data.get("copied"))
    return r


@dataclass
class FamilyState:
    """What the torch family on disk is, compared with the journal's backup and plan (``sd_backup.py state``)."""

    state: str  # "old" | "new" | "mixed" | "unknown"
    why: str = ""
    stash: list[str] = field(default_factory=list)  # pip's stash folders of the family (``~orch``)
    now: dict[str, str] = field(default_factory=dict)


def family_state(system: System, python: str, directory: str, planned: Mapping[str, str], *, timeout: float = 600.0) -> FamilyState:
    argv = [python, "-I", str(worker_path("sd_backup.py")), "state", directory, json.dumps(list(TORCH_FAMILY)), json.dumps(dict(planned))]
    res = system.run(argv, timeout=timeout, record=False)
    data = marked(res.stdout, BACKUP_MARK)
    if data is None or isinstance(data.get("error"), str):
        why = (data or {}).get("error") or res.describe_failure() or "the backup worker printed nothing"
        return FamilyState("unknown", str(why))
    st = str(data.get("state") or "unknown")
    return FamilyState(st if st in ("old", "new", "mixed") else "unknown", str(data.get("why") or ""), str_list(data.get("stash")), str_dict(data.get("now")))


def _record_hash(path: str) -> str:
    import base64
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def _saved_files(backup: str) -> tuple[set[tuple[int, int]], dict[int, set[str]]]:
    """The backup's files: their (device, inode) and, by size, their RECORD hashes (``manifest.json``)."""
    try:
        with open(os.path.join(backup, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return set(), {}
    inodes: set[tuple[int, int]] = set()
    by_size: dict[int, set[str]] = {}
    for entry in manifest.get("dists") or [] if isinstance(manifest, dict) else []:
        for rec in entry.get("files") or []:
            ino = rec.get("ino")
            if isinstance(ino, list) and len(ino) == 2 and all(isinstance(x, int) for x in ino):
                inodes.add((ino[0], ino[1]))
            if isinstance(rec.get("size"), int) and isinstance(rec.get("hash"), str) and rec["hash"]:
                by_size.setdefault(rec["size"], set()).add(rec["hash"])
    return inodes, by_size


def _all_saved(folder: str, inodes: set[tuple[int, int]], by_size: dict[int, set[str]]) -> bool:
    """Every file under ``folder`` (at least one) is one of the saved ones: the same inode (pip renamed it there),
    or the same size and sha256 (pip copied it to another filesystem)."""
    count = 0
    for dp, _dn, fn in os.walk(folder):
        for name in fn:
            p = os.path.join(dp, name)
            try:
                st = os.lstat(p)
                same = (st.st_dev, st.st_ino) in inodes or _record_hash(p) in by_size.get(st.st_size, set())
            except OSError:
                return False
            if not same:
                return False
            count += 1
    return count > 0


def sweep_pip_stash(backup: str, tmpdir: str | None = None) -> list[str]:
    """pip's stash of an uninstall it did not finish (``$TMPDIR/pip-uninstall-*``: the console scripts and other files
    outside the package folders it moves aside) is removed when every file in it is one of the previous torch's files
    that the backup holds, decided from the files: the torch that stays has its own copies (the backup's, put back,
    or the new build's). Anything else there is pip's business and is left alone."""
    import glob
    import tempfile

    inodes, by_size = _saved_files(backup)
    if not inodes and not by_size:
        return []
    removed = []
    for d in glob.glob(os.path.join(tmpdir or tempfile.gettempdir(), "pip-uninstall-*")):
        if os.path.isdir(d) and not os.path.islink(d) and _all_saved(d, inodes, by_size):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed
