"""stackdoctor kernel worker: run real kernels in THIS interpreter and check their numbers.

Standalone (stdlib + torch only; never imports stackdoctor) because it runs inside the
*target* interpreter. Two entry points:

- ``run_quick(torch) -> dict``: the short pass ``check`` runs inside its torch child
  (``sd_target.py``): one small fp32 and one fast-dtype matmul per device and a small
  conv2d forward+backward on the first accelerator (else the CPU). Never raises.
- ``python sd_kernels.py '<json args>'``: the full suite with a size sweep. Prints one
  line per result as soon as it is known, then a final ``done`` line::

      @@stackdoctor@@ {"section": "result", "kernel": "matmul", "device": "cpu", ...}
      @@stackdoctor@@ {"section": "done", "ran": true, "mode": "full", ...}

  so that a crash or a hang part-way keeps every result before it.

Every result is KernelResult-shaped (stackdoctor/model/facts.py). Correctness: matmul against a
float64 CPU product of the same (dtype-rounded) inputs, conv2d output and both gradients
against float64 CPU, torch.compile against eager float64 on the CPU (never float64 on the
device: MPS has none); the error is ``max|got - ref| / max|ref|``, compared with a per-dtype
tolerance; any NaN/Inf fails the check. Timings run after warm-up with the device
synchronised before the clock is read.

Test hooks (``STACKDOCTOR_TEST_HOOK``, comma separated): ``abort`` (os.abort() before any
kernel), ``segv`` (read address 0), ``hang`` (sleep), ``exit=N``, ``nan`` (matmul results
are poisoned with NaN), ``raise`` (matmul raises), ``quick=N`` (the quick pass's matmuls are N×N on every
device: a stand-in device whose tensors live on the CPU). Must stay importable by Python 3.8+.
"""

import json
import os
import sys
import time

MARK = "@@stackdoctor@@ "

# Relative tolerance of max|got - ref| / max|ref| per dtype. The reference is computed from
# the inputs already rounded to the dtype, so only accumulation and output rounding count:
# fp32 ~1e-7 per op; tf32 keeps 10 mantissa bits (~1e-3); fp16 10 bits; bf16 7 bits (~8e-3).
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2}

CHECK_ALL_ROWS_UP_TO = 2048
CHECK_ROWS = 128
QUICK_MATMUL = {"cpu": 256, "gpu": 1024}
FULL_MATMUL = {"cpu": [256, 512, 1024], "gpu": [1024, 4096, 8192]}


def hooks():
    raw = os.environ.get("STACKDOCTOR_TEST_HOOK", "")
    out = {}
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        key, _, value = part.partition("=")
        out[key] = value
    return out


def process_hooks(h):
    """Hooks that take the whole process down (tests of the parent's handling)."""
    if "abort" in h:
        sys.stderr.write("test hook: calling os.abort()\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os.abort()
    if "segv" in h:
        import ctypes

        ctypes.string_at(0)
    if "hang" in h:
        time.sleep(float(h["hang"] or 3600))
    if "exit" in h:
        sys.stderr.write("test hook: exiting with code %s\n" % (h["exit"] or "3"))
        sys.exit(int(h["exit"] or 3))


_BOILERPLATE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context", "You can suppress this exception",
                "Exception raised from", "frame #")


def last_line(exc):
    """``Type: message`` in one line: the first line of the message that says something."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(_BOILERPLATE)] or lines
    return ("%s: %s" % (type(exc).__name__, lines[0]) if lines else type(exc).__name__)[:500]


# ---------------------------------------------------------------------------- devices
# Every device but the CPU comes from the accelerator kinds' device specs (sd_devices.py, STACKDOCTOR_DEVICES).

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sd_devices  # noqa: E402  (beside this file; the target's interpreter runs us with -I)

list_devices = sd_devices.list_devices
spec_for = sd_devices.spec_for
device_name = sd_devices.device_name
fast_dtypes = sd_devices.fast_dtypes
synchronize = sd_devices.synchronize


def is_gpu(device):
    """An accelerator's device (any spec'd kind's), not the CPU."""
    return spec_for(device) is not None


def torch_dtype(torch, name):
    return {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


RUNS = 5  # timed runs per kernel: the rate is their median, their spread is reported beside it


def timed(torch, device, fn, min_time, max_iters, warmup=2, runs=RUNS):
    """Seconds per call of ``fn``: the median of ``runs`` timed runs of a few calls each, after ``warmup``
    calls, the device synchronised around each run; (median seconds, calls timed, per-call seconds of each run).

    One run on a loaded machine can be 100x off; the median of several is not, and their spread says how
    steady the machine was. A kernel slower than the whole budget gets 3 runs of one call."""
    for _ in range(warmup):
        fn()
    synchronize(torch, device)
    start = time.perf_counter()
    fn()
    synchronize(torch, device)
    one = max(time.perf_counter() - start, 1e-9)
    samples = []
    if one * runs > 2 * min_time:  # slower than the budget: that call is the first of 3 runs of one call
        runs, samples = min(runs, 3), [one]
    per_run = int(max(1, min(max(1, max_iters // runs), (min_time / runs) / one)))
    while len(samples) < runs:
        start = time.perf_counter()
        for _ in range(per_run):
            fn()
        synchronize(torch, device)
        samples.append((time.perf_counter() - start) / per_run)
    ordered = sorted(samples)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    return median, per_run * len(samples), samples


def rates(flops, samples):
    """(slowest, fastest) TFLOP/s of the timed runs."""
    return flops / max(samples) / 1e12, flops / min(samples) / 1e12


def rel_error(torch, got, ref):
    """max|got - ref| / max|ref| in float64 on the CPU; inf when got has NaN/Inf."""
    got = got.detach().to("cpu").double()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    scale = float(ref.abs().max())
    return float((got - ref).abs().max()) / (scale if scale > 0 else 1.0)


# ---------------------------------------------------------------------------- kernels


def matmul(torch, device, dtype, n, min_time=0.2, max_iters=200, h=None):
    """An n x n x n matmul in ``dtype`` on ``device``, checked and timed."""
    h = h or {}
    res = {"kernel": "matmul", "device": device, "dtype": dtype, "size": "%dx%dx%d" % (n, n, n),
           "ok": False, "tolerance": TOLERANCE[dtype], "extra": {"device_name": device_name(torch, device)}}
    tf32_prev, switch = None, None
    try:
        if "raise" in h:
            raise RuntimeError("test hook: matmul raised")
        dt = torch_dtype(torch, dtype)
        gen = torch.Generator().manual_seed(1234)
        a = torch.randn(n, n, generator=gen).to(dt)
        b = torch.randn(n, n, generator=gen).to(dt)
        rows = None
        if n > CHECK_ALL_ROWS_UP_TO:  # a float64 CPU product of 8192^3 takes seconds: check sampled rows
            rows = torch.randperm(n, generator=gen)[:CHECK_ROWS]
            ref = a[rows].double() @ b.double()
            res["extra"]["checked_rows"] = CHECK_ROWS
        else:
            ref = a.double() @ b.double()
        ad, bd = a.to(device), b.to(device)
        switch = (spec_for(device) or {}).get("tf32_switch")  # "backends.cuda.matmul.allow_tf32"
        if switch:
            tf32_prev = sd_devices.set_attr(torch, switch, dtype == "tf32")
        out = ad @ bd
        synchronize(torch, device)
        if "nan" in h:
            out = out.clone()
            out.view(-1)[0] = float("nan")
        if rows is None:
            err = rel_error(torch, out, ref)
        else:  # every element must still be finite
            err = rel_error(torch, out.to("cpu")[rows], ref) if bool(torch.isfinite(out).all()) else float("inf")
        res["max_error"] = err
        t, iters, samples = timed(torch, device, lambda: ad @ bd, min_time, max_iters)
        flops = 2.0 * n * n * n
        res["time_s"] = t
        res["tflops"] = flops / t / 1e12
        res["runs"] = len(samples)
        res["tflops_min"], res["tflops_max"] = rates(flops, samples)
        res["extra"].update({"iters": iters, "flops": flops, "run_times_s": samples})
        if err == float("inf"):
            res["error"] = "the result has NaN or Inf values"
            res["max_error"] = None
            res["extra"]["nonfinite"] = True
        elif err > TOLERANCE[dtype]:
            res["error"] = "max relative error %.3g exceeds the %s tolerance %.1g" % (err, dtype, TOLERANCE[dtype])
        else:
            res["ok"] = True
    except Exception as exc:
        res["error"] = last_line(exc)
        res["extra"]["exception"] = True
    finally:
        if tf32_prev is not None:
            sd_devices.set_attr(torch, switch, tf32_prev)
    return res


def conv(torch, device, dtype="fp32", batch=8, cin=16, cout=32, hw=32, k=3, min_time=0.2, max_iters=100):
    """conv2d forward + backward (cuDNN / MIOpen / MPS / oneDNN), output and gradients vs CPU float64."""
    size = "N%d C%d->%d %dx%d k%d" % (batch, cin, cout, hw, hw, k)
    res = {"kernel": "conv", "device": device, "dtype": dtype, "size": size, "ok": False,
           "extra": {"device_name": device_name(torch, device), "phase": "fwd+bwd"}}
    try:
        import torch.nn.functional as F

        dt = torch_dtype(torch, dtype)
        tol = TOLERANCE[dtype]
        flag = (spec_for(device) or {}).get("conv_tf32")  # "backends.cudnn.allow_tf32"
        if dtype == "fp32" and flag and sd_devices.attr(torch, flag):
            tol = TOLERANCE["tf32"]  # cuDNN convolutions may use TF32 by default
            res["extra"]["tf32_allowed"] = True
        res["tolerance"] = tol
        gen = torch.Generator().manual_seed(4321)
        x = torch.randn(batch, cin, hw, hw, generator=gen).to(dt)
        w = torch.randn(cout, cin, k, k, generator=gen).to(dt)
        gy = torch.randn(batch, cout, hw, hw, generator=gen).to(dt)

        xr = x.double().requires_grad_(True)
        wr = w.double().requires_grad_(True)
        yr = F.conv2d(xr, wr, padding=k // 2)
        yr.backward(gy.double())

        xd = x.to(device).requires_grad_(True)
        wd = w.to(device).requires_grad_(True)
        gyd = gy.to(device)

        def step():
            xd.grad = None
            wd.grad = None
            y = F.conv2d(xd, wd, padding=k // 2)
            y.backward(gyd)
            return y

        y = step()
        synchronize(torch, device)
        errs = {
            "output": rel_error(torch, y, yr.detach()),
            "grad_input": rel_error(torch, xd.grad, xr.grad),
            "grad_weight": rel_error(torch, wd.grad, wr.grad),
        }
        err = max(errs.values())
        res["extra"]["errors"] = {k2: (v if v != float("inf") else None) for k2, v in errs.items()}
        t, iters, samples = timed(torch, device, step, min_time, max_iters, warmup=1)
        flops = 3 * 2.0 * batch * cout * hw * hw * cin * k * k  # fwd + grad_input + grad_weight
        res["time_s"] = t
        res["tflops"] = flops / t / 1e12
        res["runs"] = len(samples)
        res["tflops_min"], res["tflops_max"] = rates(flops, samples)
        res["extra"].update({"iters": iters, "flops": flops, "run_times_s": samples})
        if err == float("inf"):
            res["error"] = "the result has NaN or Inf values"
            res["extra"]["nonfinite"] = True
        else:
            res["max_error"] = err
            if err > tol:
                worst = max(errs, key=lambda name: errs[name])
                res["error"] = "%s: max relative error %.3g exceeds the %s tolerance %.1g" % (worst, err, dtype, tol)
            else:
                res["ok"] = True
    except Exception as exc:
        res["error"] = last_line(exc)
        res["extra"]["exception"] = True
    return res


def compile_check(torch, device, n=4096):
    """A tiny torch.compile'd function (Inductor: Triton on GPUs, C++ on CPU) against eager."""
    res = {"kernel": "compile", "device": device, "dtype": "fp32", "size": str(n), "ok": False,
           "tolerance": 1e-5, "extra": {"backend": "inductor"}}
    try:
        def f(x, y):
            return torch.sin(x) * y + torch.cos(y).relu()

        gen = torch.Generator().manual_seed(7)
        x = torch.randn(n, generator=gen).to(device)
        y = torch.randn(n, generator=gen).to(device)
        cf = torch.compile(f)
        start = time.perf_counter()
        got = cf(x, y)
        synchronize(torch, device)
        res["extra"]["compile_s"] = time.perf_counter() - start
        ref = f(x.cpu().double(), y.cpu().double())  # float64 on the CPU: MPS has no float64
        err = rel_error(torch, got, ref)
        t, iters, samples = timed(torch, device, lambda: cf(x, y), 0.05, 100)
        te, _, _ = timed(torch, device, lambda: f(x, y), 0.05, 100)
        res["time_s"] = t
        res["runs"] = len(samples)
        res["extra"].update({"iters": iters, "eager_time_s": te, "run_times_s": samples})
        if err == float("inf"):
            res["error"] = "the compiled function returned NaN or Inf"
            res["extra"]["nonfinite"] = True
        else:
            res["max_error"] = err
            if err > res["tolerance"]:
                res["error"] = "compiled result differs from eager by %.3g" % err
            else:
                res["ok"] = True
    except Exception as exc:
        res["error"] = last_line(exc)
        res["extra"]["exception"] = True
    return res


# ---------------------------------------------------------------------------- passes


def run_quick(torch, with_compile=False):
    """The ``check`` pass: small matmuls (fp32 + fast dtype) per device, one small conv, and with
    ``with_compile`` (``check --compile``) a tiny torch.compile'd function on the same device. Never raises."""
    out = {"ran": True, "mode": "quick", "results": []}
    try:
        h = hooks()
        process_hooks(h)
        devices = list_devices(torch)
        for device in devices:
            n = int(h["quick"]) if h.get("quick", "").isdigit() else QUICK_MATMUL["gpu" if is_gpu(device) else "cpu"]
            for dtype in ["fp32"] + fast_dtypes(torch, device)[:1]:
                out["results"].append(matmul(torch, device, dtype, n, min_time=0.05, max_iters=50, h=h))
        conv_dev = devices[1] if len(devices) > 1 else "cpu"
        out["results"].append(conv(torch, conv_dev, batch=4, cin=8, cout=16, hw=16, min_time=0.05, max_iters=20))
        if with_compile:
            out["results"].append(compile_check(torch, conv_dev))
    except BaseException as exc:  # even SystemExit from a hook: this runs inside the torch probe
        out["error"] = last_line(exc)
    return out


def run_full(torch, args, emit):
    h = hooks()
    process_hooks(h)
    present = list_devices(torch)
    wanted = args.get("devices") or []
    devices = [sd_devices.first(d) for d in wanted or present]  # "cuda": "cuda:0"
    kernels = args.get("kernels") or ["matmul", "conv", "compile"]
    sizes = args.get("sizes") or []
    min_time = float(args.get("min_time", 0.2))
    results = []

    def put(r):
        results.append(r)
        emit("result", r)

    for device in devices:
        if device not in present:
            put({"kernel": kernels[0], "device": device, "ok": False,
                 "error": "device %s is not available to torch here (present: %s)" % (device, ", ".join(present)),
                 "extra": {"unavailable": True, "present": list(present)}})
            continue
        gpu = is_gpu(device)
        if "matmul" in kernels:
            dsizes = sizes or FULL_MATMUL["gpu" if gpu else "cpu"]
            for dtype in ["fp32"] + fast_dtypes(torch, device):
                for i, n in enumerate(dsizes):
                    r = matmul(torch, device, dtype, int(n), min_time=min_time, h=h)
                    r["extra"]["sweep_max"] = i == len(dsizes) - 1
                    put(r)
        if "conv" in kernels:
            put(conv(torch, device, "fp32", batch=32 if gpu else 8, cin=64 if gpu else 16,
                     cout=64 if gpu else 32, hw=56 if gpu else 32, min_time=min_time))
            if gpu:
                fd = fast_dtypes(torch, device)
                put(conv(torch, device, fd[0] if fd[0] != "tf32" else "fp16", batch=32, cin=64, cout=64, hw=56, min_time=min_time))
        if "compile" in kernels:
            put(compile_check(torch, device))
    return {"ran": True, "mode": "full", "devices": present, "torch_version": getattr(torch, "__version__", None)}


def main(argv):
    t0 = time.monotonic()

    def emit(section, data):
        data = dict(data)
        data["section"] = section
        data["elapsed_s"] = round(time.monotonic() - t0, 4)
        sys.stdout.write(MARK + json.dumps(data, default=str) + "\n")
        sys.stdout.flush()

    try:
        args = json.loads(argv[1]) if len(argv) > 1 else {}
    except ValueError as exc:
        emit("done", {"ran": False, "error": "bad arguments: %s" % exc})
        return 2
    try:
        import torch
    except BaseException as exc:
        emit("done", {"ran": False, "error": "import torch failed: %s" % last_line(exc)})
        return 0
    try:
        done = run_full(torch, args, emit)
    except Exception as exc:
        emit("done", {"ran": False, "error": last_line(exc)})
        return 0
    emit("done", done)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
