"""stackdoctor verify worker: imports torch in THIS interpreter after an install and reports what it
can do (version, CUDA/HIP, whether the GPU, MPS or XPU is usable), as one marked JSON line.
"""
import importlib.util
import json
import os
import warnings

out = {"imported": False}


def whole(text, cap=2000):
    """Every line of ``text`` on one line, bounded (as sd_target.py keeps torch's errors): torch's multi-line CUDA
    errors (the old ``AssertionError`` of ``_check_driver``) end in a line that says nothing on its own."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return " ".join(lines)[:cap]


try:
    with warnings.catch_warnings(record=True) as import_caught:  # what `import torch` warns (NumPy missing ...), as sd_target.py keeps it
        warnings.simplefilter("always")
        import torch
    out["import_warnings"] = []
    for w in import_caught:
        line = "%s: %s" % (getattr(w.category, "__name__", "Warning"), (str(w.message).strip().splitlines() or [""])[0][:500])
        if line not in out["import_warnings"] and len(out["import_warnings"]) < 10:
            out["import_warnings"].append(line)
    out["imported"] = True
    out["version"] = str(getattr(torch, "__version__", "") or "") or None
    out["file"] = getattr(torch, "__file__", None)
    v = getattr(torch, "version", None)
    out["cuda"] = getattr(v, "cuda", None)
    out["hip"] = getattr(v, "hip", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out["cuda_available"] = bool(torch.cuda.is_available())
            if out["cuda_available"]:
                out["device_count"] = int(torch.cuda.device_count())
                out["device_name"] = str(torch.cuda.get_device_name(0))
                x = torch.ones(4, device="cuda")
                out["cuda_ok"] = float((x + x).sum().item()) == 8.0
        except Exception as e:
            out["cuda_error"] = whole(type(e).__name__ + ": " + str(e)) or type(e).__name__
        # the driver's CUDA level as cudaDriverGetVersion() gives it (12080 = CUDA 12.8; 0 = no driver), whatever the
        # sentence says: torch._C._cuda_getDriverVersion (torch/csrc/cuda/Module.cpp), where the build has it
        getter = getattr(getattr(torch, "_C", None), "_cuda_getDriverVersion", None)
        if out["cuda"] and not out["hip"] and getter is not None and not out.get("cuda_available"):
            try:
                value = getter()
                if isinstance(value, int):
                    out["driver_api_version"] = value
            except Exception:
                pass
        try:
            mps = getattr(getattr(torch, "backends", None), "mps", None)
            out["mps_available"] = bool(mps.is_available()) if mps else None
        except Exception:
            out["mps_available"] = None
        try:
            xpu = getattr(torch, "xpu", None)
            out["xpu_available"] = bool(xpu.is_available()) if xpu else None
        except Exception:
            out["xpu_available"] = None
    out["warnings"] = [whole(w.message) for w in caught if str(w.message).strip()]
    # the accelerator plug-ins' questions (STACKDOCTOR_TORCH_ASK: {"<kind>": "<torch module>"}), as sd_target.py asks them
    out["available"], out["available_errors"] = {}, {}
    try:
        asked = json.loads(os.environ.get("STACKDOCTOR_TORCH_ASK") or "{}")
    except ValueError:
        asked = {}
    for kind, api in sorted(asked.items() if isinstance(asked, dict) else []):
        if isinstance(api, dict):  # {"api": "npu", "needs": "torch_npu"}: asked only where that module is installed
            needs, api = api.get("needs"), api.get("api")
            if needs and importlib.util.find_spec(str(needs)) is None:
                continue
        try:
            module = torch
            for part in str(api).split(".") if api else ["?"]:
                module = getattr(module, part, None)
                if module is None:
                    break
            if module is None:
                out["available_errors"][str(kind)] = "torch has no torch.%s" % api
                continue
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                out["available"][str(kind)] = bool(module.is_available())
            if not out["available"][str(kind)] and said:
                out["available_errors"][str(kind)] = str(said[-1].message).strip().splitlines()[0][:300]
        except Exception as e:
            out["available"][str(kind)] = False
            out["available_errors"][str(kind)] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:300]
except BaseException as e:
    out["error"] = (type(e).__name__ + ": " + str(e)).strip().splitlines()[-1][:300] if str(e) else type(e).__name__
    cause = e.__cause__ or e.__context__  # torch's autoload of a device backend wraps the reason (torch_npu: "libhccl.so: ...")
    if cause is not None and str(cause).strip():
        out["error"] += " (caused by %s: %s)" % (type(cause).__name__, str(cause).strip().splitlines()[-1][:300])
print("@@stackdoctor-verify@@ " + json.dumps(out))
