"""Redaction: secrets planted in the environment, in paths, in the host name and in raw tool
outputs never survive; replacements are stable and keep their kind; findings survive.

The machine is synthetic (built here) except the raw outputs taken from real recorded tool
outputs in tests/fixtures/real (ifconfig of an Intel Mac, system_profiler of a Mac mini,
rocminfo of an MI300X box, boltctl of a Razer Core), which carry real MACs, UUIDs and UIDs.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import real_fixture

from stackdoctor import kinds
from stackdoctor.config import Requirements
from stackdoctor.core.redact import Redactor, address_family, address_kind, is_secret_name, redact_report, redact_text
from stackdoctor.model.facts import (
    Facts,
    KernelFacts,
    KernelResult,
    NetInterface,
    NvidiaFacts,
    NvidiaGpu,
    PlatformFacts,
    PythonFacts,
    RocmFacts,
    RocmGpu,
    ThunderboltFacts,
    ThunderboltPort,
    TorchFacts,
)
from stackdoctor.model.report import Finding, ProbeStatus, Report, report_from_data

HOST = "gpu-node-17.corp.example.com"
USER = "alicezhang"
GPU_UUID = "GPU-5f8a0c2d-21f3-c8e6-1234-abcdefabcdef"
SERIAL = "1320219016353"
SECRETS = {
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "GITHUB_TOKEN": "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "OPENAI_API_KEY": "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "SLACK_BOT": "xoxb-1234567890-abcdefghij",
    "GH_PAT": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "SESSION_COOKIE": "s%3Aabcdef.ghijkl",
    "DB_PASSWORD": "hunter2hunter2",
}
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
URL_PASSWORD = "pipS3cretPw"
IPS = ["10.20.30.40", "192.168.64.1", "169.254.17.3", "52.14.200.7", "fe80::aede:48ff:fe00:1122"]
MAC = "3c:22:fb:a1:b2:c3"


def planted_facts() -> Facts:
    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64", os_id="ubuntu", os_name="Ubuntu 22.04.4 LTS", os_version="22.04", hostname=HOST)
    f.python = PythonFacts(
        executable=f"/home/{USER}/proj/.venv/bin/python", version="3.11.7", env_kind="venv", env_prefix=f"/home/{USER}/proj/.venv"
    )
    f.nvidia = NvidiaFacts(
        driver_version="550.54.14",
        cuda_driver_version="12.4",
        smi_state="ok",
        gpus=[NvidiaGpu(index=0, name="NVIDIA A100-SXM4-80GB", uuid=GPU_UUID, compute_capability="8.0", serial=SERIAL, memory_total_mib=81920)],
    )
    f.rocm = RocmFacts(gpus=[RocmGpu(index=0, name="AMD Instinct MI300X", gfx="gfx942", uuid="GPU-8af705259683161c")])
    f.torch = TorchFacts(
        installed=True,
        version="2.6.0+cu124",
        variant="cu124",
        cuda="12.4",
        cuda_available=True,
        device_count=1,
        location=f"/home/{USER}/proj/.venv/lib/python3.11/site-packages/torch",
        distributions={"nvidia-cudnn-cu12": "9.1.0.70", "torch": "2.6.0+cu124"},
    )
    f.thunderbolt = ThunderboltFacts(
        present=True,
        ports=[ThunderboltPort(name="Thunderbolt 5 bus 0", peer=f"{USER}'s Mac Studio", domain_uuid="7F158861-C131-4D0D-83B6-CA50EF76C32B")],
        interfaces=[NetInterface(name="bridge0", kind="thunderbolt-bridge", addresses=["169.254.17.3", "fe80::aede:48ff:fe00:1122"], mac=MAC)],
    )
    f.kernels = KernelFacts(ran=True, results=[KernelResult(kernel="matmul", device="cuda:0", ok=True)])
    f.environment = {
        **SECRETS,
        "PATH": f"/home/{USER}/.local/bin:/usr/local/cuda/bin:/usr/bin",
        "CUDA_VISIBLE_DEVICES": GPU_UUID,
        "MASTER_ADDR": "10.20.30.40",
        "PIP_INDEX_URL": f"https://{USER}:{URL_PASSWORD}@pypi.corp.example.com/simple",
        "NCCL_SOCKET_IFNAME": "bridge0",
    }
    return f


def raw(argv: list[str], stdout: str, stderr: str = "", rc: int = 0) -> dict:
    return {"argv": argv, "returncode": rc, "status": "ok", "signal": None, "duration_s": 0.01, "truncated": False, "detail": "", "stdout": stdout, "stderr": stderr}


def planted_report() -> Report:
    facts = planted_facts()
    rep = Report(facts=facts)
    rep.probes = [ProbeStatus("nvidia", "ok", 0.2), ProbeStatus("jetson", "skipped", 0.0, "not available in this build")]
    rep.findings = [
        Finding("driver-ok", "ok", "Driver 550.54.14 runs CUDA 12.4", layer="driver"),
        Finding(
            "nvcc-mismatch",
            "warn",
            "nvcc 11.8 differs from torch's CUDA 12.4",
            detail=f"/home/{USER}/cuda-11.8/bin/nvcc on {HOST} is 11.8",
            fix=f"export PATH=/usr/local/cuda-12.4/bin:$PATH  # on {HOST.split('.')[0]}",
            layer="runtime",
        ),
        Finding("gpu-ecc", "fail", f"GPU 0 ({GPU_UUID}) has pending retired pages", detail=f"serial {SERIAL}", fix="reset the GPU", layer="gpu"),
    ]
    rep.raw_outputs = [
        raw(["hostname", "-f"], HOST + "\n"),
        raw(["nvidia-smi", "-L"], f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {GPU_UUID})\n"),
        raw(["nvidia-smi", "-q"], f"    Serial Number                         : {SERIAL}\n    GPU UUID                              : {GPU_UUID}\n"),
        raw(["env"], "\n".join(f"{k}={v}" for k, v in SECRETS.items()) + f"\nAUTH_HEADER=Bearer {JWT}\n"),
        raw(["ip", "addr"], f"2: eth0: <UP> link/ether {MAC.upper()} brd ff:ff:ff:ff:ff:ff\n    inet 10.20.30.40/24 brd 10.20.30.255\n    inet 52.14.200.7/32\n"),
        raw(["/home/alicezhang/proj/.venv/bin/python", "-c", "..."], "", f"Traceback: File \"/home/{USER}/proj/x.py\"\nPermissionError on {HOST.split('.')[0].upper()}\n", rc=1),
        raw(["ifconfig"], real_fixture("c51-intel-mac-t2-ifconfig-bridge0-4-thunderbolt-ports", "ifconfig.txt")),
        raw(["system_profiler", "SPThunderboltDataType"], real_fixture("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt")),
        raw(["rocminfo"], real_fixture("c30-8xmi300x-gfx942-rocm633-rocminfo-sclk", "rocminfo.txt")),
        raw(["boltctl"], real_fixture("c22-linux-boltctl-razer-core-tb3-egpu", "boltctl.txt")),
    ]
    rep.requirements = {"source": f"/home/{USER}/proj/pyproject.toml", "values": Requirements(min_gpus=1).to_data()}
    return rep


def planted_values() -> list[str]:
    """Every identifying or secret value planted above (case-insensitive checks)."""
    vals = [HOST, HOST.split(".")[0], USER, GPU_UUID, GPU_UUID[4:], SERIAL, JWT, URL_PASSWORD, MAC, *IPS, *SECRETS.values()]
    # from the real outputs
    vals += ["78:4f:43:97:06:ac", "d2:00:a0:43:10:00", "192.168.64.1", "fe80::4443:d3a7:3d8f:d17b", "0x05AC897E0A474D02", "7F158861-C131-4D0D-83B6-CA50EF76C32B"]
    vals += ["GPU-8af705259683161c", "c0030000-00a2-8508-2219-f4d4d2c1a918"]
    return vals


def assert_clean(text: str, where: str) -> None:
    low = text.lower()
    leaks = [v for v in planted_values() if v.lower() in low]
    assert not leaks, f"{where} leaks {leaks}"


def test_nothing_planted_survives_in_json():
    data = planted_report().to_data()
    before = json.dumps(data, ensure_ascii=False)
    assert all(v.lower() in before.lower() for v in planted_values()), "the plant is incomplete"
    out = redact_report(data, ids=kinds.device_ids())
    assert_clean(json.dumps(out, ensure_ascii=False), "redacted JSON")
    assert json.dumps(data, ensure_ascii=False) == before, "the input must not be modified"


def test_replacements_are_stable_and_keep_the_kind():
    out = redact_report(planted_report().to_data(), ids=kinds.device_ids())
    f = out["facts"]
    host = f["platform"]["hostname"]
    assert host == "<host-1>"
    text = json.dumps(out)
    # the short and full host name are the same token wherever they occur
    assert f"{host}\\n" in out["raw_outputs"][0]["stdout"].replace("\n", "\\n")
    assert "on <host-1> is 11.8" in out["findings"][1]["detail"] and "# on <host-1>" in out["findings"][1]["fix"]
    gpu = f["nvidia"]["gpus"][0]["uuid"]
    assert gpu == "GPU-<gpu-uuid-1>" and f["environment"]["CUDA_VISIBLE_DEVICES"] == gpu and gpu in out["raw_outputs"][1]["stdout"]
    assert f["nvidia"]["gpus"][0]["serial"].startswith("<serial-")
    assert f["python"]["executable"] == "<home>/proj/.venv/bin/python"
    assert f["environment"]["PATH"] == "<home>/.local/bin:/usr/local/cuda/bin:/usr/bin"
    assert f["environment"]["MASTER_ADDR"] == "<ip-private-1>"
    assert f["thunderbolt"]["interfaces"][0]["addresses"] == ["<ip-linklocal-1>", "<ip6-linklocal-1>"]
    assert [address_kind(a) for a in f["thunderbolt"]["interfaces"][0]["addresses"]] == ["linklocal", "linklocal"]
    assert [address_family(a) for a in f["thunderbolt"]["interfaces"][0]["addresses"]] == [4, 6]
    assert (address_kind("<ip-linklocal-3>/16"), address_family("<ip6-private-1>/64"), address_kind("10.1.2.3/8")) == ("linklocal", 6, "private")
    assert address_kind("<host-1>") is None and address_family("9.1.0.70.1") is None
    assert f["thunderbolt"]["interfaces"][0]["mac"] == "<mac-1>" and "<mac-1>" in out["raw_outputs"][4]["stdout"]
    assert "<ip-public-1>" in out["raw_outputs"][4]["stdout"]
    assert f["environment"]["PIP_INDEX_URL"] == "https://<credentials-1>@pypi.corp.example.com/simple"
    for name in SECRETS:
        assert re.fullmatch(r"<[a-z\-]+-\d+>", f["environment"][name]), (name, f["environment"][name])
    # what must not change: versions (9.1.0.70 is not an address), names, capabilities
    assert f["torch"]["distributions"]["nvidia-cudnn-cu12"] == "9.1.0.70"
    assert f["nvidia"]["driver_version"] == "550.54.14" and f["nvidia"]["gpus"][0]["compute_capability"] == "8.0"
    assert f["platform"]["os_id"] == "ubuntu" and f["environment"]["NCCL_SOCKET_IFNAME"] == "bridge0"
    assert re.findall(r"GPU-[^<]", text) == [] and "<uuid-" in text


def test_redacted_report_loads_and_replays_to_the_same_findings():
    from stackdoctor.matrix import load_matrix
    from stackdoctor.rules.diagnose import diagnose

    m = load_matrix([])
    rep = planted_report()
    back = report_from_data(redact_report(rep.to_data(), ids=kinds.device_ids()))
    reqs = Requirements(torch=">=2.6", backend="cuda", min_gpus=1, compute_capability=">=8.0", kernels=["matmul"])
    after = [(x.code, x.severity) for x in diagnose(back.facts, m, requirements=reqs)]
    assert after == [(x.code, x.severity) for x in diagnose(rep.facts, m, requirements=reqs)]
    assert [c for c in after if c[0].startswith("requirement")] == [("requirements-ok", "ok")]
    assert [(x.code, x.severity) for x in back.findings] == [(x.code, x.severity) for x in rep.findings]
    assert [(x.code, x.severity) for x in diagnose(back.facts, m)] == [(x.code, x.severity) for x in diagnose(rep.facts, m)]


def test_generic_host_and_user_names_do_not_eat_the_facts():
    rep = planted_report()
    rep.facts.platform.hostname = "ubuntu"
    rep.facts.python.executable = "/home/cuda/.venv/bin/python"
    rep.raw_outputs.append(raw(["whoami"], "cuda\n"))
    out = redact_report(rep.to_data(), ids=kinds.device_ids())
    assert out["facts"]["platform"]["hostname"] == "<host-1>"
    assert out["facts"]["platform"]["os_id"] == "ubuntu" and out["facts"]["platform"]["os_name"].startswith("Ubuntu")
    assert out["facts"]["torch"]["cuda"] == "12.4" and out["facts"]["torch"]["variant"] == "cu124"
    assert out["facts"]["python"]["executable"] == "<home>/.venv/bin/python"
    assert out["raw_outputs"][-1]["stdout"] == "<user>\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("C:\\Users\\Bob Smith\\AppData\\python.exe", "<home>\\AppData\\python.exe"),
        ("/Users/bob/Library/x", "<home>/Library/x"),
        ("inet 127.0.0.1 netmask 0xff000000", "inet <ip-loopback-1> netmask 0xff000000"),
        ("bind 0.0.0.0:29500", "bind 0.0.0.0:29500"),
        ("inet6 ::1 prefixlen 128", "inet6 <ip6-loopback-1> prefixlen 128"),
        ("pci 0000:01:00.0 at 21:32:15", "pci 0000:01:00.0 at 21:32:15"),
        ("Authorization: Bearer abcdefghijklmnop0123456789", "Authorization: Bearer <secret-1>"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "<private-key-1>"),
        ("use_auth_token=True", "use_auth_token=True"),
    ],
)
def test_redact_text_cases(text, expected):
    assert redact_text(text) == expected


def test_secret_names():
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "MY_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "NPM_AUTH", "KEY", "SSH_KEY", "SESSION_ID", "COOKIE"):
        assert is_secret_name(name), name
    for name in ("PATH", "CUDA_VISIBLE_DEVICES", "PIP_KEYRING_PROVIDER", "NCCL_IB_HCA", "MONKEY", "HSA_OVERRIDE_GFX_VERSION", "LD_LIBRARY_PATH"):
        assert not is_secret_name(name), name


def test_tokens_shared_across_one_redactor_only():
    r = Redactor()
    assert r.text("10.0.0.1 and 10.0.0.1 and 10.0.0.2") == "<ip-private-1> and <ip-private-1> and <ip-private-2>"
    assert Redactor().text("10.0.0.2") == "<ip-private-1>"
    assert r.counts == {"ip-private": 2}


# ---------------------------------------------------------------------------- invariance over every known scenario

from pathlib import Path  # noqa: E402

MACHINES = Path(__file__).resolve().parent / "fixtures" / "machines"


def plant(f: Facts) -> None:
    """Add identifying values and secrets where a scenario left the field empty."""
    f.platform.hostname = f.platform.hostname or HOST
    if not f.python.executable or not f.python.executable.startswith("/home/"):
        f.python.executable = f"/home/{USER}/proj/.venv/bin/python"
    for i, g in enumerate(f.nvidia.gpus):
        g.uuid = g.uuid or f"GPU-{i:08x}-21f3-c8e6-1234-abcdefabcdef"
        g.serial = g.serial or f"13202190163{i:02d}"
    for name, value in SECRETS.items():
        f.environment.setdefault(name, value)
    f.environment.setdefault("PIP_INDEX_URL", f"https://{USER}:{URL_PASSWORD}@pypi.corp.example.com/simple")
    f.environment.setdefault("LD_LIBRARY_PATH", f"/home/{USER}/lib")


def _scenarios() -> list:
    import test_diagnose as td

    return [pytest.param(p.values[1], id=p.id) for p in td.TRIGGER]


def _judge(rep: Report) -> list[tuple[str, str]]:
    from stackdoctor.matrix import load_matrix
    from stackdoctor.pipeline import Options, judge

    return [(f.code, f.severity) for f in judge(rep, Options(replay="report.json"), load_matrix([])).findings]


@pytest.mark.parametrize("change", _scenarios())
def test_every_diagnosis_scenario_survives_redaction(change):
    import test_diagnose as td

    from stackdoctor.matrix import load_matrix

    m = load_matrix([])
    f = td.healthy(m)
    probes = change(f, m)
    plant(f)
    rep = Report(facts=f, probes=list(probes or []))
    red = report_from_data(redact_report(rep.to_data(), ids=kinds.device_ids()))
    assert_clean(red.to_json(), "redacted scenario")
    assert _judge(red) == _judge(report_from_data(rep.to_data()))


@pytest.mark.parametrize("path", sorted(MACHINES.glob("*.json")), ids=lambda p: p.stem)
def test_every_machine_gives_the_same_findings_and_plan_after_redaction(path):
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import from_data
    from stackdoctor.model.plan import Request
    from stackdoctor.reconcile import reconcile
    from stackdoctor.resolve import resolve

    f = from_data(Facts, json.loads(path.read_text(encoding="utf-8"))["facts"])
    plant(f)
    rep = Report(facts=f)
    r = Redactor()
    red = report_from_data(redact_report(rep.to_data(), r, ids=kinds.device_ids()))
    assert _judge(red) == _judge(report_from_data(rep.to_data()))
    m = load_matrix([])
    pa, pb = resolve(reconcile(rep.facts, m), m, Request()), resolve(reconcile(red.facts, m), m, Request())
    # the same plan; values naming this machine (CUDA_VISIBLE_DEVICES=GPU-...) carry the same tokens
    assert (pa.torch_version, pa.variant, pa.index_url) == (pb.torch_version, pb.variant, pb.index_url)
    assert {k: r.text(v, in_facts=True) for k, v in pa.env.items()} == pb.env
    assert [(r.variant, r.reason) for r in pa.rejected] == [(r.variant, r.reason) for r in pb.rejected]


def test_redaction_is_idempotent():
    once = redact_report(planted_report().to_data(), ids=kinds.device_ids())
    assert redact_report(once, ids=kinds.device_ids()) == once


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_secret = st.one_of(
    st.text(_ALNUM, min_size=34, max_size=40).map(lambda s: "hf_" + s),
    st.text(_ALNUM, min_size=36, max_size=40).map(lambda s: "ghp_" + s),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(1, 254)).map(lambda t: f"10.{t[0]}.{t[1]}.{t[2]}"),
    st.tuples(st.integers(0, 255), st.integers(1, 254)).map(lambda t: f"169.254.{t[0]}.{t[1]}"),
    st.lists(st.sampled_from("0123456789abcdef"), min_size=12, max_size=12).map(lambda h: ":".join("".join(h[i : i + 2]) for i in range(0, 12, 2))).filter(lambda m: m not in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff")),
    st.uuids().map(lambda u: f"GPU-{u}"),
)


@settings(max_examples=300, deadline=None)
@given(before=st.text(max_size=30), sep1=st.sampled_from(" \n\t=\"'(,"), secret=_secret, sep2=st.sampled_from(" \n\t\"'),;"), after=st.text(max_size=30))
def test_planted_values_never_survive_in_any_surrounding_text(before, sep1, secret, sep2, after):
    out = redact_text(before + sep1 + secret + sep2 + after)
    assert secret.lower() not in out.lower()


def test_no_pattern_backtracks_on_pathological_tool_output():
    """Raw outputs reach 4 MiB: a quadratic pattern would take minutes on these (generous bound)."""
    import time

    cases = ["lorem " * 70000, "lorem-" * 70000, "1." * 200000, "ab:" * 130000, "sk-" + "aaaa-" * 80000 + "!", "uid uid " * 50000, "::" * 200000, "GPU-" * 100000]
    start = time.monotonic()
    for text in cases:
        redact_text(text)
    assert time.monotonic() - start < 60


def test_public_address_in_1_to_9_slash_8_is_redacted_where_text_says_address():
    from stackdoctor.core.redact import Redactor

    r = Redactor()
    out = r.text("inet 8.8.4.4 netmask 0xffffff00 broadcast 8.8.4.255\nMASTER_ADDR=3.14.15.92\nssh://root@5.6.7.8/")
    assert "8.8.4.4" not in out and "3.14.15.92" not in out and "5.6.7.8" not in out
    assert r.text("3.14.15.92/24") != "3.14.15.92/24"
    # versions keep their shape
    assert r.text("nvidia-cudnn-cu12 9.1.0.70") == "nvidia-cudnn-cu12 9.1.0.70"
    assert r.text("cuDNN version 9.1.0.70 loaded") == "cuDNN version 9.1.0.70 loaded"


# ---------------------------------------------------------------------------- the output boundary (issue 21)

from stackdoctor.core.redact import MASK, escape_controls, fix_undecodable, has_credentials, redact_url, safe_data, scrub  # noqa: E402


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:s3cr3t@host/simple", "https://alice:****@host/simple"),  # pip's redact_auth_from_url form
        ("https://ghp_tok3n@host/simple", "https://****@host/simple"),  # a token alone: no user to keep
        ("https://host/simple?private_token=glp4t&page=2", "https://host/simple?private_token=****&page=2"),
        ("https://h/x?access_token=a1b2&job_token=c3d4&token=e5f6", "https://h/x?access_token=****&job_token=****&token=****"),
        ("https://acct.blob.core.windows.net/w/?sv=2022-11-02&sig=AbC%2Bd3", "https://acct.blob.core.windows.net/w/?sv=2022-11-02&sig=****"),
        (
            "https://b.s3.amazonaws.com/w/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAX%2F2026&X-Amz-Security-Token=IQoJ&X-Amz-Signature=9f8e",
            "https://b.s3.amazonaws.com/w/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=****&X-Amz-Security-Token=****&X-Amz-Signature=****",
        ),
        ("https://h/x?KEY=v4lue&Password=pw&secret=s&signature=sg", "https://h/x?KEY=****&Password=****&secret=****&signature=****"),
        ("http://bob:pr0xy@proxy.corp:3128", "http://bob:****@proxy.corp:3128"),
        ("https://download.pytorch.org/whl/cu130?variant=cpu", "https://download.pytorch.org/whl/cu130?variant=cpu"),
    ],
)
def test_urls_lose_their_credentials_but_say_they_had_them(url, shown):
    assert redact_url(url) == shown == scrub(url)
    assert has_credentials(url) is (shown != url)
    assert redact_url(shown) == shown  # idempotent: a redacted URL stays as it is


def test_scrub_catches_credentials_in_free_text():
    text = "cannot connect to gina:pw9Xz@127.0.0.1:9 for PIP_EXTRA_INDEX_URL='https://h/s?private_token=abc123' HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWx"
    out = scrub(text)
    assert "pw9Xz" not in out and "abc123" not in out and "hf_AbCd" not in out
    assert "gina:****@127.0.0.1:9" in out and "private_token=****" in out
    assert scrub("mail git@github.com, torch 2.6.0+cu124") == "mail git@github.com, torch 2.6.0+cu124"


def test_secret_values_of_the_environment_go_wherever_they_show(monkeypatch):
    monkeypatch.setenv("DB_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("PIP_INDEX_URL", "https://alice:Qw3rtyPass@idx.example/simple")
    out = scrub("pip said: hunter2hunter2 / password Qw3rtyPass for alice (percent-less)")
    assert "hunter2hunter2" not in out and "Qw3rtyPass" not in out and out.count(MASK) == 2


def test_escape_controls_and_undecodable_bytes():
    assert escape_controls("2.1\x1b]0;owned\x07\x1b[2J") == "2.1\\x1b]0;owned\\x07\\x1b[2J"
    assert escape_controls("a\r\nb\u202ec\x9b") == "a\\r\\nb\\u202ec\\x9b"
    assert escape_controls("line 1\nline\t2\r", lines=True) == "line 1\nline\t2\\r"
    assert fix_undecodable("/tmp/venv-\udcff/bin") == "/tmp/venv-\\xff/bin"
    assert fix_undecodable("/tmp/venv-\udcff").encode("utf-8")


def test_safe_data_masks_secret_names_and_keeps_the_fact():
    doc = {"environment": {"HF_TOKEN": "anything", "AWS_SECRET_ACCESS_KEY": "x" * 8, "PATH": "/usr/bin", "UV_KEYRING_PROVIDER": "subprocess"},
           "url": "http://u:p4ss@h/simple", "path": "/v-\udcff", "sources": {"APIKEY": "0"}}
    out = safe_data(doc)
    assert out["sources"] == {"APIKEY": "0"}  # only variables are judged by their names
    assert out["environment"] == {"HF_TOKEN": MASK, "AWS_SECRET_ACCESS_KEY": MASK, "PATH": "/usr/bin", "UV_KEYRING_PROVIDER": "subprocess"}
    assert out["url"] == "http://u:****@h/simple" and out["path"] == "/v-\\xff"
    assert json.loads(json.dumps(out, ensure_ascii=False).encode("utf-8"))


def test_bundle_redactor_uses_the_same_rules_for_query_secrets():
    """The bundle used to keep query tokens and the S3 session token/signature; it now replaces them (stable tokens)."""
    f = Facts()
    f.environment = {
        "PIP_EXTRA_INDEX_URL": "https://gitlab.corp/api/v4/projects/7/packages/pypi/simple?private_token=glpatQQQ111",
        "PIP_FIND_LINKS": "https://b.s3.amazonaws.com/w/?X-Amz-Security-Token=IQoJSESSION&X-Amz-Signature=abcdef0123&sig=AzureSig1",
        "UV_INDEX": "https://x/simple?access_token=acc3ss&job_token=j0btok",
    }
    out = json.dumps(redact_report(Report(facts=f).to_data(), ids=kinds.device_ids()))
    for secret in ("glpatQQQ111", "IQoJSESSION", "abcdef0123", "AzureSig1", "acc3ss", "j0btok"):
        assert secret not in out
    assert "private_token=<secret-" in out and "X-Amz-Signature=<secret-" in out


def test_a_home_outside_slash_home_is_replaced_on_whole_components(monkeypatch):
    """HOME=/srv/x/home/alice.smith: the bundle used to say /srv/x<home>/proj (a prefix replacement)."""
    monkeypatch.setenv("HOME", "/srv/x/home/alice.smith")
    f = Facts()
    f.python = PythonFacts(executable="/srv/x/home/alice.smith/proj/.venv/bin/python", env_prefix="/srv/x/home/alice.smithy/env")
    out = redact_report(Report(facts=f).to_data(), ids=kinds.device_ids())
    assert out["facts"]["python"]["executable"] == "<home>/proj/.venv/bin/python"
    assert out["facts"]["python"]["env_prefix"] == "/srv/x/home/alice.smithy/env"  # another folder, not this home
    assert "<home>" not in json.dumps(out).replace('"<home>/proj', "")
