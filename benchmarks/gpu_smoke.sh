#!/usr/bin/env bash
# GPU smoke test for a machine with an NVIDIA GPU: a few minutes at most.
#
#   benchmarks/gpu_smoke.sh [PYTHON]     # PYTHON: an interpreter whose torch is a CUDA build
#
# 1. stackdoctor check --json            (probes + the quick kernel pass in the torch child)
# 2. stackdoctor kernels matmul conv --device cuda:0 --json
#                                        (fp32/bf16/fp16/tf32 matmul sweep, conv fwd+bwd vs CPU)
# 3. stackdoctor kernels allreduce --nproc 1 --backend nccl --device cuda --json
#                                        (single-GPU NCCL: proves NCCL loads and reduces exactly;
#                                         busbw is 0 for one rank, as nccl-tests reports it: read algbw)
# Then a summary: bf16 matmul TFLOP/s against the GPU's peak, conv, allreduce.
# Outputs are kept in $OUT (default: a new temp dir) for the closing note.
set -u
PY="${1:-${STACKDOCTOR_TORCH_PYTHON:-python3}}"
OUT="${OUT:-$(mktemp -d /tmp/sd-gpu-smoke.XXXXXX)}"
if command -v stackdoctor >/dev/null 2>&1; then SD=(stackdoctor); else SD=(python3 -m stackdoctor); fi
mkdir -p "$OUT"
echo "# target python: $PY    outputs: $OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | head -4

step() {  # step NAME TIMEOUT ARGV...
  local name=$1 t=$2; shift 2
  local start=$SECONDS
  timeout "$t" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
  local rc=$?
  echo "# $name: exit $rc in $((SECONDS - start)) s"
  [ "$rc" -ge 2 ] && tail -5 "$OUT/$name.err"
  return 0
}

# the real tool's outputs, kept as recordings for the parsers' fixtures (each form stackdoctor asks for)
{ nvidia-smi; } >"$OUT/nvidia-smi.txt" 2>&1
{ nvidia-smi -L; } >"$OUT/nvidia-smi-L.txt" 2>&1
{ nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version,pcie.link.gen.current,pcie.link.width.current,power.limit,mig.mode.current,persistence_mode --format=csv,noheader,nounits; } >"$OUT/nvidia-smi-query.csv" 2>&1
{ nvidia-smi -q; } >"$OUT/nvidia-smi-q.txt" 2>&1
{ cat /proc/driver/nvidia/version; ls /proc/driver/nvidia/gpus/ && cat /proc/driver/nvidia/gpus/*/information; } >"$OUT/proc-driver-nvidia.txt" 2>&1

# the static torch probe (no import) against torch's own arch list, on this machine's CUDA wheel
"$PY" - "$OUT" <<'PYEOF' >"$OUT/static-vs-import.txt" 2>&1
import json, os, site, sys, sysconfig, time
sys.path.insert(0, os.getcwd())
from stackdoctor.probes.torch_static import read_static_torch
from stackdoctor.system import System
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
t0 = time.perf_counter()
st = read_static_torch(System(), dirs)
static_ms = (time.perf_counter() - t0) * 1000
t0 = time.perf_counter()
import torch
import_s = time.perf_counter() - t0
flags = torch._C._cuda_getArchFlags().split() if hasattr(torch._C, "_cuda_getArchFlags") else []
arch = torch.cuda.get_arch_list()
print(json.dumps({"version": st.version, "static_cuda": st.cuda, "torch_cuda": torch.version.cuda,
                  "static_arch_list": st.arch_list, "static_arch_extra": st.arch_extra, "torch_arch_list": arch,
                  "torch_arch_flags": flags, "same_set": sorted(set(st.arch_list)) == sorted(set(arch)),
                  "static_ms": round(static_ms, 1), "import_torch_s": round(import_s, 2),
                  "libraries": [(l.path.rsplit("/", 1)[-1], l.entries, l.error) for l in st.libraries],
                  "runtime": st.runtime, "errors": st.errors}, indent=1))
PYEOF
"$PY" -c "import sys, os; sys.path.insert(0, os.getcwd()); from stackdoctor.accelerators.nvidia.cudriver import query_driver_cuda; from stackdoctor.system import System; print(query_driver_cuda(System(), sys.executable, 20))" >"$OUT/cudriver.txt" 2>&1

step check 180 "${SD[@]}" check --json --python "$PY" --torch-timeout 120
step kernels 300 "${SD[@]}" kernels matmul conv --device cuda:0 --python "$PY" --timeout 280 --json
step allreduce 180 "${SD[@]}" kernels allreduce --nproc 1 --backend nccl --device cuda --python "$PY" \
  --min-bytes 1M --max-bytes 256M --iters 20 --timeout 120 --json

python3 - "$OUT" <<'EOF'
import json, sys, os
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as fh:
            return json.load(fh)
    except Exception as exc:
        print(f"{name}: no JSON ({type(exc).__name__}: {exc})")
        return None
check = load("check")
if check:
    t = check["facts"]["torch"]
    k = check["facts"]["kernels"]
    print(f"check: torch {t.get('version')} cuda {t.get('cuda')} available={t.get('cuda_available')}; "
          f"quick kernels ran={k.get('ran')} error={k.get('error')}")
    for r in k.get("results", []):
        print(f"  quick {r['kernel']:7} {r['device']:7} {r.get('dtype') or '':5} ok={r['ok']} tflops={r.get('tflops')}")
    bad = [f["code"] for f in check.get("findings", []) if f["severity"] != "ok"]
    print(f"  findings: {bad}")
kern = load("kernels")
if kern:
    if kern.get("error"):
        print(f"kernels: process error: {kern['error']}")
    for r in kern.get("results", []):
        peak = f"{r['percent_of_peak']:.0f}% of {r['peak_tflops']} TF" if r.get("percent_of_peak") is not None else "peak unknown"
        tf = f"{r['tflops']:.2f}" if r.get("tflops") is not None else "-"
        print(f"  {r['kernel']:6} {r['device']:7} {r.get('dtype') or '':5} {r.get('size') or '':22} ok={r['ok']!s:5} "
              f"err={r.get('max_error')} TFLOP/s={tf} ({peak}) {r.get('error') or ''}")
    bf16 = [r for r in kern.get("results", []) if r["kernel"] == "matmul" and r.get("dtype") == "bf16" and r.get("tflops")]
    if bf16:
        best = max(bf16, key=lambda r: r["tflops"])
        print(f"bf16 matmul: {best['tflops']:.1f} TFLOP/s at {best['size']}; peak {best.get('peak_tflops')} "
              f"({best.get('percent_of_peak')}%, {best.get('extra', {}).get('peak_source')})")
    print(f"  findings: {[f['code'] for f in kern.get('findings', [])]}")
ar = load("allreduce")
if ar and ar.get("allreduce"):
    a = ar["allreduce"]
    rows = a.get("rows") or []
    best = max(rows, key=lambda r: r["ip"]["algbw"]) if rows else None
    print(f"allreduce: {a.get('backend')} on {a.get('device')} status={a.get('status')} wrong={a.get('wrong')} "
          + (f"best algbw {best['ip']['algbw']:.1f} GB/s at {best['bytes']} B" if best else f"error={a.get('error')}"))
EOF
