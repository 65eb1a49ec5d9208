"""Which CUDA version the NVIDIA driver supports, asked of the driver library itself.

A child process (``stackdoctor/_worker/sd_cudriver.py``, standard library only) loads
``libcuda.so.1`` / ``nvcuda.dll`` and calls ``cuDriverGetVersion`` (no ``cuInit`` needed),
then ``cuInit(0)``, and prints both results on marked lines. It runs through
:meth:`System.run <stackdoctor.system.System.run>` with a timeout, so a driver that hangs or
crashes in initialisation costs at most that and never takes stackdoctor with it. This
replaces torch's CUDA initialisation for the "can this driver run that CUDA" question.

The parser is pure; nothing here judges.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackdoctor._worker import worker_path
from stackdoctor.system import System


@dataclass
class DriverCuda:
    """What the driver library said. ``version``: "12.4" (from 12040) or None."""

    version: str | None = None
    version_int: int | None = None  # 12040
    library: str | None = None  # the name that loaded: "libcuda.so.1"
    path: str | None = None  # where the loader found it, when known
    init_rc: int | None = None  # cuInit(0)'s CUresult (0: success, 100: no device, ...)
    init_error: str | None = None  # its name: "CUDA_ERROR_NO_DEVICE"
    not_found: bool = False  # no driver library could be loaded
    error: str | None = None


def cuda_version_string(value: int) -> str | None:
    """12040 -> "12.4" (the CUDA_VERSION encoding: 1000 * major + 10 * minor)."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or value >= 1_000_000:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def parse_cudriver_output(text: str) -> DriverCuda:
    """The marked lines of ``sd_cudriver.py`` -> :class:`DriverCuda`. Never raises.

    >>> parse_cudriver_output('@@stackdoctor@@ {"section": "cudriver", "library": "libcuda.so.1", "version_rc": 0, "version": 12040}').version
    '12.4'
    """
    from stackdoctor._worker import parse_sections  # the workers' one protocol: marked JSON sections

    out = DriverCuda()
    sections = parse_sections(text)
    drv = sections.get("cudriver")
    if drv is None:
        out.error = "the driver worker printed no result"
        return out
    lib, path, err = drv.get("library"), drv.get("path"), drv.get("error")
    out.library = lib if isinstance(lib, str) else None
    out.path = path if isinstance(path, str) else None
    out.not_found = drv.get("not_found") is True
    out.error = err[:1000] if isinstance(err, str) else None
    version, rc = drv.get("version"), drv.get("version_rc")
    if isinstance(version, int) and not isinstance(version, bool) and rc == 0:
        out.version_int = version
        out.version = cuda_version_string(version)
        if out.version is None:
            out.error = out.error or f"cuDriverGetVersion returned an implausible version {version}"
    elif isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
        name = drv.get("version_rc_name")
        out.error = out.error or f"cuDriverGetVersion failed with {name if isinstance(name, str) else rc}"
    init = sections.get("cuinit")
    if init is not None:
        irc = init.get("rc")
        if isinstance(irc, int) and not isinstance(irc, bool):
            out.init_rc = irc
            name = init.get("name")
            out.init_error = None if irc == 0 else (name if isinstance(name, str) else f"CUresult {irc}")
        elif isinstance(init.get("error"), str):
            out.init_error = init["error"][:1000]
    return out


def query_driver_cuda(system: System, python: str, timeout: float = 10.0, *, init: bool = True) -> DriverCuda:
    """Run the driver worker with ``python`` (any Python 3) and parse what it said. Never raises.

    ``init=False`` asks only ``cuDriverGetVersion`` (no ``cuInit``, which starts every GPU and can take
    seconds on a large machine): the NVIDIA probe's witness of the driver's CUDA level."""
    env = {"PYTHONIOENCODING": "utf-8", "STACKDOCTOR_CUDRIVER_INIT": None if init else "0"}
    res = system.run([python, str(worker_path("sd_cudriver.py"))], timeout=timeout, env=env)
    out = parse_cudriver_output(res.stdout)
    if res.status == "timeout":
        where = "after cuDriverGetVersion, in cuInit" if out.version else "before answering"
        out.init_error = out.init_error or f"the driver did not answer in {res.detail} s ({where})"
        if out.version is None:
            out.error = f"the driver worker did not answer in {res.detail} s"
    elif not res.ok and out.error == "the driver worker printed no result":
        out.error = f"the driver worker failed: {res.describe_failure() or res.status}"
    elif res.signal is not None and out.init_rc is None and out.version is not None:
        out.init_error = out.init_error or f"cuInit crashed the worker ({res.detail})"
    return out


def driver_cuda_version(system: System, python: str, timeout: float = 10.0) -> tuple[str | None, str | None]:
    """("12.4", None) when the driver answered; (None, "why not") otherwise."""
    out = query_driver_cuda(system, python, timeout)
    if out.version:
        return out.version, None
    if out.not_found:
        return None, f"no NVIDIA driver library: {out.error}" if out.error else "no NVIDIA driver library"
    return None, out.error or "the driver reported no version"
