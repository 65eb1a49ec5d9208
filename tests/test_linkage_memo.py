"""The linkage walk's answer kept with the questions it asked of the files (stackdoctor.binaries.observed, issue 33): reused
only while every question gets the same answer, and then equal to a fresh walk; a changed, new or just-written
library is walked again. The libraries are real ones built by tests/test_linkage.py's fixture."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from test_linkage import _nccl, copy_tree, wheel_tree  # noqa: F401  (wheel_tree is a fixture)

from stackdoctor.binaries import linkage, observed
from stackdoctor.binaries.linkage import check_linkage, torch_roots
from stackdoctor.system import System


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("STACKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("STACKDOCTOR_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _age(*trees: Path) -> None:
    """Files last modified an hour ago (their change time is now: the identity still moves)."""
    old = time.time() - 3600
    for tree in trees:
        for p in [tree, *tree.rglob("*")]:
            os.utime(p, (old, old), follow_symlinks=False)


def _walk(site: Path, env: dict[str, str] | None = None, keep: bool = True):
    system = System.from_env().local
    return check_linkage(system, torch_roots(system, str(site / "torch")), env=env or {}, site_dirs=[str(site)], wheel_dirs=[str(site)], keep=keep)


def _same(a, b) -> bool:
    return (a.checked, a.problems, a.loaded, a.symbols_checked, a.note) == (b.checked, b.problems, b.loaded, b.symbols_checked, b.note)


def _no_walk(*args, **kwargs):
    raise AssertionError("walked again")


def test_a_settled_walk_is_kept_and_the_next_is_its_answer(wheel_tree, tmp_path, cache, monkeypatch):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)
    _age(site)
    first = _walk(site)
    assert first.checked and first.problems == [] and "libcudnn.so.9" in first.loaded
    assert len(list(cache.glob("linkage-*.pickle"))) == 1
    monkeypatch.setattr(linkage, "_walk", _no_walk)
    again = _walk(site)
    assert _same(again, first) and again is not first


def test_a_rewritten_library_is_walked_again(wheel_tree, tmp_path, cache, monkeypatch):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)
    _age(site)
    assert _walk(site).problems == []
    _nccl(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", with_mem_free=False)  # ncclMemFree gone
    _age(site)  # even with its old modification time back
    now = _walk(site)
    assert [p.symbol for p in now.problems] == ["ncclMemFree"]
    assert _same(now, _walk(site, keep=False))


def test_a_library_that_appears_earlier_on_the_search_path(wheel_tree, tmp_path, cache):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)
    first_dir = tmp_path / "ld"
    first_dir.mkdir()
    _age(site, first_dir)
    env = {"LD_LIBRARY_PATH": str(first_dir)}
    assert _walk(site, env).loaded["libnccl.so.2"].startswith(str(site))
    shutil.copy2(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", first_dir / "libnccl.so.2")
    _age(first_dir)
    now = _walk(site, env)
    assert now.loaded["libnccl.so.2"] == str(first_dir / "libnccl.so.2")  # ld.so would take it from LD_LIBRARY_PATH
    assert _same(now, _walk(site, env, keep=False))


def test_files_modified_just_now_are_not_kept(wheel_tree, tmp_path, cache):  # noqa: F811
    site = copy_tree(wheel_tree, tmp_path)  # copy2 keeps the fixture's times: minutes old at most
    for p in site.rglob("*.so*"):
        os.utime(p)  # now
    assert _walk(site).problems == []
    assert list(cache.glob("linkage-*.pickle")) == []


def test_unchanged_asks_every_question_again(tmp_path):
    system = System.from_env().local
    folder = tmp_path / "d"
    folder.mkdir()
    lib = folder / "libx.so"
    lib.write_bytes(b"x")
    seeing = observed.Observing(system)
    assert seeing.is_file(str(lib)) and seeing.listdir(str(folder)) == ["libx.so"] and not seeing.exists(str(folder / "liby.so"))
    assert observed.unchanged(system, seeing.seen)
    assert not seeing.settled()  # just written
    (folder / "liby.so").write_bytes(b"y")  # a new file where there was none: the listing and the absent one both change
    assert not observed.unchanged(system, seeing.seen)
    seeing = observed.Observing(system)
    seeing.open_binary(str(lib)).close()
    lib.write_bytes(b"z")  # same size, rewritten: the change time moves
    os.utime(lib, (0, 0))
    assert not observed.unchanged(system, seeing.seen)
