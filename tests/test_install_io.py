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
