"""stackdoctor target worker: facts about the Python and torch of THIS interpreter.

Run by stackdoctor as ``<target python> sd_target.py``; stdlib + torch only, so it works
where stackdoctor is not installed. Prints one line per section as soon as it is known::

    @@stackdoctor@@ {"section": "python", ...}
    @@stackdoctor@@ {"section": "torch", ...}
    @@stackdoctor@@ {"section": "kernels", ...}     (when STACKDOCTOR_KERNELS=quick)

so that if ``import torch`` hangs or crashes the parent still has everything before it.
Must stay importable by every Python 3 the parent may meet (3.8+ syntax).
"""

import importlib.util
import json
import os
import sys
import time
import warnings

MARK = "@@stackdoctor@@ "
_t0 = time.monotonic()


def emit(section, data):
    data = dict(data)
    data["section"] = section
    data["elapsed_s"] = round(time.monotonic() - _t0, 4)
    sys.stdout.write(MARK + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def last_line(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:500] if lines else type(exc).__name__


def whole_text(exc, cap=2000):
    """The exception's whole message on one line ("Type: line1 line2 ..."): torch's multi-line errors (the
    old ``AssertionError`` of ``_check_driver``) end in a line that says nothing on its own, so every line is kept."""
    return flat("%s: %s" % (type(exc).__name__, exc), cap) or type(exc).__name__


# torch.distributed's built-in backends, each asked by its own is_<name>_available(); Backend.backend_list adds the
# ones registered beyond them
DIST_BUILTIN = ("gloo", "nccl", "mpi", "ucc", "xccl")


def flat(text, cap=2000):
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return " ".join(lines)[:cap] if lines else ""


def cuda_warning(messages):
    """torch's CUDA initialisation warning among what ``is_available()`` warned (the last one that names CUDA
    or the driver, else the last one), whole, on one line."""
    for m in reversed(messages):
        low = m.lower()
        if "cuda initialization" in low or "driver" in low or "cuda" in low:  # vendor branch: torch.cuda's own warning (the worker is stdlib-only; the words are torch's)
            return flat(m, 2000)
    return flat(messages[-1], 2000) if messages else None


def python_facts():
    import sysconfig

    out = {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "abiflags": getattr(sys, "abiflags", ""),
        "prefix": sys.prefix,
    }
    if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        out["env_kind"] = "conda"
    elif sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        out["env_kind"] = "venv"
    else:
        out["env_kind"] = "system"
    tags = []
    try:  # packaging.tags.sys_tags(), ported (sd_tags.py): packaging's import cost more than the rest of this worker
        tags = sibling("sd_tags").sys_tags()
    except Exception as exc:  # a platform the port cannot read: report, keep going
        out["tags_error"] = last_line(exc)
    out["tags"] = tags
    out["site_dirs"] = site_dirs()
    out["torch_location"] = torch_location()
    # pip's version and the installed distributions are read by the parent from the *.dist-info in
    # site_dirs (stackdoctor.probes.torch_static): importlib.metadata costs more than the rest of this worker
    return out


def sibling(name):
    """The worker module ``name`` beside this file (loaded by path: a module of that name on the target's
    sys.path is not it), compiled once into __pycache__ like any import."""
    mod = sys.modules.get("_stackdoctor_" + name)
    if mod is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
        spec = importlib.util.spec_from_file_location("_stackdoctor_" + name, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def site_dirs():
    """Where this interpreter installs and finds packages, in import (sys.path) order.

    sysconfig's purelib/platlib, site.getsitepackages() and the user site when enabled; for
    the parent's static read of torch (stackdoctor.probes.torch_static), which must look
    where ``import torch`` would.
    """
    found = []
    try:
        import sysconfig

        paths = sysconfig.get_paths()
        found += [paths.get("purelib"), paths.get("platlib")]
    except Exception:
        pass
    try:
        import site

        found += list(site.getsitepackages())
        if site.ENABLE_USER_SITE:
            found.append(site.getusersitepackages())
    except Exception:  # some embedded or old site modules lack these
        pass
    wanted = []
    for p in found:
        if isinstance(p, str) and p and p not in wanted:
            wanted.append(p)
    ordered = [p for p in sys.path if p in wanted]
    ordered = [p for i, p in enumerate(ordered) if p not in ordered[:i]]
    return ordered + [p for p in wanted if p not in ordered]


def conda_packages():
    meta = os.path.join(sys.prefix, "conda-meta")
    names = []
    try:
        for fn in sorted(os.listdir(meta)):
            if fn.endswith(".json") and fn.startswith(("pytorch-", "cudatoolkit-", "cuda-", "cudnn-", "nccl-", "pytorch-cuda-", "libcublas", "torchvision-", "torchaudio-")):
                names.append(fn[: -len(".json")])
    except OSError:
        pass
    return names


def variant_of(version, cuda, hip, xpu):
    if "+" in version:
        return version.split("+", 1)[1]
    if cuda:
        return "cu" + cuda.replace(".", "")[:3]
    if hip:
        parts = hip.split(".")
        return "rocm" + ".".join(parts[:2])
    if xpu:
        return "xpu"
    return "cpu"


def torch_location():
    """Where ``import torch`` would load torch from, found without importing it (``find_spec``
    only locates a top-level package; nothing of torch runs). None when there is no torch package."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except Exception:
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    locations = list(spec.submodule_search_locations)
    return locations[0] if locations else None


def torch_facts():
    out = {"installed": False, "conda_packages": conda_packages()}
    if os.environ.get("STACKDOCTOR_IMPORT_TORCH") == "0":
        # not imported: the parent reads torch's files (stackdoctor.probes.torch_static)
        out["not_imported"] = True
        return out, None
    torch = import_torch(out)
    if torch is None:
        return out, None
    tv = getattr(torch, "version", None)
    cuda, hip = getattr(tv, "cuda", None), getattr(tv, "hip", None)
    build_facts(torch, out)
    cuda_facts(torch, out, cuda, hip)
    devices = cuda_devices(torch, out, hip) if out.get("cuda_available") else []
    arch_facts(torch, out, cuda, hip)
    library_versions(torch, out, cuda, hip)
    other_devices(torch, out, devices)
    out["devices"] = devices
    available, available_errors = ask_torch(torch, os.environ.get("STACKDOCTOR_TORCH_ASK", ""))
    if available or available_errors:
        out["available"] = available
        out["available_errors"] = available_errors
    distributed_facts(out)
    try:
        out["config"] = config_essentials(torch.__config__.show())
    except Exception:
        out["config"] = {}
    return out, torch


def import_torch(out):
    """``import torch`` with its warnings kept; None (and why, in ``out``) when it raised."""
    hook = os.environ.get("STACKDOCTOR_TEST_HOOK", "")
    t = time.monotonic()
    try:
        if hook == "torch-import-hang":
            time.sleep(3600)
        with warnings.catch_warnings(record=True) as import_caught:  # torch's own warnings (NumPy missing...)
            warnings.simplefilter("always")
            import torch
    except BaseException as exc:  # ImportError, OSError (libs), SystemExit from a broken __init__ ...
        out["installed"] = not isinstance(exc, ModuleNotFoundError)  # the parent's read of the files says more
        if isinstance(exc, ModuleNotFoundError) and getattr(exc, "name", None) == "torch":
            out["import_error"] = None
        else:
            out["import_error"] = whole_text(exc)
            out["import_error_kind"] = "exception"
        return None
    out["import_s"] = round(time.monotonic() - t, 3)
    said = []  # type: list[str]
    for w in import_caught:
        line = "%s: %s" % (getattr(w.category, "__name__", "Warning"), (str(w.message).strip().splitlines() or [""])[0][:500])
        if line not in said and len(said) < 10:
            said.append(line)
    out["import_warnings"] = said
    out["installed"] = True
    return torch


def build_facts(torch, out):
    """What torch says of its build: version, CUDA/HIP/XPU, debug, git version, variant."""
    out["location"] = os.path.dirname(getattr(torch, "__file__", "") or "") or None
    version = str(getattr(torch, "__version__", ""))
    tv = getattr(torch, "version", None)
    cuda = getattr(tv, "cuda", None)
    hip = getattr(tv, "hip", None)
    xpu = getattr(tv, "xpu", None)
    out.update(version=version, cuda=cuda, hip=hip, debug=getattr(tv, "debug", None))
    for key in ("git_version", "rocm", "xpu"):
        value = getattr(tv, key, None)
        out[key] = value if isinstance(value, str) else None
    out["variant"] = variant_of(version, cuda, hip, xpu)


def cuda_facts(torch, out, cuda, hip):
    """torch.cuda.is_available(), why not (torch's own warning or init error, whole), the device count, and the
    driver's CUDA level as cudaDriverGetVersion() gives it."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            avail = bool(torch.cuda.is_available())
        out["cuda_available"] = avail
        msgs = [str(w.message) for w in caught]
        if not avail and (cuda or hip):
            out["cuda_error"] = cuda_warning(msgs)
            if not out["cuda_error"]:
                try:
                    torch.cuda.init()
                except Exception as exc:
                    out["cuda_error"] = whole_text(exc)
        out["device_count"] = int(torch.cuda.device_count()) if avail else 0
    except Exception as exc:
        out["cuda_available"] = False
        out["cuda_error"] = whole_text(exc)
    # the driver's CUDA level as cudaDriverGetVersion() gives it (12080 = CUDA 12.8; 0 = no driver), whatever
    # torch's sentence says: torch._C._cuda_getDriverVersion (torch/csrc/cuda/Module.cpp), where the build has it
    getter = getattr(getattr(torch, "_C", None), "_cuda_getDriverVersion", None)
    if cuda and not hip and getter is not None:
        try:
            value = getter()
            if isinstance(value, int):
                out["driver_api_version"] = value
        except Exception:
            pass


def cuda_devices(torch, out, hip):
    devices = []
    for i in range(out["device_count"]):
        try:
            p = torch.cuda.get_device_properties(i)
            cap = getattr(p, "gcnArchName", None) if hip else "%d.%d" % (p.major, p.minor)
            dev = {"index": i, "name": p.name, "capability": cap, "total_memory_mib": int(p.total_memory // (1024 * 1024)), "kind": "cuda"}
            uuid = getattr(p, "uuid", None)
            if uuid is not None:
                dev["uuid"] = str(uuid)
            if all(hasattr(p, k) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
                dev["bus_id"] = "%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
            devices.append(dev)
        except Exception as exc:
            devices.append({"index": i, "name": None, "kind": "cuda", "capability": None})
            out.setdefault("cuda_error", last_line(exc))
    return devices


def arch_facts(torch, out, cuda, hip):
    try:
        out["arch_list"] = list(torch.cuda.get_arch_list()) if (cuda or hip) else []
    except Exception:
        out["arch_list"] = []
    # get_arch_list() is [] while no GPU is usable; the build's flags are there all the same
    flags = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
    if (cuda or hip) and flags is not None:
        try:
            value = flags()
            out["arch_flags"] = value.split() if isinstance(value, str) else []
        except Exception:
            pass


def library_versions(torch, out, cuda, hip):
    try:
        v = torch.backends.cudnn.version() if (cuda or hip) else None
        out["cudnn_version"] = str(v) if v else None
    except Exception as exc:  # "cuDNN version incompatibility: PyTorch was compiled against ..." (a shadowing copy)
        out["cudnn_version"] = None
        out["cudnn_error"] = whole_text(exc)
    try:
        if cuda and hasattr(torch.cuda, "nccl"):
            v = torch.cuda.nccl.version()
            out["nccl_version"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        pass


def other_devices(torch, out, devices):
    """MPS and XPU: built, available, their devices (appended to ``devices``), and why XPU is not available."""
    try:
        mps = getattr(torch.backends, "mps", None)
        out["mps_built"] = bool(mps.is_built()) if mps else False
        out["mps_available"] = bool(mps.is_available()) if mps else False
        if out["mps_available"]:
            devices.append({"index": 0, "name": "mps", "kind": "mps"})
    except Exception:
        pass
    try:
        if hasattr(torch, "xpu"):
            with warnings.catch_warnings(record=True) as caught:  # "Failed to initialize XPU devices. ..." (c10/xpu)
                warnings.simplefilter("always")
                out["xpu_available"] = bool(torch.xpu.is_available())
            if not out["xpu_available"] and caught:
                out["xpu_error"] = flat(str(caught[-1].message), 2000)
            if out["xpu_available"]:
                for i in range(torch.xpu.device_count()):
                    devices.append({"index": i, "name": torch.xpu.get_device_name(i), "kind": "xpu"})
    except Exception as exc:
        out["xpu_available"] = False
        out["xpu_error"] = whole_text(exc)


def distributed_facts(out):
    try:
        import torch.distributed as dist

        out["distributed_available"] = bool(dist.is_available())
        out["distributed_backends"] = distributed_backends(dist) if out["distributed_available"] else []
    except Exception:
        out["distributed_available"] = False


def distributed_backends(dist):
    backends = []
    for name in DIST_BUILTIN:
        fn = getattr(dist, "is_%s_available" % name, None)
        try:
            if fn is not None and fn():
                backends.append(name)
        except Exception:
            pass
    try:
        for name in getattr(dist.Backend, "backend_list", []):
            # only backends registered beyond the built-in ones (e.g. "tccl"); built-ins were asked above
            if name not in backends and name not in DIST_BUILTIN + ("undefined", "fake"):
                backends.append(str(name))
    except Exception:
        pass
    return backends


def ask_torch(torch, asked):
    """The accelerator plug-ins' questions: ``asked`` is JSON ``{"<kind>": "<torch module>"}`` (the parent's
    ``accelerators.torch_questions()``); each is answered by ``torch.<module>.is_available()``. Returns
    (kind -> bool, kind -> why no answer): a module torch lacks, or its exception's last line, is a reason."""
    available, errors = {}, {}
    try:
        questions = json.loads(asked) if asked else {}
    except ValueError as exc:
        return {}, {"*": "STACKDOCTOR_TORCH_ASK is not JSON: %s" % last_line(exc)}
    if not isinstance(questions, dict):
        return {}, {"*": "STACKDOCTOR_TORCH_ASK is not a JSON object"}
    for kind, api in sorted(questions.items()):
        if isinstance(api, dict):  # {"api": "npu", "needs": "torch_npu"}: asked only where that module is installed
            needs, api = api.get("needs"), api.get("api")
            if needs and importlib.util.find_spec(str(needs)) is None:
                continue
        if not isinstance(api, str) or not api:
            errors[str(kind)] = "no torch module named"
            continue
        module = torch
        try:
            for part in api.split("."):
                module = getattr(module, part, None)
                if module is None:
                    break
            if module is None:
                errors[str(kind)] = "torch has no torch.%s" % api
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                answer = bool(module.is_available())
            available[str(kind)] = answer
            if not answer and caught:
                errors[str(kind)] = str(caught[-1].message).strip()[:1000]
        except Exception as exc:
            available[str(kind)] = False
            errors[str(kind)] = last_line(exc)
    return available, errors


CONFIG_KEYS = ("BLAS_INFO", "LAPACK_INFO", "CUDA_VERSION", "CUDNN_VERSION", "USE_CUDA", "USE_CUDNN", "USE_ROCM", "USE_MKLDNN", "USE_NCCL", "USE_MPI", "USE_GLOO", "TORCH_VERSION", "CXX_COMPILER")


def config_essentials(text):
    out = {}
    for line in text.splitlines():
        line = line.strip().lstrip("- ").strip()
        if line.startswith("Build settings:"):
            for item in line[len("Build settings:"):].split(","):
                if "=" in item:
                    k, v = item.split("=", 1)
                    if k.strip() in CONFIG_KEYS:
                        out[k.strip()] = v.strip()
        elif ":" in line and line.split(":", 1)[0] in ("GCC", "C++ Version", "Intel(R) oneAPI Math Kernel Library Version", "OpenMP", "CPU capability usage", "CUDA Runtime", "CuDNN", "Magma", "HIP Runtime", "MIOpen"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
        elif line.startswith("CPU capability usage") or line.startswith("GCC "):
            out[line.split(" ")[0]] = line
    return out


def main():
    try:
        emit("python", python_facts())
    except Exception as exc:
        emit("python", {"error": last_line(exc)})
    facts, torch = torch_facts()
    emit("torch", facts)
    mode = os.environ.get("STACKDOCTOR_KERNELS", "")
    if torch is not None and mode in ("quick", "quick+compile"):
        try:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import sd_kernels

            emit("kernels", sd_kernels.run_quick(torch, with_compile=mode == "quick+compile"))
        except Exception as exc:
            emit("kernels", {"ran": False, "mode": "quick", "error": last_line(exc)})
    emit("done", {})


if __name__ == "__main__":
    main()
