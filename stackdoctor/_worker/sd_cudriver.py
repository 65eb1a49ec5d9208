"""stackdoctor driver worker: which CUDA version the installed NVIDIA driver supports.

Run by stackdoctor as ``<python> sd_cudriver.py`` in a child process (standard library
only, so any Python 3 works). It loads the driver library with ctypes (``libcuda.so.1``;
``nvcuda.dll`` on Windows), asks ``cuDriverGetVersion`` (which needs no ``cuInit``) and prints
that at once, then calls ``cuInit(0)`` (unless ``STACKDOCTOR_CUDRIVER_INIT=0``) and prints its
result code separately, so a driver that hangs or crashes in initialisation still leaves the version::

    @@stackdoctor@@ {"section": "cudriver", "library": "libcuda.so.1", "version_rc": 0, "version": 12040, ...}
    @@stackdoctor@@ {"section": "cuinit", "rc": 100, "name": "CUDA_ERROR_NO_DEVICE", ...}

A library that cannot be loaded is one line with ``"error"``. Must stay importable by every
Python 3 the parent may meet (3.8+ syntax).
"""

import ctypes
import json
import os
import sys

MARK = "@@stackdoctor@@ "


def emit(section, data):
    data = dict(data)
    data["section"] = section
    sys.stdout.write(MARK + json.dumps(data) + "\n")
    sys.stdout.flush()


def candidates():
    if os.name == "nt":
        return ["nvcuda.dll"]
    if sys.platform == "darwin":
        return ["/usr/local/cuda/lib/libcuda.dylib", "libcuda.dylib"]
    return ["libcuda.so.1", "libcuda.so"]


def loaded_path(name):
    """Where the dynamic loader found ``name`` (Linux: /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split(None, 5)[-1].strip() if len(line.split(None, 5)) == 6 else ""
                if os.path.basename(path).startswith(name.split(".so")[0] + ".so"):
                    return path
    except (OSError, ValueError):
        pass
    return None


def error_name(lib, rc):
    fn = getattr(lib, "cuGetErrorName", None)
    if fn is None:
        return None
    out = ctypes.c_char_p()
    try:
        if fn(ctypes.c_int(rc), ctypes.byref(out)) == 0 and out.value:
            return out.value.decode("ascii", "replace")
    except (OSError, ValueError, TypeError, ctypes.ArgumentError):
        return None
    return None


def main():
    errors = []
    lib = None
    used = None
    for name in candidates():
        try:
            lib = ctypes.CDLL(name)
            used = name
            break
        except OSError as exc:
            text = str(exc)
            errors.append(text if name in text else f"{name}: {text}")
    if lib is None:
        emit("cudriver", {"library": None, "error": "; ".join(errors) or "no driver library to try", "not_found": True})
        return
    info = {"library": used, "path": loaded_path(used)}
    fn = getattr(lib, "cuDriverGetVersion", None)
    if fn is None:
        info["error"] = f"{used} has no cuDriverGetVersion"
        emit("cudriver", info)
        return
    version = ctypes.c_int(0)
    rc = int(fn(ctypes.byref(version)))
    info["version_rc"] = rc
    info["version"] = int(version.value) if rc == 0 else None
    if rc != 0:
        info["version_rc_name"] = error_name(lib, rc)
    emit("cudriver", info)
    if os.environ.get("STACKDOCTOR_CUDRIVER_INIT") == "0":  # the version only (cuInit starts every GPU)
        return
    init = getattr(lib, "cuInit", None)
    if init is None:
        emit("cuinit", {"rc": None, "error": f"{used} has no cuInit"})
        return
    rc = int(init(ctypes.c_uint(0)))
    emit("cuinit", {"rc": rc, "name": "CUDA_SUCCESS" if rc == 0 else error_name(lib, rc)})


if __name__ == "__main__":
    main()
