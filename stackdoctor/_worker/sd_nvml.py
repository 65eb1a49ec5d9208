"""stackdoctor NVML worker: asks NVML (nvidia-ml-py, imported as ``pynvml``) about the driver and GPUs.

Run by stackdoctor as ``<python> sd_nvml.py`` in a child process with a timeout, because NVML can
hang or crash inside a broken driver. Prints one JSON document (parsed by
``stackdoctor.accelerators.nvidia.nvml.parse_nvml_output``). stdlib + pynvml only; it honours PYTHONPATH, so
tests can put a fake pynvml first. Constants are literal so a minimal binding works:
NVML_CLOCK_SM = 1, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0.

On Windows pynvml loads nvml.dll from %WINDIR%\\System32 (DCH drivers), else from
%ProgramFiles%\\NVIDIA Corporation\\NVSMI (nvidia-ml-py's _LoadNvmlLibrary); both come from the
environment this worker inherits. The driver model (nvmlDeviceGetDriverModel: current, pending;
NVML_DRIVER_WDDM = 0, NVML_DRIVER_WDM = 1 (TCC), NVML_DRIVER_MCDM = 2) is Windows-only: elsewhere
NVML answers NotSupported, which leaves it None.
"""
import json
import sys

out = {"state": "ok", "error": None, "error_class": None, "system": {}, "gpus": [], "device_count": None}
BENIGN = ("NVMLError_FunctionNotFound", "NVMLError_NotSupported")

def text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v

def emit():
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()

try:
    import pynvml
except BaseException as exc:
    out["state"] = "absent"
    out["error_class"] = type(exc).__name__
    out["error"] = "nvidia-ml-py (pynvml) is not importable: %s: %s" % (type(exc).__name__, exc)
    emit()
    sys.exit(0)

def q(errors, key, name, *args):
    """The one choke point for NVML calls: the value, or None (error kept in errors unless benign)."""
    fn = getattr(pynvml, name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception as exc:
        cls = type(exc).__name__
        if cls not in BENIGN and errors is not None:
            errors[key] = "%s: %s" % (name, str(exc) or cls)
        return None

try:
    pynvml.nvmlInit()
except BaseException as exc:
    cls = type(exc).__name__
    out["state"] = {"NVMLError_LibraryNotFound": "absent", "NVMLError_DriverNotLoaded": "no-driver",
                    "NVMLError_LibRmVersionMismatch": "lib-mismatch"}.get(cls, "error")
    out["error_class"] = cls
    out["error"] = str(exc) or cls
    emit()
    sys.exit(0)

sysd = out["system"]
serr = {}
sysd["driver_version"] = text(q(serr, "driver_version", "nvmlSystemGetDriverVersion"))
sysd["nvml_version"] = text(q(serr, "nvml_version", "nvmlSystemGetNVMLVersion"))
cuda = q(serr, "cuda_driver_version", "nvmlSystemGetCudaDriverVersion_v2")
sysd["cuda_driver_version_fn"] = "nvmlSystemGetCudaDriverVersion_v2"
if cuda is None and "cuda_driver_version" not in serr:
    cuda = q(serr, "cuda_driver_version", "nvmlSystemGetCudaDriverVersion")
    sysd["cuda_driver_version_fn"] = "nvmlSystemGetCudaDriverVersion"
sysd["cuda_driver_version"] = cuda
sysd["errors"] = serr
count = q(serr, "device_count", "nvmlDeviceGetCount")
out["device_count"] = count
for i in range(count or 0):
    errs = {}
    g = {"index": i, "errors": errs}
    out["gpus"].append(g)
    h = q(errs, "handle", "nvmlDeviceGetHandleByIndex", i)
    if h is None:
        continue
    g["name"] = text(q(errs, "name", "nvmlDeviceGetName", h))
    g["uuid"] = text(q(errs, "uuid", "nvmlDeviceGetUUID", h))
    cc = q(errs, "compute_capability", "nvmlDeviceGetCudaComputeCapability", h)
    g["compute_capability"] = "%d.%d" % (cc[0], cc[1]) if cc else None
    mem = q(errs, "memory_total_mib", "nvmlDeviceGetMemoryInfo", h)
    g["memory_total_bytes"] = getattr(mem, "total", None)
    pci = q(errs, "bus_id", "nvmlDeviceGetPciInfo", h)
    g["bus_id"] = text(getattr(pci, "busId", None)) if pci is not None else None
    g["pcie_gen"] = q(errs, "pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h)
    g["pcie_width"] = q(errs, "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", h)
    g["pcie_gen_max"] = q(errs, "pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h)
    g["pcie_width_max"] = q(errs, "pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h)
    g["power_limit_mw"] = q(errs, "power_limit_w", "nvmlDeviceGetPowerManagementLimit", h)
    mig = q(errs, "mig_mode", "nvmlDeviceGetMigMode", h)
    g["mig_mode"] = mig[0] if mig else None
    g["persistence_mode"] = q(errs, "persistence_mode", "nvmlDeviceGetPersistenceMode", h)
    g["serial"] = text(q(errs, "serial", "nvmlDeviceGetSerial", h))
    g["max_sm_clock_mhz"] = q(errs, "max_sm_clock_mhz", "nvmlDeviceGetMaxClockInfo", h, 1)
    g["ecc_uncorrected"] = q(errs, "ecc_uncorrected", "nvmlDeviceGetTotalEccErrors", h, 1, 0)
    g["retired_pages_pending"] = q(errs, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h)
    model = q(errs, "driver_model", "nvmlDeviceGetDriverModel", h)
    if model is None and "driver_model" not in errs:  # a driver without the _v2 entry point
        model = q(errs, "driver_model", "nvmlDeviceGetDriverModel_v1", h)
    g["driver_model"] = model[0] if model else None
    reasons = q(errs, "throttle_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:
        reasons = q(errs, "throttle_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
    g["throttle_mask"] = reasons
try:
    pynvml.nvmlShutdown()
except BaseException:
    pass
emit()
