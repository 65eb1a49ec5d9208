"""The index check against a real HTTP index on 127.0.0.1 (tests/indexserver.py).

The wheels served are SYNTHETIC (generated, a few hundred bytes, "fake torch"), named like
the real ones; the HTML anchor format is download.pytorch.org's (astral-sh/uv#13195).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from indexserver import IndexServer  # noqa: E402

from stackdoctor.core.errors import ExitCode, IndexError_  # noqa: E402
from stackdoctor.model.facts import Facts  # noqa: E402
from stackdoctor.model.plan import Plan, PlannedPackage, Request  # noqa: E402
from stackdoctor.wheels import index  # noqa: E402

TAGS = ["cp311-cp311-manylinux_2_36_x86_64", "cp311-cp311-manylinux_2_28_x86_64", "cp311-cp311-linux_x86_64", "py3-none-manylinux_2_28_x86_64"]


@pytest.fixture(scope="module")
def server():
    srv = IndexServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def env(tmp_path):
    return {"STACKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "PIP_CONFIG_FILE": "/dev/null", "HOME": str(tmp_path)}


def plan_for(base: str, variant: str = "cu130", packages=("torch", "torchvision")) -> Plan:
    versions = {"torch": "2.13.0", "torchvision": "0.28.0", "torchaudio": "2.11.0"}
    url = f"{base}/{variant}"
    return Plan("2.13.0", variant, url, [PlannedPackage(p, versions[p], variant, url) for p in packages])


# ---------------------------------------------------------------------------- pure parsers

# One anchor as download.pytorch.org/whl/cu128/torch/ renders it (captured in astral-sh/uv#13195; hash shortened there too).
REAL_ANCHOR = (
    '<a href="https://download-r2.pytorch.org/whl/cu128/torch-2.7.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl'
    '#sha256=' + "a" * 64 + '">torch-2.7.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>'
)


def test_parse_html_takes_filename_from_url_and_sha_from_fragment():
    files = index.parse_simple_html(f"<html><body>{REAL_ANCHOR}</body></html>", "https://download.pytorch.org/whl/cu128/torch/")
    assert len(files) == 1
    f = files[0]
    assert f.filename == "torch-2.7.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert f.url.startswith("https://download-r2.pytorch.org/")  # another host of the same project: normal
    assert f.sha256 == "a" * 64


def test_parse_html_resolves_relative_links_and_yanked():
    text = '<a href="../../files/x-1.0-py3-none-any.whl" data-yanked="">x</a><a href="y-2.0-py3-none-any.whl" data-requires-python="&gt;=3.10">y</a>'
    files = index.parse_simple_html(text, "http://h/simple/x/")
    assert files[0].url == "http://h/files/x-1.0-py3-none-any.whl" and files[0].yanked
    assert files[1].url == "http://h/simple/x/y-2.0-py3-none-any.whl" and files[1].requires_python == ">=3.10"


def test_parse_json_and_reject_non_pep691():
    text = '{"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "url": "t.whl", "hashes": {"sha256": "ab"}}]}'
    files = index.parse_simple_json(text, "http://h/whl/cpu/torch/")
    assert files[0].url == "http://h/whl/cpu/torch/t.whl" and files[0].sha256 == "ab"
    with pytest.raises(ValueError):
        index.parse_simple_json('{"meta": {}}', "http://h/")


def test_select_wheel_prefers_the_most_specific_tag_and_exact_local_version():
    files = [
        index.IndexFile("torch-2.13.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl", "u1"),
        index.IndexFile("torch-2.13.0+cu130-cp311-cp311-linux_x86_64.whl", "u2"),
        index.IndexFile("torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", "u3"),
        index.IndexFile("torch-2.13.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", "u4"),
    ]
    assert index.select_wheel(files, "torch", "2.13.0+cu130", TAGS).url == "u3"
    assert index.select_wheel(files, "torch", "2.13.0+cu130", ["cp313-cp313-win_amd64"]) is None
    assert index.select_wheel(files, "torch", "2.13.0", TAGS) is None  # a local build is not the plain version


def test_target_tags_for_what_if_requests():
    facts = Facts()
    facts.python.version = "3.11.7"
    facts.python.tags = TAGS
    assert index.target_tags(facts) == TAGS
    tags = index.target_tags(facts, Request(python_version="3.12", platform="manylinux_2_28_x86_64"))
    assert tags[0] == "cp312-cp312-manylinux_2_28_x86_64" and "cp312-cp312-linux_x86_64" in tags
    assert not any(t.startswith("cp311-cp311") for t in tags)  # abi3 tags of older Pythons stay
    ft = index.target_tags(facts, Request(python_version="3.13t", platform="win_amd64"))
    assert ft[0] == "cp313-cp313t-win_amd64"
    mac = index.target_tags(facts, Request(platform="macosx_14_0_arm64"))
    assert "cp311-cp311-macosx_11_0_arm64" in mac and "cp311-cp311-macosx_14_0_arm64" in mac


def test_network_settings_follow_pip_config_and_env(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nproxy = http://proxy.corp:3128\ncert = /etc/corp-ca.pem\n[install]\ntrusted-host = mirror.corp other\n")
    s = index.network_settings({"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "none")})
    assert s.proxy == "http://proxy.corp:3128" and s.cert == "/etc/corp-ca.pem" and s.trusted_hosts == ["mirror.corp", "other"]
    s2 = index.network_settings({"PIP_CONFIG_FILE": str(conf), "PIP_PROXY": "http://env:1", "HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "none")})
    assert s2.proxy == "http://env:1" and s2.sources["proxy"] == "PIP_PROXY"
    assert index.network_settings({"PIP_CONFIG_FILE": "/dev/null", "HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "none")}).proxy is None


def test_index_base_and_cache_dir_follow_options_and_env(tmp_path):
    assert index.index_base(None, {}) == "https://download.pytorch.org/whl"
    assert index.index_base(None, {"STACKDOCTOR_INDEX_BASE": "https://mirror/whl/"}) == "https://mirror/whl"
    assert index.index_base("http://x/whl", {"STACKDOCTOR_INDEX_BASE": "https://mirror/whl"}) == "http://x/whl"
    # without an option or the variable, the matrix's ``pytorch`` index (a --matrix file can move it)
    layer = tmp_path / "mirror.yaml"
    layer.write_text('indexes:\n  pytorch: {url: "https://mirror.test/whl/", source: "test"}\n')
    from stackdoctor.matrix import load_matrix

    assert index.index_base(None, {}, load_matrix([layer])) == "https://mirror.test/whl"
    assert index.index_base(None, {"STACKDOCTOR_INDEX_BASE": "https://env/whl"}, load_matrix([layer])) == "https://env/whl"
    assert index.cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/stackdoctor")
    assert index.cache_dir({"STACKDOCTOR_CACHE_DIR": "/d", "XDG_CACHE_HOME": "/c"}) == Path("/d")


# ---------------------------------------------------------------------------- the real server


@pytest.mark.parametrize("mode", ["ok", "html"])
def test_finds_the_exact_wheels_html_and_json(server, env, mode):
    matches = index.verify_plan(plan_for(server.base(mode)), TAGS, env=env)
    assert [m.filename for m in matches] == [
        "torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torchvision-0.28.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
    ]
    assert all(m.url.startswith(server.state.files_base) for m in matches)  # the file host differs from the index host
    assert all(m.sha256 and len(m.sha256) == 64 for m in matches)


def test_pep691_json_is_used_where_offered(server, env):
    with index.IndexClient(env) as client:
        page = client.fetch(index.project_page_url(f"{server.base('ok')}/cpu", "torch"))
        assert page.content_type == index.JSON_TYPE
        page = client.fetch(index.project_page_url(f"{server.base('html')}/cpu", "torch"))
        assert page.content_type.startswith("text/html")


@pytest.mark.parametrize(
    "mode, words",
    [
        ("e500", "HTTP 500"),
        ("garbage", "not a package index page"),
        ("badjson", "not a valid PEP 691"),
        ("loop", "redirects in a loop"),
        ("notags", "exists only for cp312, cp313"),
        ("hugelen", "larger than any package page"),
        ("huge", "larger than any package page"),
        ("nosuchmode", "HTTP 404"),
    ],
)
def test_broken_indexes_are_one_sentence(server, env, mode, words):
    start = time.monotonic()
    with pytest.raises(IndexError_) as exc:
        index.verify_plan(plan_for(server.base(mode)), TAGS, env=env, max_bytes=4 * 1024 * 1024)
    msg = str(exc.value)
    assert words in msg
    assert "\n" not in msg and msg.endswith(".")
    assert exc.value.exit_code == ExitCode.USAGE
    assert time.monotonic() - start < 30  # the 1 GiB page is cut off, not read


def test_default_cap_cuts_a_streamed_gigabyte(server, env):
    with pytest.raises(IndexError_, match="limit 32 MiB"):
        index.verify_plan(plan_for(server.base("huge")), TAGS, env=env)


@pytest.mark.parametrize("mode", ["slow", "trickle"])
def test_timeouts_and_trickling_pages_end_at_the_deadline(server, env, mode):
    start = time.monotonic()
    with pytest.raises(IndexError_, match="did not answer in 1 s"):
        index.verify_plan(plan_for(server.base(mode)), TAGS, env=env, timeout_s=1.0)
    assert time.monotonic() - start < 15


def test_unknown_variant_is_a_404(server, env):
    with pytest.raises(IndexError_, match="HTTP 404"):
        index.verify_plan(plan_for(server.base("ok"), variant="cu999"), TAGS, env=env)


def test_connection_refused_is_one_sentence(env):
    with pytest.raises(IndexError_, match="cannot connect"):
        index.verify_plan(plan_for("http://127.0.0.1:9/whl"), TAGS, env=env, timeout_s=2)


def test_pages_are_cached_and_revalidated_with_etag(server, env):
    base = server.base("html")
    url_part = "/html/whl/cu126/torch/"
    before_304 = server.state.count(url_part, 304)
    index.verify_plan(plan_for(base, "cu126", ("torch",)), TAGS, env=env)
    assert server.state.count(url_part, 304) == before_304
    with index.IndexClient(env) as client:
        page = client.fetch(index.project_page_url(f"{base}/cu126", "torch"))
    assert page.from_cache
    assert server.state.count(url_part, 304) == before_304 + 1
    assert list(Path(env["STACKDOCTOR_CACHE_DIR"], "index-pages").glob("*.body"))


def test_find_links_directory(server, tmp_path, env):
    d = server.write_find_links(tmp_path / "wheels")
    matches = index.verify_plan(plan_for("http://unused.invalid/whl"), TAGS, env=env, find_links=str(d))
    assert matches[0].url.startswith("file://") and matches[0].source == str(d)
    only_torch = server.write_find_links(tmp_path / "partial", ["torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"])
    with pytest.raises(IndexError_, match="torchvision 0.28.0\\+cu130 has no wheel"):
        index.verify_plan(plan_for("http://unused.invalid/whl"), TAGS, env=env, find_links=str(only_torch))
    with pytest.raises(IndexError_, match="no such directory"):
        index.verify_plan(plan_for("http://unused.invalid/whl"), TAGS, env=env, find_links=str(tmp_path / "missing"))
