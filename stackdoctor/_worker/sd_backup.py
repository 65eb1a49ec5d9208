"""stackdoctor backup worker: keeps the installed files of some distributions aside before an install, and
puts them back exactly (offline) when the install fails. Run in the install target (stdlib only, Python 3.8
syntax); it never raises: every failure is reported in its one marked JSON line.

``save DIR NAMES_JSON [COPY_CAP_BYTES]``: for each installed distribution in NAMES, hard-link every file its
RECORD lists into ``DIR/files``, and write ``DIR/manifest.json`` (name, version, site dir, and for each file its
RECORD path, which may start with ``..`` for scripts, its hash, its size and its name in the backup). The layout
lives in the manifest and the files lie flat (``<name>-<n>``): torch 2.13.0+cpu has 14 622 files in 1 169
folders, and creating those folders took 1.0-1.3 s of a 1.5 s save here, linking flat 0.35 s. Where a hard link is refused (another filesystem, EPERM) the file is copied, while the copied bytes stay
under the cap (default 2 GiB); a distribution past the cap is reported in ``not_backed_up`` and left out.

``restore DIR [NAMES_JSON]``: removes what is installed now for NAMES (default: the manifest's names): the
files of their RECORDs and their dist-info directories, and half-written dist-info directories without RECORD;
then links (or copies) the saved files back and checks each one's sha256 against its RECORD hash (empty hashes,
as for RECORD itself and .pyc files, are skipped).
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
from importlib import metadata

MARK = "@@stackdoctor-backup@@ "
DEFAULT_CAP = 2 * 1024 ** 3


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


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
    text = d.read_text("RECORD")
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


def target_path(site, rel):
    return os.path.normpath(rel if os.path.isabs(rel) else os.path.join(site, rel))


def sha256_b64(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


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
    if cap is not None and state["copied_bytes"] + size > cap:
        return "over the copy cap of %d bytes (a hard link was refused: %s)" % (cap, link_error)
    shutil.copy2(src, dst)
    state["copied_bytes"] += size
    return "copy"


def save(root, names, cap):
    out = {"mode": "save", "dir": root, "saved": {}, "bytes": {}, "not_backed_up": {}, "linked": 0, "copied": 0,
           "linked_bytes": 0, "copied_bytes": 0, "errors": []}
    manifest = {"names": sorted(names), "dists": []}
    state = {"copied_bytes": 0, "dirs": set()}
    files_root = os.path.join(root, "files")
    found = installed(names)
    for name in sorted(names):
        dists = found.get(name, [])
        if not dists:
            continue
        if len(dists) > 1:
            out["not_backed_up"][name] = "installed twice"
            continue
        d = dists[0]
        rows = record_rows(d)
        site = site_of(d)
        if rows is None or site is None:
            out["not_backed_up"][name] = "no RECORD (half-installed)"
            continue
        entry = {"name": name, "version": d.version, "site": site, "dist_info": dist_path(d), "files": []}
        counts = {"link": 0, "copy": 0, "link_bytes": 0, "copy_bytes": 0}
        start_copied = state["copied_bytes"]
        why = None
        for rel, digest, size in rows:
            src = target_path(site, rel)
            try:
                st = os.stat(src)
                nbytes = st.st_size if stat.S_ISREG(st.st_mode) else -1
            except OSError:
                nbytes = -1
            if nbytes < 0:
                if digest:  # a hashed file that is gone: this copy could not be put back whole
                    why = "%s is listed in RECORD but missing" % rel
                    break
                continue  # e.g. a .pyc listed without hash that was never written
            store = "%s-%d" % (name, len(entry["files"]))
            try:
                how = place(src, os.path.join(files_root, store), nbytes, state, cap)
            except OSError as e:
                how = "%s: %s" % (rel, e)
            if how not in ("link", "copy"):
                why = how
                break
            counts[how] += 1
            counts[how + "_bytes"] += nbytes
            entry["files"].append({"path": rel, "stored": store, "hash": digest, "size": size})
        if why is not None:
            out["not_backed_up"][name] = why
            for f in entry["files"]:  # free what was saved of it (and its share of the copy budget)
                try:
                    os.unlink(os.path.join(files_root, f["stored"]))
                except OSError:
                    pass
            state["copied_bytes"] = start_copied
            continue
        manifest["dists"].append(entry)
        out["saved"][name] = d.version
        out["bytes"][name] = counts["link_bytes"] + counts["copy_bytes"]
        out["linked"] += counts["link"]
        out["copied"] += counts["copy"]
        out["linked_bytes"] += counts["link_bytes"]
        out["copied_bytes"] += counts["copy_bytes"]
    with open(os.path.join(root, "manifest.json"), "w") as f:
        f.write(json.dumps(manifest))  # dumps uses the C encoder; dump to a file does not (0.5 s for torch's 14 000 files)
    return out


def remove_installed(names, out):
    """Remove what is installed for names: RECORD files, dist-info dirs, half-written dist-info dirs."""
    dirs = set()
    for name, dists in installed(names).items():
        for d in dists:
            path = dist_path(d)
            version = d.version or "?"
            rows = record_rows(d)
            site = site_of(d)
            if rows is not None and site is not None:
                for rel, _digest, _size in rows:
                    p = target_path(site, rel)
                    try:
                        if os.path.isfile(p) or os.path.islink(p):
                            os.unlink(p)
                            dirs.add((os.path.dirname(p), site))
                    except OSError as e:
                        out["errors"].append("removing %s: %s" % (p, e))
            if path and path.endswith(".dist-info") and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
                out["removed"].append(name + " " + version + ("" if rows is not None else " (no RECORD)"))
    for d, site in sorted(dirs, key=lambda pair: len(pair[0]), reverse=True):  # prune the package folders the removal emptied
        # ... inside the site directory only: never the site directory itself or anything above it
        while d and os.path.isdir(d) and d != site and d.startswith(site.rstrip(os.sep) + os.sep):
            pycache = os.path.join(d, "__pycache__")
            try:
                if os.path.isdir(pycache) and not any(n.endswith(".py") for n in os.listdir(d)):
                    shutil.rmtree(pycache, ignore_errors=True)
                os.rmdir(d)  # only if empty
            except OSError:
                break
            d = os.path.dirname(d)


def restore(root, names):
    out = {"mode": "restore", "dir": root, "restored": {}, "removed": [], "mismatch": [], "missing": [],
           "linked": 0, "copied": 0, "errors": []}
    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    names = set(names or manifest.get("names") or [])
    names.update(d["name"] for d in manifest["dists"])
    remove_installed(names, out)
    files_root = os.path.join(root, "files")
    state = {"copied_bytes": 0, "dirs": set()}
    for entry in manifest["dists"]:
        bad = False
        for f in entry["files"]:
            src = os.path.join(files_root, f["stored"])
            dst = target_path(entry["site"], f["path"])
            try:
                if os.path.lexists(dst):
                    os.unlink(dst)
                how = place(src, dst, 0, state, None)
                out["linked" if how == "link" else "copied"] += 1
                if f["hash"] and sha256_b64(dst) != f["hash"]:
                    out["mismatch"].append(f["path"])
                    bad = True
            except OSError as e:
                out["missing"].append("%s: %s" % (f["path"], e))
                bad = True
        if not bad:
            out["restored"][entry["name"]] = entry["version"]
    return out


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    try:
        if mode == "save" and len(argv) >= 4:
            cap = int(argv[4]) if len(argv) > 4 else DEFAULT_CAP
            return save(os.path.abspath(argv[2]), set(norm(n) for n in json.loads(argv[3])), cap)
        if mode == "restore" and len(argv) >= 3:
            names = set(norm(n) for n in json.loads(argv[3])) if len(argv) > 3 else set()
            return restore(os.path.abspath(argv[2]), names)
        return {"mode": mode, "error": "usage: sd_backup.py save DIR NAMES_JSON [CAP] | restore DIR [NAMES_JSON]"}
    except BaseException as e:  # never raise: the caller reads this line
        return {"mode": mode, "error": "%s: %s" % (type(e).__name__, e)}


if __name__ == "__main__":
    print(MARK + json.dumps(main(sys.argv)))
