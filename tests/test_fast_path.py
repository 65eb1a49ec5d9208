"""What makes ``check --no-kernels`` fast (issue 33) changes nothing it says: the shortcuts are proven equal to the
long way here (the speed itself is measured in ``benchmarks/bench_check.py``, never asserted)."""

from __future__ import annotations

import os
import re
import stat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stackdoctor import kinds
from stackdoctor.core import parsecache, redact
from stackdoctor.matrix import load

WORDS = ["hf_", "ghp_", "github_pat_", "sk-", "xoxb-", "AKIA", "eyJ", "glpat-", "npm_", "pypi-", "token", "Bearer ", "basic ",
         "PASSWORD=", "api_key: ", "SESSION=", "x=", "://", "@", ":", "K", "ſ", "\udcff", "é"]
PIECES = st.lists(st.one_of(st.sampled_from(WORDS), st.text(alphabet="abcXYZ0123456789_-.=: ", min_size=0, max_size=24)), max_size=12).map("".join)


@pytest.mark.parametrize("kind_pattern", redact._CREDENTIALS, ids=[k for k, _ in redact._CREDENTIALS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_credential_pattern_needs_one_of_its_hints(kind_pattern: tuple[str, re.Pattern[str]], data: st.DataObject) -> None:
    _, pattern = kind_pattern
    text = data.draw(st.from_regex(pattern, fullmatch=False))
    assert pattern.search(text)
    assert any(hint in text for hint in redact._CREDENTIAL_HINTS[pattern.pattern]), text
    assert redact._CREDENTIAL_HINT.search(text)


@settings(max_examples=300, deadline=None)
@given(text=PIECES)
def test_scrub_with_shortcuts_equals_every_pattern_run(text: str) -> None:
    fast = redact.scrub(text)
    everything = re.compile("")
    saved = (redact._CREDENTIAL_HINT, dict(redact._CREDENTIAL_HINTS), redact._BEARER_HINT, redact._SECRET_NAME_HINT, redact._SURROGATE)
    try:
        redact._CREDENTIAL_HINT = redact._BEARER_HINT = redact._SECRET_NAME_HINT = everything
        redact._CREDENTIAL_HINTS.update({k: ("",) for k in redact._CREDENTIAL_HINTS})
        long_way = redact.scrub_secrets(text)
        long_way = "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c
                           for c in long_way)
    finally:
        redact._CREDENTIAL_HINT, hints, redact._BEARER_HINT, redact._SECRET_NAME_HINT, redact._SURROGATE = saved
        redact._CREDENTIAL_HINTS.update(hints)
    assert fast == long_way


def test_a_secret_still_goes_in_a_long_text() -> None:
    text = '{"a": "x"}\n' * 2000 + "export HF_TOKEN=hf_" + "a" * 30 + " Authorization: Bearer " + "b" * 20
    out = redact.scrub(text)
    assert "hf_aaaa" not in out and "b" * 20 not in out and out.count("****") >= 2


# ---- the plug-in scan: importlib.metadata only where an entry_points.txt could name the group


def _dist(site: os.PathLike[str], name: str, entry_points: str | None) -> None:
    d = os.path.join(site, f"{name}-1.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        with open(os.path.join(d, "entry_points.txt"), "w") as fh:
            fh.write(entry_points)


def test_the_plugin_group_is_looked_for_only_where_it_can_be(tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _dist(site, "other", "[console_scripts]\nother = other:main\n")
    _dist(site, "plain", None)
    group = kinds.PLUGIN_GROUP
    assert kinds._group_maybe_declared(group, [str(site), str(tmp_path / "missing")]) is False
    _dist(site, "foo_acc", f"[{group}]\nfoo = foo_acc:Foo\n")
    assert kinds._group_maybe_declared(group, [str(site)]) is True
    zipped = tmp_path / "deps.zip"
    zipped.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert kinds._group_maybe_declared(group, [str(tmp_path / "missing"), str(zipped)]) is True  # a zip: ask importlib


# ---- the parsed embedded matrix, kept between runs


@pytest.fixture()
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STACKDOCTOR_NO_CACHE", raising=False)
    load.embedded_parts.cache_clear()
    load.embedded_matrix.cache_clear()
    yield tmp_path / "cache"
    load.embedded_parts.cache_clear()
    load.embedded_matrix.cache_clear()


def _rows(parts) -> list:
    return [(name, sorted(p.rows), [repr(r) for rows in p.rows.values() for r in rows]) for name, p in parts]


def test_the_kept_matrix_is_the_parsed_one(cache_home) -> None:
    parsed = load.embedded_parts()
    files = list(cache_home.glob("matrix-*.pickle"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    load.embedded_parts.cache_clear()
    kept = load.embedded_parts()
    assert kept is not parsed and _rows(kept) == _rows(parsed)


def test_a_foreign_or_broken_cache_is_not_read(cache_home) -> None:
    load.embedded_parts()
    (path,) = cache_home.glob("matrix-*.pickle")
    k = path.name[len("matrix-") : -len(".pickle")]
    assert parsecache.read("matrix", k) is not None
    os.chmod(path, 0o666)  # writable by others: not trusted
    assert parsecache.read("matrix", k) is None
    assert not path.exists()  # ours but loosened: removed (issue 44)
    path.write_bytes(b"not a pickle")
    assert parsecache.read("matrix", k) is None
    load.embedded_parts.cache_clear()
    assert _rows(load.embedded_parts()) and parsecache.read("matrix", k) is not None  # parsed again, and kept again


def test_a_changed_input_is_a_new_key() -> None:
    inputs = ["compat_matrix/a.yaml", "schema: x\n"]
    assert parsecache.key(inputs) != parsecache.key(["compat_matrix/a.yaml", "schema: y\n"])
    assert parsecache.key(inputs) != parsecache.key(["compat_matrix/a.yaml", "sche", "ma: x\n"])  # lengths are hashed too
    assert parsecache.key(inputs) == parsecache.key(list(inputs))


def test_the_kept_texts_are_the_parsed_ones(cache_home) -> None:
    from stackdoctor.core import texts

    texts.texts.cache_clear()
    try:
        first = texts.texts("zh")
        assert list(cache_home.glob("texts-zh-*.pickle"))
        texts.texts.cache_clear()
        assert texts.texts("zh") == first and texts.title("torch-ok", "zh") == first["codes"]["torch-ok"]["title"]
    finally:
        texts.texts.cache_clear()


def test_package_files_is_resources_files_for_a_folder_package():
    """parsecache.package_files gives what importlib.resources.files gives (the same files, the same texts) without
    importing the zip reader where the package is a folder (issue 33)."""
    from importlib import resources

    from stackdoctor.core.parsecache import package_files

    for package in ("stackdoctor", "stackdoctor.accelerators.ascend"):
        mine, theirs = package_files(package), resources.files(package)
        assert sorted(e.name for e in mine.iterdir()) == sorted(e.name for e in theirs.iterdir())
    locale = package_files("stackdoctor").joinpath("locale").joinpath("en.yaml")
    assert locale.read_text(encoding="utf-8") == resources.files("stackdoctor").joinpath("locale").joinpath("en.yaml").read_text(encoding="utf-8")
    import pytest

    with pytest.raises(ModuleNotFoundError):
        package_files("stackdoctor_no_such_package")
