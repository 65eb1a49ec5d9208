"""stackdoctor repair worker: removes the half-written dist-info directories (no RECORD) that an
interrupted or failed pip leaves behind for the named distributions, which pip itself then refuses to
uninstall ("Cannot uninstall torchvision 0.28.0+cu130, RECORD file not found"). Run in the install
target (stdlib only) with a JSON list of names as its argument.
"""
import json
import re
import shutil
import sys
from importlib import metadata

names = set(json.loads(sys.argv[1]))
removed = []
for d in list(metadata.distributions()):
    name = re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower()
    path = getattr(d, "_path", None)
    if name in names and d.read_text("RECORD") is None and path is not None and str(path).endswith(".dist-info"):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(str(path))
print("@@stackdoctor-repair@@ " + json.dumps(removed))
