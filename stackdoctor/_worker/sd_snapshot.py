"""stackdoctor snapshot worker: every installed distribution of THIS interpreter, with its version and
requirement names, as one marked JSON line. Run in the install target (stdlib only) before and after
an install, so a failed install can be undone.
"""
import json
import re
import sys
from importlib import metadata


def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()
out = {}
damaged = []
for d in metadata.distributions():
    try:
        name = norm(d.metadata["Name"] or "")
        if not name:
            continue
        if d.read_text("RECORD") is None or name in out:
            damaged.append(name)  # half-installed (no RECORD) or installed twice
        if name in out:
            continue
        reqs = []
        for r in d.requires or []:
            m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", r)
            if m:
                reqs.append(norm(m.group(1)))
        out[name] = {"version": d.version, "requires": sorted(set(reqs))}
    except Exception:
        continue
out["@damaged"] = sorted(set(damaged))
out["@prefix"] = sys.prefix  # where a backup of its files can be hard-linked (same filesystem)
print("@@stackdoctor-snapshot@@ " + json.dumps(out))
