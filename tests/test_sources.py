"""Reading the installer's configuration as the installer does (stackdoctor/wheels/sources.py).

pip's load order is checked against real pip: the same files and variables are given to
``pip config list`` (pip 23.2.1 here) and to ``read_pip_config``, and the values must agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackdoctor.wheels.sources import (
    parse_pip_conf,
    parse_uv_toml,
    pip_config_files,
    read_pip_config,
    read_uv_config,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def layout(tmp_path):
    """global (XDG_CONFIG_DIRS), user (legacy and XDG_CONFIG_HOME), site (the venv prefix) files."""
    xdg = tmp_path / "xdg"
    home = tmp_path / "home"
    prefix = tmp_path / "prefix"
    write(xdg / "pip" / "pip.conf", "[global]\nindex-url = http://global/simple\ntimeout = 7\n[install]\nfind-links = /global-links\n")
    write(home / ".pip" / "pip.conf", "[global]\nindex-url = http://legacy-user/simple\nextra-index-url = http://legacy/extra\n")
    write(home / ".config" / "pip" / "pip.conf", "[global]\nextra-index-url =\n    http://user/a\n    http://user/b\n")
    write(prefix / "pip.conf", "[global]\ntrusted-host = site-host\n[install]\nno-index = false\n")
    env = {"HOME": str(home), "XDG_CONFIG_DIRS": str(xdg), "XDG_CONFIG_HOME": str(home / ".config"), "PATH": os.environ["PATH"]}
    return env, prefix, tmp_path


def real_pip_config(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """``pip config list`` of real pip: ``{"global.index-url": "...", ":env:.find-links": ...}``."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env=env, capture_output=True, text=True, cwd=cwd, check=True).stdout
    vals: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        vals[key] = value.strip().strip("'").replace("\\n", " ")
    return vals


def test_load_order_matches_real_pip(layout):
    env, _prefix, tmp = layout
    # pip config list runs in this interpreter, whose prefix is not `prefix`: compare without the site file
    real = real_pip_config(env, tmp)
    assert real["global.index-url"] == "http://legacy-user/simple" and real["install.find-links"] == "/global-links"  # user beats global
    assert real["global.extra-index-url"].split() == ["http://user/a", "http://user/b"]  # XDG user file beats the legacy one
    cfg = read_pip_config(env)
    assert [s.url for s in cfg.sources if s.role == "default"] == ["http://legacy-user/simple"]
    assert [s.url for s in cfg.sources if s.role == "extra"] == ["http://user/a", "http://user/b"]
    assert [s.url for s in cfg.sources if s.kind == "links"] == ["/global-links"]  # [install] over [global]
    assert cfg.origins["extra-index-url"].endswith(".config/pip/pip.conf [global] extra-index-url")


def test_site_file_env_file_and_variables_win_in_that_order(layout):
    env, prefix, tmp = layout
    envfile = write(tmp / "env.conf", "[global]\nindex-url = http://env-file/simple\n")
    cfg = read_pip_config({**env, "PIP_CONFIG_FILE": str(envfile)}, str(prefix))
    # PIP_CONFIG_FILE beats the global file; with it present the user files are not read at all
    assert cfg.default_index().url == "http://env-file/simple"  # type: ignore[union-attr]
    assert not [s for s in cfg.sources if s.role == "extra"]
    assert cfg.trusted_hosts == ["site-host"] and cfg.no_index is False
    real = real_pip_config({**env, "PIP_CONFIG_FILE": str(envfile)}, tmp)
    assert real["global.index-url"] == "http://env-file/simple" and "global.extra-index-url" not in real
    cfg2 = read_pip_config({**env, "PIP_CONFIG_FILE": str(envfile), "PIP_INDEX_URL": "http://var/simple", "PIP_NO_INDEX": "yes"}, str(prefix))
    assert cfg2.default_index().url == "http://var/simple" and cfg2.origins["index-url"] == "PIP_INDEX_URL"  # type: ignore[union-attr]
    assert cfg2.no_index is True


def test_devnull_loads_no_file_and_a_blank_variable_clears_a_list(layout):
    env, prefix, _tmp = layout
    assert pip_config_files({**env, "PIP_CONFIG_FILE": os.devnull}, str(prefix)) == []
    cfg = read_pip_config({**env, "PIP_CONFIG_FILE": os.devnull})
    assert [s.url for s in cfg.sources] == ["https://pypi.org/simple"]
    # an empty value is ignored (the file's list stays); a blank one clears it: what stackdoctor relies on
    assert [s.url for s in read_pip_config({**env, "PIP_EXTRA_INDEX_URL": ""}).sources if s.role == "extra"] == ["http://user/a", "http://user/b"]
    assert [s.url for s in read_pip_config({**env, "PIP_EXTRA_INDEX_URL": " "}).sources if s.role == "extra"] == []


def test_real_pip_honours_a_blank_extra_index_url(tmp_path):
    """The override stackdoctor uses to keep a dead extra index from pip, checked on real pip."""
    conf = write(tmp_path / "pip.conf", "[global]\nextra-index-url = http://127.0.0.1:9/dead\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PIP_CONFIG_FILE": str(conf), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp_path / "d"), "--index-url", "http://127.0.0.1:9/idx",
         "--retries", "0", "--timeout", "1", "nosuchpackage"],
        env={**env, "PIP_EXTRA_INDEX_URL": " "}, capture_output=True, text=True, cwd=tmp_path,
    )
    assert "Looking in indexes: http://127.0.0.1:9/idx\n" in shown.stdout, shown.stdout
    assert "/dead" not in shown.stdout + shown.stderr


def test_parse_pip_conf_is_pip_like_and_total():
    data = parse_pip_conf("[global]\nINDEX_URL = http://x\n--find-links = /a /b\n[install]\nno_index = 1\n")
    assert data == {"global": {"index-url": "http://x", "find-links": "/a /b"}, "install": {"no-index": "1"}}
    assert parse_pip_conf("no section header\n") == {}
    assert parse_pip_conf("[global]\n[global]\n") == {}


def test_uv_project_user_and_environment(tmp_path):
    project = tmp_path / "proj"
    sub = project / "src" / "pkg"
    sub.mkdir(parents=True)
    write(project / "pyproject.toml", '[project]\nname="x"\n[tool.uv]\nfind-links = ["/proj-links"]\n[[tool.uv.index]]\nname = "torch"\nurl = "http://torch/whl/cpu"\n[[tool.uv.index]]\nurl = "http://mirror/simple"\ndefault = true\n[[tool.uv.index]]\nname = "flat"\nurl = "http://flat/cpu/"\nformat = "flat"\n')
    write(tmp_path / "cfg" / "uv" / "uv.toml", 'extra-index-url = ["http://user/extra"]\n')
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CONFIG_DIRS": str(tmp_path / "nosys")}
    cfg = read_uv_config(env, sub)  # found from a subfolder, as uv searches upwards
    assert [(s.url, s.role, s.kind) for s in cfg.sources] == [
        ("http://torch/whl/cpu", "extra", "index"),
        ("http://user/extra", "extra", "index"),
        ("http://mirror/simple", "default", "index"),
        ("http://flat/cpu/", "links", "links"),
        ("/proj-links", "links", "links"),
    ]
    assert cfg.sources[0].origin == f"{project / 'pyproject.toml'} [tool.uv] index torch"
    env2 = {**env, "UV_INDEX": "first=http://env/a http://env/b", "UV_DEFAULT_INDEX": "http://env/default", "UV_FIND_LINKS": "/x,/y"}
    cfg2 = read_uv_config(env2, sub)
    assert [s.url for s in cfg2.sources[:2]] == ["http://env/a", "http://env/b"] and cfg2.sources[0].name == "first"
    assert cfg2.default_index().url == "http://env/default"  # type: ignore[union-attr]
    assert [s.url for s in cfg2.links[:2]] == ["/x", "/y"]  # UV_FIND_LINKS is comma-separated
    assert [s.url for s in read_uv_config({**env, "UV_NO_CONFIG": "1"}, sub).sources] == ["https://pypi.org/simple"]


def test_uv_toml_wins_over_pyproject_and_pip_section_over_top_level(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.uv]\nindex-url = "http://pyproject/simple"\n')
    write(tmp_path / "uv.toml", 'index-url = "http://top/simple"\n[pip]\nindex-url = "http://pip-section/simple"\n')
    cfg = read_uv_config({"HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path / "none")}, tmp_path)
    assert cfg.default_index().url == "http://pip-section/simple"  # type: ignore[union-attr]
    assert parse_uv_toml("not = [toml") is None and parse_uv_toml('[project]\nname="x"\n', pyproject=True) is None
