"""stackdoctor backup worker: keeps the installed files of the torch family aside before an install, judges
what the family on disk is afterwards, and puts the old files back exactly (offline). Run in the install target
(stdlib only, Python 3.8 syntax); it never raises: every failure is reported in its one marked JSON line.

``save DIR NAMES_JSON [COPY_CAP_BYTES]``: for each installed distribution in NAMES, hard-link every file its
RECORD lists into ``DIR/files``, and write ``DIR/manifest.json`` (fsync'd, renamed into place: name, version, site
dir, dist-info, and for each file its RECORD path, which may start with ``..`` for scripts, its hash, its size, its
name in the backup). The backup is complete or it is not made: a name installed twice, a dist-info without RECORD,
a link or copy that fails (no space, no inodes) or a copy past the cap gives ``error`` and removes what was saved.
A file the RECORD lists that is already gone is noted in ``missing`` (the torch is backed up as it is).
The files lie flat (``<name>-<n>``): torch 2.13.0+cpu has 14 622 files in 1 169 folders, and creating those
folders took 1.0-1.3 s of a 1.5 s save here, linking flat 0.35 s. Where a hard link is refused (another
filesystem, EPERM) the file is copied, while the copied bytes stay under the cap (default 2 GiB).

``state DIR NAMES_JSON PLANNED_JSON``: what the family on disk is now, decided from the files: ``old`` (exactly the
saved files: same inode, or same sha256 for a copy, and nothing else of the family), ``new`` (exactly the planned
versions, every RECORD hash checked, the unplanned names untouched), ``mixed`` otherwise; and pip's stash folders
(``~orch``) of the family.

``restore DIR [NAMES_JSON]``: removes what is installed now for NAMES (default: the manifest's names) and
everything else of the family (their RECORD files, dist-info folders, half-written ``torch-*.dist-info`` folders,
the family's top-level folders that no other distribution owns, pip's stash folders); then links (or copies) the
saved files back and checks each one's sha256 against its RECORD hash (empty hashes, as for RECORD itself and
.pyc files, are skipped).

``check NAMES_JSON``: which of NAMES are not complete per their RECORD (a file missing or changed, installed twice).

``STACKDOCTOR_TEST_HOOK_DIR`` (tests only): halfway through a save or a restore, create ``<dir>/backup-mid`` or
``<dir>/restore-mid`` and wait (at most 60 s) for ``<name>.go``, so a test can interrupt at that instant.
"""
import base64
import csv
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import time
from importlib import metadata

MARK = "@@stackdoctor-backup@@ "
DEFAULT_CAP = 2 * 1024 ** 3
LEADING = "-~.=%0123456789"  # pip's AdjacentTempDirectory.LEADING_CHARS: a stash is "~" + some of these + a suffix of the name


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def hook(point):
    d = os.environ.get("STACKDOCTOR_TEST_HOOK_DIR")
    if not d:
        return
    try:
        open(os.path.join(d, point), "w").close()
    except OSError:
        return
    end = time.monotonic() + 60
    while time.monotonic() < end and not os.path.exists(os.path.join(d, point + ".go")):
        time.sleep(0.005)


def dist_path(d):
    path = getattr(d, "_path", None)
    return str(path) if path is not None else None


def installed(names):
    """canonical name -> list of distributions of that name (a name installed twice is listed twice)."""
    out = {}
    for d in metadata.distributions():
        try:
            n = norm(d.metadata["Name"] or "")
        except Exception:
            continue
        if n in names:
            out.setdefault(n, []).append(d)
    return out


def record_rows(d):
    try:
        text = d.read_text("RECORD")
    except Exception:
        text = None
    if text is None:
        return None
    rows = []
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        size = row[2] if len(row) > 2 else ""
        rows.append((row[0], row[1] if len(row) > 1 else "", int(size) if size.isdigit() else None))
    return rows


def site_of(d):
    try:
        return os.path.abspath(str(d.locate_file("")))
    except Exception:
        path = dist_path(d)
        return os.path.dirname(path) if path else None


def site_dirs():
    import site as _site

    out = []
    for p in sys.path:
        if p and os.path.isdir(p) and p not in out and (p.endswith("site-packages") or p.endswith("dist-packages")):
            out.append(os.path.abspath(p))
    try:
        for p in _site.getsitepackages():
            if os.path.isdir(p) and os.path.abspath(p) not in out:
                out.append(os.path.abspath(p))
    except Exception:
        pass
    return out


def target_path(site, rel):
    return os.path.normpath(rel if os.path.isabs(rel) else os.path.join(site, rel))


def top_level(rel):
    """The site-packages entry a RECORD path lives in ("torch" for torch/lib/x.so), None for ../bin paths."""
    parts = rel.replace("\\", "/").split("/")
    return None if parts[0] in ("..", "") or os.path.isabs(rel) else parts[0]


def sha256_b64(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


_HASHED = {}


def hash_once(path):
    """sha256_b64, read once per worker run: judging "exactly the old files?" then "exactly the new build?" (a
    reinstall of the same build: same paths, same sizes) would otherwise read every file twice. Keyed by the file's
    identity and its change times, so a file that changed in between is read again."""
    st = os.stat(path)
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _HASHED:
        _HASHED[key] = sha256_b64(path)
    return _HASHED[key]


def fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path))


def place(src, dst, size, state, cap):
    """Link src at dst, else copy it while state['copied_bytes'] stays within cap. Returns 'link', 'copy' or an error."""
    parent = os.path.dirname(dst)
    if parent not in state["dirs"]:
        os.makedirs(parent, exist_ok=True)
        state["dirs"].add(parent)
    try:
        os.link(src, dst)
        return "link"
    except OSError as e:
        link_error = e
        if e.errno in (28, 122):  # ENOSPC (no inodes / no space for the entry), EDQUOT: a copy would fail too
            return "%s (%s)" % (os.strerror(e.errno), dst)
    if cap is not None and state["copied_bytes"] + size > cap:
        return "over the copy cap of %d bytes (a hard link was refused: %s)" % (cap, link_error)
    shutil.copy2(src, dst)
    state["copied_bytes"] += size
    return "copy"


def dist_info_name(entry):
    """canonical name of a ``<name>-<version>.dist-info`` folder name (also a half-written one), else None."""
    if not entry.endswith(".dist-info"):
        return None
    return norm(entry[: -len(".dist-info")].split("-", 1)[0])


def half_written(names):
    """Why the family cannot be saved as it is: a half-written dist-info (no METADATA, so no name for
    importlib.metadata) is damage too; None when there is none."""
    for site in site_dirs():
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        for e in entries:
            n = dist_info_name(e)
            if n in names and not os.path.isfile(os.path.join(site, e, "METADATA")):
                return "%s has a half-written %s in %s (no METADATA)" % (n, e, site)
    return None


def save_file(rel, digest, size, site, entry, ctx):
    """One RECORD file of a distribution linked (or copied) into the backup: "link" | "copy" | None (nothing to
    save), or raises ValueError with why it could not be saved."""
    ctx["done"] += 1
    if ctx["done"] == ctx["total"] // 2:
        hook("backup-mid")
    top = top_level(rel)
    if top and top not in ctx["manifest"]["tops"]:
        ctx["manifest"]["tops"].append(top)
    src = target_path(site, rel)
    try:
        st = os.lstat(src)
        nbytes = st.st_size if stat.S_ISREG(st.st_mode) else -1
    except OSError:
        nbytes = -1
    if nbytes < 0:
        if digest:  # a hashed file that is already gone: backed up as it is, noted
            entry["missing"].append(rel)
        return None, 0  # e.g. a .pyc listed without hash that was never written
    store = "%s-%d" % (entry["name"], len(entry["files"]))
    try:
        how = place(src, os.path.join(ctx["files_root"], store), nbytes, ctx["state"], ctx["cap"])
    except OSError as e:
        how = "%s: %s" % (rel, e)
    if how not in ("link", "copy"):
        raise ValueError("%s could not be saved: %s" % (rel, how))
    entry["files"].append({"path": rel, "stored": store, "hash": digest, "size": size, "ino": [st.st_dev, st.st_ino]})
    return how, nbytes


def save_dist(name, dists, ctx, out):
    """Every RECORD file of one distribution into the backup, its entry in the manifest; an error string or None."""
    if len(dists) > 1:
        return "%s is installed twice (%s)" % (name, ", ".join(sorted(str(dist_path(d)) for d in dists)))
    d = dists[0]
    rows = record_rows(d)
    site = site_of(d)
    if rows is None or site is None:
        return "%s %s has no RECORD, so its files are not known (%s)" % (name, d.version, dist_path(d))
    entry = {"name": name, "version": d.version, "site": site, "dist_info": dist_path(d), "files": [], "missing": []}
    counts = {"link": 0, "copy": 0, "link_bytes": 0, "copy_bytes": 0}
    for rel, digest, size in rows:
        try:
            how, nbytes = save_file(rel, digest, size, site, entry, ctx)
        except ValueError as e:
            return str(e)
        if how is not None:
            counts[how] += 1
            counts[how + "_bytes"] += nbytes
    ctx["manifest"]["dists"].append(entry)
    out["saved"][name] = d.version
    if entry["missing"]:
        out["missing"][name] = len(entry["missing"])
    out["bytes"][name] = counts["link_bytes"] + counts["copy_bytes"]
    out["linked"] += counts["link"]
    out["copied"] += counts["copy"]
    out["linked_bytes"] += counts["link_bytes"]
    out["copied_bytes"] += counts["copy_bytes"]
    return None


def save(root, names, cap):
    out = {"mode": "save", "dir": root, "saved": {}, "bytes": {}, "missing": {}, "linked": 0, "copied": 0,
           "linked_bytes": 0, "copied_bytes": 0, "errors": [], "error": None}
    manifest = {"names": sorted(names), "dists": [], "tops": []}
    files_root = os.path.join(root, "files")
    os.makedirs(files_root, exist_ok=True)
    found = installed(names)
    out["error"] = half_written(names)
    if out["error"]:
        return out
    total = sum(len(record_rows(d) or []) for ds in found.values() for d in ds)
    ctx = {"manifest": manifest, "files_root": files_root, "state": {"copied_bytes": 0, "dirs": set()}, "cap": cap, "done": 0, "total": total}
    for name in sorted(names):
        if found.get(name):
            out["error"] = save_dist(name, found[name], ctx, out)
            if out["error"]:
                return out
    fsync_dir(files_root)
    # dumps uses the C encoder; dump to a file does not (0.5 s for torch's 14 000 files)
    write_atomic(os.path.join(root, "manifest.json"), json.dumps(manifest))
    return out


def load_manifest(root):
    with open(os.path.join(root, "manifest.json")) as f:
        return json.load(f)


def is_stash(entry, tops):
    """pip's stash of a top-level entry (AdjacentTempDirectory: "~" + leading chars + a suffix of the name)."""
    if not entry.startswith("~"):
        return False
    for t in tops:
        if len(entry) < len(t) and not entry[1:]:
            continue
        for j in range(1, len(entry)):
            rest = entry[j:]
            if rest and t.endswith(rest) and all(c in LEADING for c in entry[1:j]) and len(entry) >= len(t):
                return True
            if entry[j] not in LEADING:
                break
    return False


def family_layout(names, manifest, planned):
    """(site dirs, the family's top-level names, the top-level names other distributions own)."""
    tops = set(manifest.get("tops") or []) | set(names)
    for e in manifest.get("dists") or []:
        if e.get("dist_info"):
            tops.add(os.path.basename(e["dist_info"]))
    for n, v in (planned or {}).items():
        tops.add("%s-%s.dist-info" % (n, v))
    others = set()
    for d in metadata.distributions():
        try:
            n = norm(d.metadata["Name"] or "")
        except Exception:
            continue
        rows = record_rows(d) or []
        mine = n in names
        for rel, _h, _s in rows:
            t = top_level(rel)
            if t:
                (tops if mine else others).add(t)
        if mine:
            p = dist_path(d)
            if p:
                tops.add(os.path.basename(p))
    return site_dirs(), tops, others


def stash_entries(sites, tops):
    out = []
    for s in sites:
        try:
            for e in os.listdir(s):
                if is_stash(e, tops):
                    out.append(os.path.join(s, e))
        except OSError:
            pass
    return sorted(out)


def same_as_saved(entry, files_root):
    """Every saved file of this dist is at its place, unchanged (same inode as its backup link, or same hash)."""
    for f in entry["files"]:
        p = target_path(entry["site"], f["path"])
        try:
            st = os.lstat(p)
            bk = os.stat(os.path.join(files_root, f["stored"]))
        except OSError:
            return "%s is missing" % f["path"]
        if (st.st_dev, st.st_ino) == (bk.st_dev, bk.st_ino):
            continue
        if st.st_size != bk.st_size or (f["hash"] and hash_once(p) != f["hash"]):
            return "%s differs" % f["path"]
    for rel in entry.get("missing") or []:
        if os.path.lexists(target_path(entry["site"], rel)):
            return "%s is back" % rel
    return None


def sized(d):
    """None when every RECORD file of d that has a size is there with that size (a stat each, no read), else why not."""
    rows = record_rows(d)
    site = site_of(d)
    if rows is None or site is None:
        return "no RECORD"
    for rel, _digest, size in rows:
        if size is None:
            continue
        try:
            if os.path.getsize(target_path(site, rel)) != size:
                return "%s differs from its RECORD (size)" % rel
        except OSError:
            return "%s is missing" % rel
    return None


def complete(d):
    """None when every hashed RECORD file of d is there with its hash, else why not (the first such file in RECORD
    order). The files are hashed by a few threads at once (hashlib lets go of the GIL while it hashes): torch's
    ~760 MB is the longest wait after pip."""
    rows = record_rows(d)
    site = site_of(d)
    if rows is None or site is None:
        return "no RECORD"
    todo = [(rel, digest, target_path(site, rel)) for rel, digest, _size in rows if digest]

    def why_not(item):
        rel, digest, p = item
        try:
            return None if hash_once(p) == digest else "%s differs from its RECORD" % rel
        except OSError:
            return "%s is missing" % rel

    workers = min(HASH_THREADS, os.cpu_count() or 1)
    if workers < 2 or len(todo) < 64:
        return next((w for w in map(why_not, todo) if w), None)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return next((w for w in pool.map(why_not, todo) if w), None)


HASH_THREADS = 4


def family_dist_infos(sites, names):
    out = []
    for s in sites:
        try:
            for e in os.listdir(s):
                if dist_info_name(e) in names:
                    out.append(os.path.join(s, e))
        except OSError:
            pass
    return sorted(out)


def odd_dist_infos(infos, found):
    """Why the family's dist-info folders and its distributions do not pair up, naming the odd ones: a half-written
    folder (no METADATA), or a distribution whose dist-info is not in its place (pip's stash ``~orch-...``)."""
    listed = set(os.path.abspath(p) for p in infos)
    seen = set()
    for ds in found.values():
        for d in ds:
            p = dist_path(d)
            if p is not None:
                seen.add(os.path.abspath(str(p)))
    half = sorted(os.path.basename(p) for p in listed - seen)
    moved = sorted(os.path.basename(p) for p in seen - listed)
    parts = []
    if half:
        parts.append("a half-written dist-info: %s" % ", ".join(half))
    if moved:
        parts.append("a dist-info out of its place: %s" % ", ".join(moved))
    return "; ".join(parts) or "%d dist-info folders for %d installed distributions" % (len(infos), sum(len(v) for v in found.values()))


def why_not_old_dist(n, ds, e, now, files_root):
    """Why distribution ``n`` on disk (``ds``) is not exactly its saved files (``e``, None: it was not there)."""
    if e is None:
        return "%s %s was not there before" % (n, ds[0].version) if ds else None
    if len(ds) != 1 or ds[0].version != e["version"] or os.path.abspath(str(dist_path(ds[0]))) != os.path.abspath(str(e["dist_info"])):
        return "%s is now %s" % (n, now.get(n, "gone"))
    return same_as_saved(e, files_root)


def why_not_old(names, found, infos, saved, manifest, sites, now, files_root):
    """None when the family on disk is exactly the saved files, else why not."""
    if len(infos) != sum(len(v) for v in found.values()):
        return odd_dist_infos(infos, found)
    for n in names:
        why = why_not_old_dist(n, found.get(n, []), saved.get(n), now, files_root)
        if why:
            return why
    if not manifest["dists"]:
        left = [t for t in names if any(os.path.lexists(os.path.join(s, t)) for s in sites)]
        if left:
            return "%s folder is there" % left[0]
    return None


def why_not_new_dist(n, ds, planned, saved, now, files_root):
    """Why distribution ``n`` on disk is not what the planned build leaves: the planned version, complete per its
    RECORD; an unplanned one of the family untouched; none that was not there."""
    if n in planned:
        if len(ds) != 1 or ds[0].version != planned[n]:
            return "%s is %s, not %s" % (n, now.get(n, "missing"), planned[n])
        why = complete(ds[0])
        return "%s %s: %s" % (n, planned[n], why) if why else None
    if n in saved:
        e = saved[n]
        return (None if len(ds) == 1 and ds[0].version == e["version"] else "%s changed" % n) or same_as_saved(e, files_root)
    return "%s %s appeared" % (n, ds[0].version) if ds else None


def judge_state(root, names, planned):
    """old | new | mixed, with why, and the stash folders, from the files on disk."""
    manifest = load_manifest(root) if os.path.exists(os.path.join(root, "manifest.json")) else {"dists": [], "tops": []}
    names = set(names) | set(manifest.get("names") or []) | set(planned)
    files_root = os.path.join(root, "files")
    sites, tops, _others = family_layout(names, manifest, planned)
    stash = stash_entries(sites, tops)
    found = installed(names)
    infos = family_dist_infos(sites, names)
    saved = {e["name"]: e for e in manifest["dists"]}
    out = {"mode": "state", "state": "mixed", "why": "", "stash": stash, "now": {}}
    for n, ds in found.items():
        out["now"][n] = ds[0].version if len(ds) == 1 else "twice"
    why_old = why_not_old(names, found, infos, saved, manifest, sites, out["now"], files_root)
    if why_old is None:
        out["state"], out["why"] = "old", ""
        return out
    # exactly the planned build (the unplanned names untouched)?
    why_new = why_old if len(infos) != sum(len(v) for v in found.values()) else None
    for n in sorted(names):
        if why_new:
            break
        why_new = why_not_new_dist(n, found.get(n, []), planned, saved, out["now"], files_root)
    if why_new is None:
        out["state"] = "new"
        return out
    out["why"] = why_old if why_old and why_new == why_old else "%s; %s" % (why_old, why_new)
    return out


def remove_tree(path, out):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    except OSError as e:
        out["errors"].append("removing %s: %s" % (path, e))


def remove_records(names, out):
    """Every RECORD file and dist-info folder of the family's installed distributions; the folders the files were
    in (with their site directory), to prune."""
    dirs = set()
    for name, dists in installed(names).items():
        for d in dists:
            path = dist_path(d)
            rows = record_rows(d)
            site = site_of(d)
            for rel, _digest, _size in (rows if site is not None else None) or []:
                p = target_path(site, rel)
                try:
                    if os.path.isfile(p) or os.path.islink(p):
                        os.unlink(p)
                        dirs.add((os.path.dirname(p), site))
                except OSError as e:
                    out["errors"].append("removing %s: %s" % (p, e))
            if path and path.endswith(".dist-info") and os.path.isdir(path):
                remove_tree(path, out)
                out["removed"].append(name + " " + (d.version or "?") + ("" if rows is not None else " (no RECORD)"))
    return dirs


def prune(dirs):
    """The package folders the removal emptied, inside the site directory only: never the site directory itself
    or anything above it."""
    for d, site in sorted(dirs, key=lambda pair: len(pair[0]), reverse=True):
        while d and os.path.isdir(d) and d != site and d.startswith(site.rstrip(os.sep) + os.sep):
            pycache = os.path.join(d, "__pycache__")
            try:
                if os.path.isdir(pycache) and not any(n.endswith(".py") for n in os.listdir(d)):
                    shutil.rmtree(pycache, ignore_errors=True)
                os.rmdir(d)  # only if empty
            except OSError:
                break
            d = os.path.dirname(d)


def remove_installed(names, manifest, planned, out):
    """Remove everything of the family: RECORD files, dist-info dirs (half-written ones too), the family's
    top-level folders no other distribution owns, pip's stash folders."""
    sites, tops, others = family_layout(names, manifest, planned)
    dirs = remove_records(names, out)
    for p in family_dist_infos(sites, names):
        remove_tree(p, out)
    for p in stash_entries(sites, tops):
        remove_tree(p, out)
        out["stash_removed"].append(os.path.basename(p))
    for s in sites:
        for t in tops:
            p = os.path.join(s, t)
            if t not in others and not t.endswith(".dist-info") and "/" not in t and os.path.isdir(p) and not os.path.islink(p):
                remove_tree(p, out)
    prune(dirs)


def restore(root, names, planned):
    out = {"mode": "restore", "dir": root, "restored": {}, "removed": [], "stash_removed": [], "mismatch": [], "missing": [],
           "linked": 0, "copied": 0, "errors": []}
    manifest = load_manifest(root)  # no manifest, no clearing: a wrong folder must not cost the family
    names = set(names or manifest.get("names") or [])
    names.update(d["name"] for d in manifest["dists"])
    names.update(planned)
    remove_installed(names, manifest, planned, out)
    files_root = os.path.join(root, "files")
    state = {"copied_bytes": 0, "dirs": set()}
    total = sum(len(e["files"]) for e in manifest["dists"])
    done = 0
    for entry in manifest["dists"]:
        bad = False
        for f in entry["files"]:
            done += 1
            if done == total // 2:
                hook("restore-mid")
            src = os.path.join(files_root, f["stored"])
            dst = target_path(entry["site"], f["path"])
            try:
                if os.path.lexists(dst):
                    os.unlink(dst)
                how = place(src, dst, 0, state, None)
                if how not in ("link", "copy"):
                    raise OSError(how)
                out["linked" if how == "link" else "copied"] += 1
                if f["hash"] and sha256_b64(dst) != f["hash"]:
                    out["mismatch"].append(f["path"])
                    bad = True
            except OSError as e:
                out["missing"].append("%s: %s" % (f["path"], e))
                bad = True
        if not bad:
            out["restored"][entry["name"]] = entry["version"]
    for s in set(e["site"] for e in manifest["dists"]):
        fsync_dir(s)
    return out


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    try:
        if mode == "save" and len(argv) >= 4:
            cap = int(argv[4]) if len(argv) > 4 else DEFAULT_CAP
            return save(os.path.abspath(argv[2]), set(norm(n) for n in json.loads(argv[3])), cap)
        if mode == "restore" and len(argv) >= 3:
            names = set(norm(n) for n in json.loads(argv[3])) if len(argv) > 3 else set()
            planned = dict((norm(k), v) for k, v in json.loads(argv[4]).items()) if len(argv) > 4 else {}
            return restore(os.path.abspath(argv[2]), names, planned)
        if mode == "state" and len(argv) >= 5:
            planned = dict((norm(k), v) for k, v in json.loads(argv[4]).items())
            return judge_state(os.path.abspath(argv[2]), set(norm(n) for n in json.loads(argv[3])), planned)
        if mode in ("check", "sizes") and len(argv) >= 3:
            found = installed(set(norm(n) for n in json.loads(argv[2])))
            damaged = {}
            for n, ds in found.items():
                why = "installed twice" if len(ds) > 1 else (complete if mode == "check" else sized)(ds[0])
                if why:
                    damaged[n] = why
            return {"mode": mode, "damaged": damaged}
        return {"mode": mode, "error": "usage: sd_backup.py save DIR NAMES_JSON [CAP] | state DIR NAMES_JSON PLANNED_JSON | restore DIR [NAMES_JSON [PLANNED_JSON]] | check|sizes NAMES_JSON"}
    except BaseException as e:  # never raise: the caller reads this line
        return {"mode": mode, "error": "%s: %s" % (type(e).__name__, e)}


if __name__ == "__main__":
    print(MARK + json.dumps(main(sys.argv)))
