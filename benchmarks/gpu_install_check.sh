#!/usr/bin/env bash
# Device check for `stackdoctor install` on a machine with an NVIDIA GPU and no network (issue 13): the plan for the
# real driver and GPU, the conda-forge route's CUDA build chosen from the driver's CUDA ceiling, environment.yml, pixi.
# The device has no package index: build the dependencies here first and carry them:
#   pip install --target .venv-devdeps .      (this checkout, with its dependencies)
#   run: bash benchmarks/gpu_install_check.sh   (carry: .venv-devdeps)
# Not yet run on a GPU (the session that wrote it could only reach the lead's checkout from the device).
export OUT=${OUT:-/tmp/gpu-install-check}; mkdir -p "$OUT"; export PYTHONPATH=$PWD/.venv-devdeps STACKDOCTOR_MATRIX= NO_COLOR=1 COLUMNS=160
PY=$(command -v python3)
echo "== python: $($PY -V) ; uv: $(command -v uv || echo none) ; pip.conf: $($PY -m pip config list 2>/dev/null | head -3)"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 | head -2
nvidia-smi | sed -n 3p
echo "== plan for this H200 (offline: only local sources)"
timeout 120 $PY -m stackdoctor install --dry-run --offline --json > $OUT/plan.json 2> $OUT/plan.err; echo "rc=$?"
$PY - <<'P'
import json,os
d=json.load(open(os.environ["OUT"]+"/plan.json"))
print("variant", d["variant"], "torch", d["torch_version"]); print("reasons", d["reasons"][:3]); print("warnings", d["warnings"][:3]); print("rejected", [r["variant"] for r in d["rejected"]][:8])
P
tail -3 $OUT/plan.err
echo "== a conda env on this machine (venv + conda-meta)"
$PY -m venv /tmp/cenv >/dev/null 2>&1 || $PY -m venv --without-pip /tmp/cenv
mkdir -p /tmp/cenv/conda-meta
timeout 120 $PY -m stackdoctor install --python /tmp/cenv/bin/python --torch 2.13.0 --dry-run --offline > $OUT/conda.txt 2>&1; echo "rc=$?"
grep -A4 "route " $OUT/conda.txt | head -20
timeout 120 $PY -m stackdoctor install --python /tmp/cenv/bin/python --torch 2.13.0 --offline --emit environment.yml > $OUT/env.yml 2>$OUT/env.err; echo "rc=$?"; cat $OUT/env.yml
timeout 120 $PY -m stackdoctor install --python /tmp/cenv/bin/python --torch 2.13.0 --installer pixi --offline --dry-run 2>&1 | tail -2
echo "== what-if gpu on this machine's driver"
timeout 120 $PY -m stackdoctor install --gpu sm_75 --dry-run --offline 2>&1 | head -3
