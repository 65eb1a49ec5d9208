"""What leaves stackdoctor is safe (issue 21): no credential in any output, nothing hostile reaches the terminal.

The canary: every credential form users keep is planted at once (pip.conf ``index-url`` with userinfo, a GitLab
``?private_token=`` index in ``PIP_EXTRA_INDEX_URL``, a pre-signed S3 find-links URL, ``UV_INDEX`` and ``uv.toml``
indexes with userinfo, a proxy password, HF / GitHub / AWS tokens), then every output is searched for the secret
values: ``check`` in every format and ``-v``, ``install --dry-run`` (screen, ``--json``, each ``--emit``, pip and
uv), one real install from a server on 127.0.0.1 that refuses requests without the pip.conf credentials (real pip
into a real venv; the wheels are GENERATED stand-ins, NOT PyTorch), ``report``, ``diff`` (screen and ``--json``),
and ``/proc/<pid>/cmdline`` of every process the install starts, polled while it runs.

Only the index on 127.0.0.1 is real; the other planted sources point at a closed port on 127.0.0.1 (no traffic
leaves 127.0.0.0/8), and the proxy is bypassed for 127.0.0.1 with ``NO_PROXY``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import console_script, new_venv, run_stackdoctor  # noqa: E402
from sourceserver import SourceServer  # noqa: E402
from test_install import family, isolated_env, py  # noqa: E402

T13 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
DEAD = "http://127.0.0.1:9"

# the secret values: none may appear in any output
PIP_PW = "pipconfPw7Qx2"
GITLAB = "glprivTok4Kd9Zr"
S3_TOKEN = "IQoJb3JpZ2luS3sessionTok9"
S3_SIG = "e3b0c44298fc1c149afbf4c8996fb924"
UV_PW = "uvEnvPw5Lm3"
UVTOML_PW = "uvTomlPw8Nq1"
PROXY_PW = "proxyPw6Rt0"
HF = "hf_CanaryCanaryCanaryCanary0123"
GH = "ghp_CanaryCanaryCanaryCanary012345678"
AWS = "wJalrXUtnFEMIcanaryK7MDENGbPxRfiCY"
SECRETS = (PIP_PW, GITLAB, S3_TOKEN, S3_SIG, UV_PW, UVTOML_PW, PROXY_PW, HF, GH, AWS)

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")


# ---------------------------------------------------------------------------- argv: no credential on it


def test_delivery_moves_credentialed_urls_from_argv_to_the_environment():
    """The sources stackdoctor adds go to pip/uv through their variables when they carry credentials (with what the
    option would have been combined with: the configured extras that answered), otherwise as options, as before."""
    from stackdoctor.resolve.availability import Probe, deliver_pip, deliver_uv
    from stackdoctor.wheels.sources import InstallerConfig, Source

    secret = Source("https://alice:pw1@idx.corp/whl/cpu", "index", "pytorch", "added", configured=False)
    links = Source("https://b.s3.amazonaws.com/w/?X-Amz-Signature=sig1", "links", "links", "added", configured=False)
    plain = Source("https://download.pytorch.org/whl/cpu", "index", "pytorch", "added", configured=False)
    extra = Source("https://extra.corp/simple", "index", "extra", "pip.conf")
    cfg = InstallerConfig("pip", [Source("https://pypi.org/simple", "index", "default", "pip's default"), extra])
    probes = [Probe(src, "ok") for src in cfg.sources]
    d = deliver_pip(cfg, probes, [plain, secret, links], no_index=False, offline=False)
    assert not [a for a in d.args if "pw1" in a or "sig1" in a], d.args
    # the whole option moves, with the configured extra it adds to (an env value replaces pip.conf's)
    assert d.env["PIP_EXTRA_INDEX_URL"] == f"{extra.url} {plain.url} {secret.url}" and d.env["PIP_FIND_LINKS"] == links.url
    uv = deliver_uv(InstallerConfig("uv", []), [], [secret, links], no_index=False, offline=False)
    assert not [a for a in uv.args if "pw1" in a or "sig1" in a], uv.args
    assert uv.env["UV_INDEX"] == secret.url and uv.env["UV_FIND_LINKS"] == links.url
    clean = deliver_pip(cfg, probes, [plain], no_index=False, offline=False)
    assert "PIP_EXTRA_INDEX_URL" not in clean.env and clean.args == ["--extra-index-url", plain.url]  # no credentials: as before


def test_install_argv_never_holds_a_credential():
    from stackdoctor.install.argv import credentials_out_of_argv

    argv = ["/v/bin/python", "-m", "pip", "install", "torch==2.13.0+cpu", "--index-url", "https://a:pw2@i/whl/cpu", "--find-links", "/wheels"]
    out, env = credentials_out_of_argv(argv, {"PIP_FIND_LINKS": " "}, "pip")
    assert out == ["/v/bin/python", "-m", "pip", "install", "torch==2.13.0+cpu", "--find-links", "/wheels"]
    assert env == {"PIP_FIND_LINKS": " ", "PIP_INDEX_URL": "https://a:pw2@i/whl/cpu"}
    uv = ["uv", "pip", "install", "--python", "/p", "torch", "--index-url", "https://i/whl?token=t0k", "--find-links", "https://f/?sig=s1"]
    out, env = credentials_out_of_argv(uv, None, "uv")
    assert out == ["uv", "pip", "install", "--python", "/p", "torch"]
    assert env == {"UV_DEFAULT_INDEX": "https://i/whl?token=t0k", "UV_FIND_LINKS": "https://f/?sig=s1"}
    assert credentials_out_of_argv(argv[:5], None, "pip") == (argv[:5], None)


# ---------------------------------------------------------------------------- the canary


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


@pytest.fixture(scope="module")
def src():
    s = SourceServer(auth={"/torch/": ("alice", PIP_PW)}).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def world(src, tmp_path_factory):
    """A user's environment with every credential form planted, and a venv to install into."""
    d = tmp_path_factory.mktemp("canary")
    venv = d / "venv"
    new_venv(venv)
    index = src.torch_index().replace("http://", f"http://alice:{PIP_PW}@") + "/cpu"
    s3 = f"{DEAD}/bucket/wheels/?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAQCANARY0000000000%2F20261201&X-Amz-Security-Token={S3_TOKEN}&X-Amz-Signature={S3_SIG}"
    conf = d / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {index}\nfind-links = {s3}\n")
    uvtoml = d / "uv.toml"
    uvtoml.write_text(
        f'[[index]]\nname = "corp"\nurl = "http://gina:{UVTOML_PW}@127.0.0.1:9/simple"\n\n[[index]]\nname = "torch"\nurl = "{index}"\n'
    )
    env = isolated_env(d)
    env.pop("PIP_INDEX_URL", None)
    env.pop("UV_NO_CONFIG", None)
    env.update(
        PIP_CONFIG_FILE=str(conf),
        PIP_EXTRA_INDEX_URL=f"{DEAD}/api/v4/projects/7/packages/pypi/simple?private_token={GITLAB}",
        UV_INDEX=f"http://erin:{UV_PW}@127.0.0.1:9/uv/simple",
        UV_CONFIG_FILE=str(uvtoml),
        HTTPS_PROXY=f"http://bob:{PROXY_PW}@127.0.0.1:9",
        HTTP_PROXY=f"http://bob:{PROXY_PW}@127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        HF_TOKEN=HF,
        GITHUB_TOKEN=GH,
        AWS_SECRET_ACCESS_KEY=AWS,
        STACKDOCTOR_INDEX_BASE=f"{DEAD}/whl",
        STACKDOCTOR_MATRIX="",
        NO_COLOR="1",
        COLUMNS="100",
    )
    # the index really requires the credentials
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{src.torch_index()}/cpu/torch/", timeout=10)
    assert refused.value.code == 401
    return d, venv, env


def sd(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    p = run_stackdoctor([*console_script(), *args], env=env, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def files_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.is_file())


def test_canary_no_credential_in_any_output(world, src):
    d, venv, env = world
    out = d / "out"
    out.mkdir()
    found: dict[str, list[str]] = {}
    runs = 0

    def run(name: str, args: list[str], *, ok: tuple[int, ...] = (0, 1)) -> subprocess.CompletedProcess:
        nonlocal runs
        runs += 1
        p = sd(args, env, d)
        assert p.returncode in ok, (name, p.returncode, p.stderr[-2000:])
        text = p.stdout + p.stderr
        bad = leaks(text)
        if bad:
            found[name] = [text[max(0, text.index(s) - 120) : text.index(s) + 40] for s in bad]
        return p

    target = ["--python", py(venv)]
    run("check", ["check", *target])
    run("check -v", ["check", "-v", *target])
    for fmt in ("json", "markdown", "github", "junit"):
        run(f"check --format {fmt}", ["check", *target, "--format", fmt, "-o", str(out / f"check.{fmt}")])
    j = run("check --json", ["check", *target, "--json"])
    (out / "a.json").write_text(j.stdout)
    env_facts = json.loads(j.stdout)["facts"]["environment"]
    # that the credentials were there stays a fact
    assert env_facts["PIP_EXTRA_INDEX_URL"].endswith("?private_token=****")
    assert env_facts["UV_INDEX"] == "http://erin:****@127.0.0.1:9/uv/simple"
    assert env_facts["HTTPS_PROXY"] == "http://bob:****@127.0.0.1:9"
    for installer in ("pip", "uv"):
        inst = [*target, "--installer", installer, "--dry-run", "--torch", "2.13.0", "--variant", "cpu"]
        run(f"install {installer} --dry-run", ["install", *inst])
        run(f"install {installer} --dry-run --json", ["install", *inst, "--json"])
        for emit in ("requirements", "uv", "environment.yml"):
            run(f"install {installer} --emit {emit}", ["install", *inst, "--emit", emit])
    report = run("report", ["report", *target, "--no-kernels", "-o", str(out / "bundle")], ok=(0,))
    assert (out / "bundle" / "report.json").is_file(), report.stderr
    # a second report from another venv, so diff has index URLs and environments to show side by side
    env_b = dict(env, PIP_EXTRA_INDEX_URL=f"{DEAD}/other/simple?private_token={GITLAB}x")
    b = sd(["check", *target, "--json"], env_b, d)
    (out / "b.json").write_text(b.stdout)
    assert not leaks(b.stdout + b.stderr)
    run("diff", ["diff", str(out / "a.json"), str(out / "b.json")])
    run("diff --json", ["diff", str(out / "a.json"), str(out / "b.json"), "--json"])

    # the real install: the index refuses requests without alice's password; its argv never holds it
    seen: list[str] = []
    stop = threading.Event()
    # --index-base with credentials: the PyTorch index stackdoctor adds to the installer's sources needs them
    base = src.torch_index().replace("http://127.0.0.1", f"http://alice:{PIP_PW}@localhost")
    proc = subprocess.Popen([*console_script(), "install", *target, "--yes", "--torch", "2.13.0", "--variant", "cpu", "--index-base", base],
                            env=env, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def poll() -> None:
        while not stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) in (os.getpid(), proc.pid):  # stackdoctor's own argv is the user's
                    continue
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                # stackdoctor's own argv (and a child's between fork and exec) is what the user typed
                if str(venv) in cmd and "bin/stackdoctor" not in cmd and cmd not in seen:
                    seen.append(cmd)
            time.sleep(0.005)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        stop.set()
        t.join()
    assert proc.returncode == 0, stderr[-3000:]
    assert family(venv) == {"torch": "2.13.0+cpu"}
    assert src.count("/torch/whl/cpu/files/torch-2.13.0") >= 1, dict(src.hits)  # it came from the guarded index
    installer_runs = [c for c in seen if " pip install " in c and "torch==2.13.0+cpu" in c]
    assert installer_runs, seen  # the poll saw the installer child, so its silence below means something
    if leaks(stdout + stderr):
        found["install"] = leaks(stdout + stderr)
    cmd_leaks = [c for c in seen if leaks(c)]
    assert not cmd_leaks, cmd_leaks
    file_leaks = leaks(files_text(out))
    assert not found and not file_leaks, (found, file_leaks)
    print(f"canary: {runs + 2} runs, {len(SECRETS)} secrets, {len(seen)} child command lines polled, 0 occurrences")
