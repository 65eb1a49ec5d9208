"""Property tests (hypothesis) for the reliability issue (7).

- Every ``parse_*`` function in ``stackdoctor/probes/*.py`` (found by introspection, so a new
  parser is covered the day it lands) never raises on arbitrary text: random unicode, random
  bytes decoded the way ``System.run`` decodes them, and shuffled/mutated lines of real outputs.
- Real recorded outputs (tests/fixtures/real) parse to the same facts after the noise a real
  terminal capture has around them: a shell prompt line before, blank lines or a prompt after.
- Facts -> JSON -> facts round-trips for arbitrary facts (strategies built from the dataclasses
  in stackdoctor/model/facts.py), and so does a whole report through ``report_from_data``.
- Every report built from arbitrary facts validates against the shipped JSON Schema.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import json
import pkgutil
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import pytest
from binfixtures import bundle, ccob, elf, fatbin, fatbin_entry, pe
from helpers import validate_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stackdoctor.probes as probes_pkg
from stackdoctor.binaries import binfmt
from stackdoctor.model import facts as F
from stackdoctor.model.report import Finding, ProbeStatus, Report, report_from_data

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------- discovery


def discover_parsers() -> dict[str, Callable[..., Any]]:
    """``module.parse_x`` -> function, for every parser defined in a probe: stackdoctor/probes/*.py and each kind's
    modules in stackdoctor/accelerators/<kind>/ (named by the subject their old probe module had: ``nvidia``,
    ``rocm`` ...)."""
    import stackdoctor.accelerators as kinds_pkg

    old_names = {"amd.probe": "rocm", "nvidia.probe": "nvidia", "apple.probe": "apple", "intel.probe": "intel", "jetson.probe": "jetson",
                 "nvidia.toolkit": "cuda_toolkit", "nvidia.libraries": "nvidia_libraries", "nvidia.gpu_join": "nvidia_witnesses", "nvidia.cudriver": "cudriver", "nvidia.nvml": "nvml"}
    modules = [(info.name, f"{probes_pkg.__name__}.{info.name}") for info in pkgutil.iter_modules(probes_pkg.__path__)]
    modules += [(short, f"{kinds_pkg.__name__}.{inside}") for inside, short in old_names.items()]  # the built-in kinds' probes
    modules.append(("_worker", "stackdoctor._worker"))  # the parent's side of the workers' protocol
    modules.append(("pci", "stackdoctor.kinds.pci"))  # the display devices every kind's probe reads
    modules.append(("buildtools", "stackdoctor.install.buildtools"))  # the source build's tools
    modules.append(("buildtools", "stackdoctor.accelerators.nvidia.build_tools"))  # and NVIDIA's (cuDNN's header)
    found: dict[str, Callable[..., Any]] = {}
    for short, module in modules:
        mod = importlib.import_module(module)
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.startswith("parse_") and fn.__module__ == mod.__name__:
                found[f"{short}.{name}"] = fn
    return found


PARSERS = discover_parsers()


def test_parsers_are_discovered():
    # the probes exist and have parsers; the count is what README's "Reliability" section quotes
    assert len(PARSERS) >= 40, sorted(PARSERS)
    assert "nvidia.parse_smi_table" in PARSERS and "rocm.parse_rocminfo" in PARSERS


def call(fn: Callable[..., Any], text: str, extra: list[str]) -> Any:
    """Call a parser with ``text`` first; any other required positional parameter gets a string too."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty][1:]
    return fn(text, *[extra[i % len(extra)] for i in range(len(params))])


# ---------------------------------------------------------------------------- arbitrary text never raises


def _real_lines() -> list[str]:
    lines: list[str] = []
    for p in sorted(REAL.glob("*/*")):
        if p.name != "source.md" and p.is_file():
            lines.extend(p.read_text(encoding="utf-8", errors="replace").splitlines()[:400])
    return lines or ["NVIDIA-SMI 550.40.07"]


REAL_LINES = _real_lines()

texts = st.one_of(
    st.text(max_size=2000),
    st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace")),
    # tool-shaped: real lines, shuffled, cut, with random junk spliced in
    st.lists(
        st.one_of(st.sampled_from(REAL_LINES), st.sampled_from(REAL_LINES).map(lambda s: s[: len(s) // 2]), st.text(max_size=80)),
        max_size=60,
    ).map("\n".join),
    # structured-looking junk: JSON and CSV fragments, separators, numbers
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20), lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=10), c, max_size=5), max_leaves=20).map(json.dumps),
    st.lists(st.sampled_from(["|", "+---", ":", ",", " ", "\t", "=", "0x", "gfx", "sm_", "N/A", "[N/A]", "ERR!", "MiB", "@@stackdoctor@@ {", "\n", "\r\n", "12.4", "-1"]), max_size=200).map("".join),
)


@pytest.mark.parametrize("name", sorted(PARSERS))
@PROPS
@given(text=texts, extra=st.lists(st.text(max_size=30), min_size=1, max_size=3))
def test_parser_never_raises_on_arbitrary_text(name, text, extra):
    call(PARSERS[name], text, extra)


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parser_survives_large_hostile_input(name):
    """A 2 MB line-less blob and 100 000 short lines: parsed (or ignored) without raising."""
    fn = PARSERS[name]
    call(fn, "|" * 2_000_000, ["x"])
    call(fn, "GPU 0: \n" * 100_000, ["x"])


# ---------------------------------------------------------------------------- real outputs with capture noise

# (case, file, parser): every real fixture in tests/fixtures/real that a probe parser reads
REAL_CASES = [
    ("c05-v100sxm2-32gb-driver525-linux", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("c06-wsl2-rtx3060laptop-driver546-cuda-err", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("c10-8xb200-driver610-kmd-umd-header", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("c14-rtx4070-driver550-linux", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("c36-rtx3070-driver470-cuda114-ubuntu", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("c18-nvml-mismatch-570-open-p2p-ubuntu2204", "nvidia-smi.txt", "nvidia.parse_smi_failure"),
    ("c40-proc-driver-nvidia-version-open-565-ubuntu2404", "proc_driver_nvidia_version.txt", "nvidia.parse_proc_driver_version"),
    ("local-nvcc-13.0-linux", "nvcc_version.txt", "cuda_toolkit.parse_nvcc_version"),
    ("pytorch-builder-580-nvcc-11.1", "nvcc_version.txt", "cuda_toolkit.parse_nvcc_version"),
    ("c22-linux-boltctl-razer-core-tb3-egpu", "boltctl.txt", "thunderbolt_parse.parse_boltctl"),
    ("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt", "thunderbolt_parse.parse_system_profiler"),
    ("c51-intel-mac-t2-ifconfig-bridge0-4-thunderbolt-ports", "ifconfig.txt", "thunderbolt_parse.parse_ifconfig"),
    ("tb-macbook-networksetup-two-thunderbolt-ports", "networksetup.txt", "thunderbolt_parse.parse_networksetup_hardware_ports"),
    ("tb-mlx-docs-m3ultra-ibv_devices", "ibv_devices.txt", "thunderbolt_parse.parse_ibv_devices"),
    ("tb-macbook-m5max-to-studio-m3ultra-tb5-system_profiler-json", "macbook.json", "thunderbolt_parse.parse_system_profiler_json"),
    ("tb-macbook-m5max-to-studio-m3ultra-tb5-system_profiler-json", "studio.json", "thunderbolt_parse.parse_system_profiler_json"),
    ("c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override", "rocminfo.txt", "rocm.parse_rocminfo"),
    ("c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override", "rocm_agent_enumerator.txt", "rocm.parse_rocm_agent_enumerator"),
    ("c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override", "rocm-smi-showhw.txt", "rocm.parse_rocm_smi_showhw"),
    ("c30-8xmi300x-gfx942-rocm633-rocminfo-sclk", "rocminfo.txt", "rocm.parse_rocminfo"),
    ("r-mi300x-container-kfd-invalid-argument-4043", "rocminfo.txt", "rocm.parse_rocminfo"),
    ("r-rocminfo-kfd-cannot-allocate-rocminfo-41", "rocminfo.txt", "rocm.parse_rocminfo"),
    ("r-rocminfo-kfd-permission-denied-rocm-docker-116", "rocminfo.txt", "rocm.parse_rocminfo"),
    ("r-amd-smi-version-mi300x-k8s-157", "amd-smi-version.txt", "rocm.parse_amd_smi_version"),
    ("r-amd-smi-static-mi350x-rocm-systems-2987", "amd-smi-static.txt", "rocm.parse_amd_smi_static"),
    ("r-amd-smi-list-mi210-rocm-systems-3654", "amd-smi-list.txt", "rocm.parse_amd_smi_list"),
    ("r-kfd-topology-gfx1151-strix-halo-lemonade-419", "properties.txt", "rocm.parse_kfd_properties"),
    ("r-proc-nvidia-gpus-information-l4-snapd-14893", "information.txt", "nvidia.parse_proc_gpu_information"),
    ("r-proc-nvidia-gpus-information-gtx650-lxd-3950", "information.txt", "nvidia.parse_proc_gpu_information"),
    ("r-proc-nvidia-gpus-information-h100-535", "information.txt", "nvidia.parse_proc_gpu_information"),
    ("local-h200-driver580-open-proc-gpus", "information.txt", "nvidia.parse_proc_gpu_information"),
    ("local-h200-driver580-open-proc-gpus", "proc_driver_nvidia_version.txt", "nvidia.parse_proc_driver_version"),
    ("local-h200-driver580-open-proc-gpus", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("r-hipconfig-version", "hipconfig-v-n-rocm600.txt", "rocm.parse_hipconfig_version"),
    ("r-hipconfig-version", "hipconfig-version-ubuntu-hipcc-rocm.txt", "rocm.parse_hipconfig_version"),
    ("c32-jetson-nano-jetbot-l4t-r32.3.1", "nv_tegra_release.txt", "jetson.parse_nv_tegra_release"),
    ("r-os-release-ubuntu2404-k8s-157", "os-release.txt", "platform.parse_os_release"),
    ("r-wsl-kernel-releases", "proc-version-wsl2.txt", "platform.parse_proc_version"),
    ("r-sw_vers-catalina-ruby-build-1451", "sw_vers.txt", "platform.parse_sw_vers"),
    ("r-sw_vers-high-sierra-kernelpop-17", "sw_vers.txt", "platform.parse_sw_vers"),
    ("m01-macbook-m1-macos-12.7.6-sw_vers", "sw_vers.txt", "platform.parse_sw_vers"),
    ("w01-win10-quadro-rtx8000-tcc-p2000-wddm-442-nvsmi-folder", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("w01-win10-quadro-rtx8000-tcc-p2000-wddm-442-nvsmi-folder", "ver.txt", "platform.parse_windows_version"),
    ("w02-win-rtx3050-laptop-560-wddm-driver-model-column", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("w03-win-nvcc-11.8-system32-prompt", "nvcc-version.txt", "cuda_toolkit.parse_nvcc_version"),
    ("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt", "thunderbolt_parse.parse_system_profiler_text"),
    ("r-titanv-rtx5880ada-driver570-query-triton-8070", "nvidia-smi-L.txt", "nvidia.parse_smi_list"),
    ("r-2x-quadro-rtx4000-driver535-nvidia-smi-L-akash-12", "nvidia-smi-L.txt", "nvidia.parse_smi_list"),
    ("r-4xa100-mig-nvidia-smi-L-telegraf-5812", "nvidia-smi-L.txt", "nvidia.parse_smi_list"),
    ("doc-amd-smi-list-8xmi300x-oci-hpc-oke", "amd-smi-list.txt", "rocm.parse_amd_smi_list"),
    ("doc-amd-smi-list-8xmi300x-oci-hpc-oke", "amd-smi-list.txt", "rocm.parse_amd_smi_version"),
    ("r-mi300x-container-kfd-invalid-argument-4043", "rocm-smi-showallinfo.txt", "rocm.parse_rocm_smi_kv"),
    ("r-proc-1-cgroup-docker-ctrsploit-280", "proc-1-cgroup.txt", "platform.parse_cgroup_container"),
    ("r-cpuinfo-raspberry-pi-4b-fastfetch-1529", "cpuinfo.txt", "platform.parse_cpuinfo"),
    ("r-meminfo-openwrt-arm-sysinfo-164", "meminfo.txt", "platform.parse_meminfo_total_mib"),
    ("r-ip-json-addr-cloud-init-testdata", "ip-json-addr-show.json", "thunderbolt_parse.parse_ip_addr_json"),
    ("local-build-machine-proc-net-and-pci-sysfs", "proc-net-if_inet6.txt", "thunderbolt_parse.parse_proc_if_inet6"),
    ("local-build-machine-proc-net-and-pci-sysfs", "pci-0000-00-03.0-uevent.txt", "pci.parse_uevent_driver"),
    ("local-sd-target-torch-2.13.0-cpu", "sd_target.txt", "_worker.parse_sections"),
]

PROMPTS = ["$ {cmd}\n", "user@host:~$ {cmd}\n", "root@gpu-node-01:/# {cmd}\n", "(base) PS C:\\Users\\me> {cmd}\n", "% {cmd}\n", ""]
TRAILERS = ["", "\n", "\n\n\n", "   \n", "\n$ \n", "\nuser@host:~$ \n"]


def _commands(fname: str) -> str:
    return Path(fname).stem.replace("_", " ").replace("-", " ")


def plain(value: Any) -> Any:
    """A parser's result as plain data (dataclasses included)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def same_facts(base: Any, noisy: Any, where: str = "") -> None:
    """Every fact in ``base`` is in ``noisy`` with the same value (a dict may gain keys the noise made)."""
    if isinstance(base, dict):
        assert isinstance(noisy, dict), where
        for k, v in base.items():
            assert k in noisy, f"{where}.{k} lost"
            same_facts(v, noisy[k], f"{where}.{k}")
    else:
        assert base == noisy, f"{where}: {base!r} != {noisy!r}"


def _nonempty(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_nonempty(v) for v in value.values())
    if isinstance(value, list):
        return any(_nonempty(v) for v in value)
    return value not in (None, "", False)


@pytest.mark.parametrize(("case", "fname", "parser"), REAL_CASES, ids=[f"{c[:24]}/{f}" for c, f, _ in REAL_CASES])
@settings(max_examples=25, deadline=None)
@given(prompt=st.sampled_from(PROMPTS), trailer=st.sampled_from(TRAILERS), blank_before=st.integers(0, 2))
def test_real_output_parses_the_same_with_capture_noise(case, fname, parser, prompt, trailer, blank_before):
    path = REAL / case / fname
    if not path.exists():
        pytest.fail(f"{case}/{fname} is missing from tests/fixtures/real")
    text = path.read_text(encoding="utf-8", errors="replace")
    fn = PARSERS[parser]
    base = plain(fn(text))
    assert _nonempty(base), f"{parser} finds nothing in {case}/{fname}: the pairing is wrong"
    if fname.endswith(".json"):
        # the JSON document is the whole stdout: only blank lines around it are realistic
        prompt = ""
        trailer = trailer if not trailer.strip() else "\n"
    noisy = "\n" * blank_before + prompt.format(cmd=_commands(fname)) + text + trailer
    same_facts(base, plain(fn(noisy)), parser)


# ---------------------------------------------------------------------------- facts round trip

JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=12)

_STRATS: dict[Any, st.SearchStrategy[Any]] = {}


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """A hypothesis strategy for a facts.py type annotation (dataclasses recursively)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return st.one_of([strategy_for(a) for a in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    if origin is list:
        (inner,) = typing.get_args(tp)
        return st.lists(strategy_for(inner), max_size=3)
    if origin is dict:
        _, inner = typing.get_args(tp)
        return st.dictionaries(st.text(max_size=12), strategy_for(inner), max_size=3)
    if tp is Any:
        return JSON_VALUES
    if tp is str:
        return st.text(max_size=24)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-(2**53), 2**53)
    if tp is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if dataclasses.is_dataclass(tp):
        if tp not in _STRATS:
            hints = typing.get_type_hints(tp, globalns=vars(F))
            _STRATS[tp] = st.builds(tp, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp)})
        return _STRATS[tp]
    raise AssertionError(f"no strategy for {tp!r}: extend strategy_for")


FACTS = strategy_for(F.Facts)
SUBJECT_TYPES = sorted({t for t in vars(F).values() if dataclasses.is_dataclass(t) and isinstance(t, type)}, key=lambda t: t.__name__)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(facts=FACTS)
def test_facts_json_round_trip(facts):
    text = json.dumps(F.to_data(facts))
    back = F.from_data(F.Facts, json.loads(text))
    assert back == facts


@pytest.mark.parametrize("cls", SUBJECT_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_facts_dataclass_round_trips(cls, data):
    value = data.draw(strategy_for(cls))
    assert F.from_data(cls, json.loads(json.dumps(F.to_data(value)))) == value


FINDINGS = st.builds(
    Finding,
    code=st.from_regex(r"[a-z][a-z0-9-]{0,30}", fullmatch=True),
    severity=st.sampled_from(["ok", "warn", "fail"]),
    title=st.text(max_size=40),
    detail=st.text(max_size=80),
    fix=st.none() | st.text(max_size=40),
    layer=st.none() | st.sampled_from(["python", "torch", "runtime", "driver", "gpu", "platform", "network"]),
    facts=st.lists(st.text(max_size=20), max_size=3),
)
PROBE_STATUS = st.builds(
    ProbeStatus,
    name=st.sampled_from(["target", "platform", "nvidia", "cuda_toolkit", "rocm", "apple", "intel", "jetson", "thunderbolt"]),
    status=st.sampled_from(["ok", "error", "timeout", "skipped"]),
    duration_s=st.floats(0, 1e4, allow_nan=False),
    error=st.none() | st.text(max_size=60),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(facts=FACTS, findings=st.lists(FINDINGS, max_size=4), probes=st.lists(PROBE_STATUS, max_size=4))
def test_report_validates_and_replays(facts, findings, probes):
    from stackdoctor.core.redact import safe_data

    report = Report(facts=facts, findings=findings, probes=probes)
    # The document round-trips exactly; what leaves stackdoctor (to_json) is that document through the
    # output boundary's redaction, which masks text shaped like a credential (a generated "a:b@c" too).
    data = json.loads(json.dumps(report.to_data(), ensure_ascii=False))
    validate_report(data)
    back = report_from_data(data, origin="property")
    assert back.facts == facts and back.findings == findings and back.probes == probes
    assert back.to_data()["facts"] == data["facts"]
    shown = json.loads(report.to_json())
    validate_report(shown)
    assert safe_data(shown) == shown  # redaction is idempotent: a replayed report says the same


# ---------------------------------------------------------------------------- binary formats (stackdoctor.binaries.binfmt)
# The static torch probe reads libraries a user's machine may have truncated, corrupted or
# replaced: every reader takes arbitrary bytes without raising, and the large hostile inputs
# below (counts and sizes at their maximum, sections of padding, containers of empty entries)
# finish because every loop advances and every count is capped.


def _all_readers(data: bytes) -> None:
    fh = io.BytesIO(data)
    table = binfmt.read_sections(fh)
    assert isinstance(table, binfmt.SectionTable)
    for off, size in ((0, len(data)), (3, len(data)), (0, 2**63), (len(data) // 2, 64)):
        assert isinstance(binfmt.walk_fatbin(fh, off, size), binfmt.FatbinResult)
        assert isinstance(binfmt.walk_offload_bundles(fh, off, size), binfmt.BundlesResult)
        assert isinstance(binfmt.walk_offload_bundles(fh, off, size, zstd=lambda d, n: d[:n]), binfmt.BundlesResult)
    binfmt.parse_bundle_header(data)
    for sec in table.sections[:8]:
        binfmt.read_sycl_image(fh, sec)
        binfmt.walk_fatbin(fh, sec.offset, sec.size)


_VALID = [
    elf([(".nv_fatbin", fatbin([fatbin_entry(2, 90), fatbin_entry(1, 120, 0x8011, b"ptx")]))]),
    elf([(".hip_fatbin", bundle([("host-x86_64-unknown-linux-gnu-", b""), ("hipv4-amdgcn-amd-amdhsa--gfx942", b"x")], align=64))], bits=32, endian=">"),
    pe([(".nv_fatb", fatbin([fatbin_entry(2, 80)])), (".text", b"\xc3")], long_names=True),
    fatbin([fatbin_entry(2, 75)], [fatbin_entry(2, 100, header_size=112)]),
    ccob(bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b"y")], align=0), version=2),
    b"!<arch>\n" + b"64.12.60.7/     0           0     0     644     4         `\n\x7fELF",
]


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    b = bytearray(data)
    for pos, val in edits:
        if b:
            b[pos % len(b)] = val
    return bytes(b[: max(0, len(b) - cut)])


@PROPS
@given(data=st.binary(max_size=4096))
def test_binary_readers_never_raise_on_arbitrary_bytes(data):
    _all_readers(data)
    _all_readers(b"\x7fELF\x02\x01\x01" + data)
    _all_readers(b"MZ" + data)


@PROPS
@given(base=st.sampled_from(_VALID), edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=12), cut=st.integers(0, 200))
def test_binary_readers_never_raise_on_mutated_real_layouts(base, edits, cut):
    _all_readers(_mutate(base, edits, cut))


def test_binary_readers_survive_large_hostile_input():
    # 4 MB of padding, of repeated empty containers, and of headers that claim the maximum
    zeros = b"\0" * (4 << 20)
    _all_readers(zeros)
    empty = (0xBA55ED50).to_bytes(4, "little") + (1).to_bytes(2, "little") + (16).to_bytes(2, "little") + (0).to_bytes(8, "little")
    many = empty * (200_000 + 10)  # more containers than the cap
    res = binfmt.walk_fatbin(io.BytesIO(many), 0, len(many))
    assert res.truncated and res.containers == binfmt.MAX_FATBIN_CONTAINERS
    tiny = fatbin([fatbin_entry(2, 90, payload=b"")] * 60_000)
    res = binfmt.walk_fatbin(io.BytesIO(tiny), 0, len(tiny))
    assert len(res.entries) == 60_000 and res.error is None
    claims = b"__CLANG_OFFLOAD_BUNDLE__" + (2**64 - 1).to_bytes(8, "little") + b"\xff" * (1 << 20)
    assert binfmt.parse_bundle_header(claims)[1]
    _all_readers(claims)
    shnum = bytearray(elf([(".text", b"")]))
    shnum[0x3C:0x3E] = (0xFFFF).to_bytes(2, "little")  # 65535 sections claimed, a few present
    _all_readers(bytes(shnum))
    junk_then_magic = b"\x01" * (4 << 20) + b"__CLANG_OFFLOAD_BUNDLE__"
    res = binfmt.walk_offload_bundles(io.BytesIO(junk_then_magic), 0, len(junk_then_magic))
    assert len(res.bundles) == 1  # found by a chunked scan, not byte by byte
