"""Issue 44, items 1-2: no cache file another user could write is trusted, none can hang or flood a run, and no
index password reaches the disk.

- Every cache file stackdoctor keeps (the compiled dataclass code read at import, the parsed matrix and texts, the
  linkage memo, the index page cache and its validators) and the learned layer are replaced by FIFOs: ``--version``,
  ``check --no-kernels``, ``install --dry-run`` and ``install --recover`` still finish (subprocess time-outs, no
  timing asserts), and the FIFOs of this user are removed.
- A cache file that is a link to ``/dev/zero`` is refused without being read; one owned by uid 65534 is not trusted
  (read as a miss, left in place); a looser folder of ours is tightened to 0700, another user's is not used.
- A basic-auth index on 127.0.0.1 that sends ``ETag`` / ``Last-Modified`` (tests/sourceserver.py, ``validators``):
  after a dry run and a real install from it, its password is in no file under the cache, the config folder, HOME or
  the venv; the page cache is 0600 in a 0700 folder; a page another user planted under the server's ETag is not used.

The wheels are GENERATED stand-ins (tests/sourceserver.py): NOT PyTorch.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sourceserver import SourceServer  # noqa: E402
from test_install import family  # noqa: E402
from test_install_sources import DEPS, base_venv, sd, user_env, venv  # noqa: E402,F401

from stackdoctor.core import cachefiles  # noqa: E402

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
PW = "s3cret-Pw-44"


def _cli(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "stackdoctor", *args], env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def _fifos_for_every_file(*folders: Path) -> list[Path]:
    made = []
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink():
                p.unlink()
                os.mkfifo(p, 0o600)
                made.append(p)
    return made


@pytest.fixture(scope="module")
def validating():
    s = SourceServer(auth={"/torch/": ("carol", PW), "/pypi/": ("carol", PW)}, validators=True).start()
    yield s
    s.stop()


def _authed(url: str) -> str:
    return url.replace("http://", f"http://carol:{PW}@", 1)


def _env(tmp_path: Path, src: SourceServer) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = user_env(tmp_path, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PIP_INDEX_URL=_authed(src.pypi()),
                   STACKDOCTOR_INDEX_BASE=_authed(src.torch_index()))
    env.pop("STACKDOCTOR_NO_CACHE", None)
    env.pop("STACKDOCTOR_LEARNED", None)
    return env


def test_fifos_in_place_of_every_cache_file_hang_no_command(validating, venv, tmp_path):
    env = _env(tmp_path, validating)
    cache = Path(env["STACKDOCTOR_CACHE_DIR"])
    py = str(venv / "bin" / "python")
    dry = ["install", "--python", py, "--torch", "2.13.0", "--variant", "cpu", "--dry-run"]
    for args in (["--version"], ["check", "--no-kernels", "--python", py], dry):
        assert _cli(args, env).returncode in (0, 1), args  # fill every cache
    assert list(cache.glob("classcode-*.marshal")) and list(cache.glob("matrix-*.pickle")) and list((cache / "index-pages").glob("*.body"))
    learned = Path(env["XDG_CONFIG_HOME"]) / "stackdoctor" / "learned.yaml"
    learned.parent.mkdir(parents=True)
    learned.write_text("schema: stackdoctor.matrix/1\n")
    fifos = _fifos_for_every_file(cache, learned.parent)
    assert len(fifos) >= 6
    version = _cli(["--version"], env, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("stackdoctor ")
    assert _cli(["check", "--no-kernels", "--python", py], env, timeout=120).returncode in (0, 1)
    d = _cli(dry, env, timeout=120)
    assert d.returncode == 0, d.stderr[-2000:]
    r = _cli(["install", "--python", py, "--recover"], env, timeout=120)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    left = [p for p in fifos if p.exists() and stat.S_ISFIFO(p.lstat().st_mode) and p.parent.is_relative_to(cache)]
    assert not left  # this user's FIFOs in the cache were removed, not only skipped


@pytest.mark.headline("unprivileged")
def test_a_link_to_dev_zero_is_refused_unread_and_a_foreign_file_is_not_trusted(tmp_path):
    folder = tmp_path / "c"
    cachefiles.write_private(folder / "x.bin", b"kept")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and stat.S_IMODE((folder / "x.bin").stat().st_mode) == 0o600
    assert cachefiles.read_private(folder / "x.bin", 16) == b"kept"
    (folder / "z.bin").symlink_to("/dev/zero")
    assert cachefiles.read_private(folder / "z.bin", 1 << 30) is None  # O_NOFOLLOW: never opened, never read
    assert not os.path.lexists(folder / "z.bin")  # our own link: removed
    (folder / "big.bin").write_bytes(b"x" * 100)
    assert cachefiles.read_private(folder / "big.bin", 99) is None
    if not ROOT:
        pytest.skip("needs root to give a file to uid 65534")
    os.chown(folder / "x.bin", 65534, 65534)
    assert cachefiles.read_private(folder / "x.bin", 16) is None
    assert (folder / "x.bin").exists()  # another user's: not ours to remove


@pytest.mark.headline("unprivileged")
def test_a_looser_folder_of_ours_is_tightened_and_another_users_is_not_used(tmp_path):
    loose = tmp_path / "stackdoctor"  # as an older version made ~/.cache/stackdoctor: 0755
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    cachefiles.write_private(loose / "a", b"1")
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700 and cachefiles.read_private(loose / "a", 4) == b"1"
    for name, mode in (("named-by-the-user", 0o755), ("stackdoctor-shared", 0o775), ("tmp", 0o1777)):
        other = tmp_path / name  # not stackdoctor's own name, or others may write in it: not used, not changed
        other.mkdir()
        os.chmod(other, mode)
        cachefiles.write_private(other / "a", b"1")
        assert not (other / "a").exists() and stat.S_IMODE(other.stat().st_mode) == mode
    shared = tmp_path / "g" / "stackdoctor"
    shared.mkdir(parents=True)
    os.chmod(shared, 0o777)
    (shared / "a").write_bytes(b"1")
    os.chmod(shared / "a", 0o600)
    assert cachefiles.read_private(shared / "a", 4) is None and stat.S_IMODE(shared.stat().st_mode) == 0o777
    if not ROOT:
        pytest.skip("needs root to give a folder to uid 65534")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / "a").write_bytes(b"planted")
    os.chmod(theirs / "a", 0o600)
    os.chown(theirs, 65534, 65534)
    assert cachefiles.read_private(theirs / "a", 64) is None
    cachefiles.write_private(theirs / "b", b"2")
    assert not (theirs / "b").exists() and stat.S_IMODE(theirs.stat().st_mode) == 0o755


def _files_holding(root: Path, needle: bytes) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                hits.append(str(p))
        except OSError:
            pass
    return hits


@pytest.mark.headline("install")
def test_a_basic_auth_index_password_is_in_no_file_and_a_planted_page_is_not_used(validating, venv, tmp_path):
    env = _env(tmp_path, validating)
    cache = Path(env["STACKDOCTOR_CACHE_DIR"])
    args = ["--python", str(venv / "bin" / "python"), "--torch", "2.13.0", "--variant", "cpu"]
    dry = sd([*args, "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    pages = cache / "index-pages"
    bodies = sorted(pages.glob("*.body"))
    assert bodies and stat.S_IMODE(pages.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in pages.iterdir())
    again = validating.not_modified
    assert sd([*args, "--dry-run"], env).returncode == 0
    assert validating.not_modified > again  # the validators were stored and used (a 304 came back)
    real = sd([*args, "--yes"], env)
    assert real.returncode == 0, real.stderr[-3000:]
    assert family(venv) == {"torch": "2.13.0+cpu"}
    for root in (cache, Path(env["HOME"]), venv):
        assert _files_holding(root, PW.encode()) == [], root
    if not ROOT:
        pytest.skip("needs root to plant a page as uid 65534")
    for b in bodies:  # another user's page, kept under the server's ETag: it lists no wheels at all
        b.write_bytes(b"<html><body>planted</body></html>")
        meta = b.with_suffix(".json")
        import json

        m = json.loads(meta.read_text())
        m["size"] = b.stat().st_size
        meta.write_text(json.dumps(m))
        for p in (b, meta):
            os.chown(p, 65534, 65534)
    before = validating.not_modified
    planted = sd([*args, "--dry-run"], env)
    assert planted.returncode == 0, planted.stderr[-3000:]  # the live page was read, not the planted one
    assert validating.not_modified == before  # no validator of the planted page was sent
