"""What `stackdoctor install` takes in as pip takes it, and what it prints (issue 29, the input/output half).

- ``--find-links`` given as pip accepts it: a path relative to the current folder (``m/sw``) and one that
  starts with ``~``; real pip installs from the folder into a real venv.
- Credentials where pip finds them: an index on 127.0.0.1 that needs HTTP basic auth, the login in a netrc file
  (``NETRC`` / ``~/.netrc`` of a temporary HOME); stackdoctor's own index reads use it, pip installs with it, and
  the password is in no output.
- A big plain ``--matrix`` is refused for its size or its number of lines, fast, and not called an alias bomb.

The wheels are GENERATED stand-ins (tests/sourceserver.py; "torch" says ``STACKDOCTOR_FAKE_TORCH = True``): NOT PyTorch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sourceserver import SourceServer  # noqa: E402
from test_install import family, imports_fake_torch  # noqa: E402
from test_install_sources import DEPS, T13, base_venv, one_error, sd, user_env, venv  # noqa: E402,F401

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")


@pytest.fixture(scope="module")
def src():
    s = SourceServer().start()
    yield s
    s.stop()


# ---------------------------------------------------------------------------- --find-links as pip takes it


def test_a_relative_find_links_folder_is_the_one_under_the_current_folder(src, venv, tmp_path):
    work = tmp_path / "project"
    src.write_folder(work / "m" / "sw", [T13, *DEPS])
    p = sd(["--python", str(venv / "bin" / "python"), "--offline", "--find-links", "m/sw", "--yes", "--json"], user_env(tmp_path), cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["command"][-2:] == ["--find-links", str(work / "m" / "sw")]  # the folder pip would read, whatever pip's cwd
    assert family(venv) == {"torch": "2.13.0+cpu"} and imports_fake_torch(venv) == "2.13.0+cpu"


def test_a_find_links_folder_under_home_is_expanded_as_pip_does(src, venv, tmp_path):
    home = tmp_path / "home"
    src.write_folder(home / "wheelhouse", [T13, *DEPS])
    # "--find-links=~/..." reaches the program unexpanded (the shell expands ~ only at a word's start)
    p = sd(["--python", str(venv / "bin" / "python"), "--offline", "--find-links=~/wheelhouse", "--yes", "--json"],
           user_env(tmp_path, HOME=str(home)), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout)["command"][-2:] == ["--find-links", str(home / "wheelhouse")]
    assert family(venv) == {"torch": "2.13.0+cpu"}


def test_a_relative_find_links_folder_that_is_not_there_is_one_sentence(venv, tmp_path):
    p = sd(["--python", str(venv / "bin" / "python"), "--offline", "--find-links", "m/none", "--dry-run"], user_env(tmp_path), cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    assert "internal error" not in p.stderr and str(tmp_path / "m" / "none") in one_error(p)


# ---------------------------------------------------------------------------- credentials as pip finds them

NETRC_PW = "netrcPw5Zq8"


@pytest.fixture(scope="module")
def locked():
    """The PEP 503 PyTorch index and the PyPI-style mirror, both answering 401 without carol's password."""
    s = SourceServer(auth={"/torch/": ("carol", NETRC_PW), "/pypi/": ("carol", NETRC_PW)}).start()
    yield s
    s.stop()


def locked_env(tmp_path: Path, src: SourceServer, *, netrc: bool, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if netrc:
        (home / ".netrc").write_text(f"machine 127.0.0.1\n  login carol\n  password {NETRC_PW}\n")
        (home / ".netrc").chmod(0o600)
    return user_env(tmp_path, HOME=str(home), PIP_INDEX_URL=src.pypi(), STACKDOCTOR_INDEX_BASE=src.torch_index(), **extra)


def test_an_index_that_needs_the_netrc_login_is_read_and_installed_from(locked, venv, tmp_path):
    env = locked_env(tmp_path, locked, netrc=True)
    args = ["--python", str(venv / "bin" / "python"), "--torch", "2.13.0", "--variant", "cpu"]
    dry = sd([*args, "--dry-run", "--json"], env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    plan = json.loads(dry.stdout)
    assert [p["index_url"] for p in plan["packages"]] == [f"{locked.torch_index()}/cpu"]  # stackdoctor's own read logged in
    refused = locked.refused
    real = sd([*args, "--yes"], env)
    assert real.returncode == 0, real.stderr[-3000:]
    assert family(venv) == {"torch": "2.13.0+cpu"} and imports_fake_torch(venv) == "2.13.0+cpu"
    assert locked.refused == refused  # every request carried the login (pip's from the same netrc)
    for out in (dry.stdout, dry.stderr, real.stdout, real.stderr):
        assert NETRC_PW not in out


def test_netrc_named_by_the_NETRC_variable_is_read_too(locked, venv, tmp_path):
    other = tmp_path / "elsewhere.netrc"
    other.write_text(f"machine 127.0.0.1 login carol password {NETRC_PW}\n")
    env = locked_env(tmp_path, locked, netrc=False, NETRC=str(other))
    p = sd(["--python", str(venv / "bin" / "python"), "--torch", "2.13.0", "--variant", "cpu", "--dry-run", "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert NETRC_PW not in p.stdout + p.stderr


def test_without_credentials_the_index_is_said_to_need_them_not_to_be_failing(locked, venv, tmp_path):
    env = locked_env(tmp_path, locked, netrc=False)
    p = sd(["--python", str(venv / "bin" / "python"), "--torch", "2.13.0", "--variant", "cpu", "--dry-run"], env)
    assert p.returncode == 2
    assert "/torch/ answered HTTP 401: it needs credentials, and none for it are in the URL or in ~/.netrc (pip reads both)" in p.stderr, p.stderr
    assert "try again later" not in p.stderr
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nkeyring-provider = subprocess\n")
    k = sd(["--python", str(venv / "bin" / "python"), "--torch", "2.13.0", "--variant", "cpu", "--dry-run"], dict(env, PIP_CONFIG_FILE=str(conf)))
    assert k.returncode == 2
    assert "answered HTTP 401: it needs credentials; pip is set to take them from the keyring (keyring-provider = subprocess), which stackdoctor does not read" in k.stderr


def test_netrc_lookup_is_by_host_with_default_and_a_broken_file_is_no_credentials(tmp_path):
    from stackdoctor.wheels.http import netrc_credentials

    f = tmp_path / "n"
    f.write_text("machine a.example login u password p\ndefault login anon password x\n")
    env = {"NETRC": str(f)}
    assert netrc_credentials(env, "a.example") == ("u", "p")
    assert netrc_credentials(env, "b.example") == ("anon", "x")
    f.write_text("machine a.example login u password p bogus x\n")  # malformed: requests ignores it, so does stackdoctor
    assert netrc_credentials(env, "a.example") is None
    assert netrc_credentials({"HOME": str(tmp_path / "nohome")}, "a.example") is None


# ---------------------------------------------------------------------------- a big plain matrix


def _plain_rows(n: int) -> str:
    return "schema: stackdoctor.matrix/1\nreleases:\n" + "".join(f'- {{version: "3.{i // 1000}.{i % 1000}", source: s, variants: []}}\n' for i in range(n))


def _matrix_cli(tmp_path: Path, path: Path) -> subprocess.CompletedProcess:
    env = user_env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--matrix", str(path), "--dry-run"],
                       env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p


def test_a_4_mib_matrix_of_82k_plain_rows_is_refused_for_its_size_not_called_an_alias_bomb(tmp_path):
    big = tmp_path / "big.yaml"
    text = _plain_rows(82_000)
    big.write_text(text[: 4 * 1024 * 1024 - 1], encoding="utf-8")  # the file: just under the old 4 MiB cap
    p = _matrix_cli(tmp_path, big)
    assert p.returncode == 2
    assert one_error(p) == f"stackdoctor: compat matrix {big} line 1: the file is larger than 1 MiB."
    assert "alias" not in p.stderr


def test_a_matrix_of_too_many_lines_is_refused_for_its_lines_before_it_is_parsed(tmp_path):
    many = tmp_path / "many.yaml"
    many.write_text("releases:\n" + "".join(f'- {{version: "3.0.{i}", source: s}}\n' for i in range(25_001)), encoding="utf-8")
    assert many.stat().st_size < 1024 * 1024
    p = _matrix_cli(tmp_path, many)
    assert p.returncode == 2
    assert one_error(p) == (f"stackdoctor: compat matrix {many} line 20001: the file has 25002 lines, more than the 20000 a matrix file may have;"
                            " keep only the rows you need.")
    assert "alias" not in p.stderr


def test_many_values_without_aliases_are_not_an_alias_bomb(tmp_path):
    from stackdoctor.core.errors import MatrixError
    from stackdoctor.matrix import load_matrix

    flat = tmp_path / "flat.yaml"
    flat.write_text("releases: [" + ",".join(["1"] * 250_000) + "]\n", encoding="utf-8")
    with pytest.raises(MatrixError) as ei:
        load_matrix([flat])
    assert str(ei.value) == f"compat matrix {flat} line 1: the document has more than 200000 values, more than a matrix file may hold."


# ---------------------------------------------------------------------------- a path that holds a newline and an ESC

FORGE = "FORGED ::error::owned"


@pytest.fixture(scope="module")
def hostile_venv(tmp_path_factory) -> Path:
    """A real venv whose folder name holds a newline and an ESC sequence (venv refuses a ':' in it, so the
    annotation-looking text sits in the file name under it: a symlink to the venv's python)."""
    d = tmp_path_factory.mktemp("hostile") / "ev\nFORGED line\x1b[31mRED"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    link = d / f"py\n{FORGE}\x1b]0;title\x07"
    link.symlink_to(d / "bin" / "python")
    return link


def _forged(text: str) -> list[str]:
    """Lines a value forged: one that starts with the text after a newline, or any raw ESC / BEL."""
    bad = [ln for ln in text.splitlines() if ln.startswith(("FORGED", "RED/"))]
    return bad + [repr(c) for c in ("\x1b", "\x07") if c in text]


@pytest.mark.parametrize("fmt", ["human", "markdown", "github", "junit", "json"])
def test_a_newline_and_an_esc_in_the_python_path_forge_nothing_in_check(hostile_venv, tmp_path, fmt):
    env = user_env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", str(hostile_venv), "--format", fmt],
                       env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stderr[-3000:]
    assert "FORGED" in p.stdout  # the path is shown ...
    assert not _forged(p.stdout) and not _forged(p.stderr)  # ... on its own line, its controls as escapes
    if fmt == "github":
        assert all(ln.startswith(("::", "stackdoctor: ")) for ln in p.stdout.splitlines() if ln), p.stdout
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(p.stdout)
        for el in root.iter():
            for value in [*el.attrib.values(), el.text or ""]:
                assert "\x1b" not in value and "\nFORGED" not in value, value
    if fmt == "json":
        assert json.loads(p.stdout)["facts"]["python"]["executable"] == str(hostile_venv)  # the data stays true


def test_a_newline_and_an_esc_in_the_python_path_forge_nothing_in_install(hostile_venv, tmp_path, src):
    src.write_folder(tmp_path / "wh", [T13, *DEPS])
    args = ["--python", str(hostile_venv), "--offline", "--find-links", str(tmp_path / "wh"), "--dry-run"]
    screen = sd(args, user_env(tmp_path))
    assert screen.returncode == 0, screen.stderr[-3000:]
    assert "FORGED" in screen.stdout and not _forged(screen.stderr) and not _forged(screen.stdout)
    js = sd([*args, "--json"], user_env(tmp_path))
    assert json.loads(js.stdout)["command"][0] == str(hostile_venv)
    missing = sd(["--python", str(hostile_venv) + "-gone", "--dry-run"], user_env(tmp_path))
    assert missing.returncode == 2 and "FORGED" in missing.stderr and not _forged(missing.stderr)


def test_a_shell_word_with_controls_is_one_line_that_bash_turns_back_into_the_value():
    import shutil

    from stackdoctor.core.shell import word

    for value in ["/v/ev\nFORGED\x1b[31m/bin/python", "it's \\ a\ttab\x85", "plain-path/x"]:
        w = word(value)
        assert "\n" not in w and "\x1b" not in w
        if shutil.which("bash"):
            assert subprocess.run(["bash", "-c", "printf %s " + w], capture_output=True, text=True).stdout == value
    assert word("C:\\x y\n\x1b$z", windows=True) == '"C:\\x y`n`e`$z"'
