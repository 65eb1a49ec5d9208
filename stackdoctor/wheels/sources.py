"""Where the user's installer looks for packages: pip's and uv's configuration, read as they read it.

pip (checked against pip 23.2.1's ``pip/_internal/configuration.py`` and ``cli/parser.py``, and by
experiment with ``pip config list`` on this machine):

- files, later winning: *global* (``pip/pip.conf`` under each ``XDG_CONFIG_DIRS`` entry, default
  ``/etc/xdg``, then ``/etc/pip.conf``), *user* (``~/.pip/pip.conf``, then
  ``$XDG_CONFIG_HOME/pip/pip.conf``; skipped when ``PIP_CONFIG_FILE`` names a file that exists),
  *site* (``<sys.prefix of the target>/pip.conf``), then the ``PIP_CONFIG_FILE`` file itself; then the
  ``PIP_*`` variables. ``PIP_CONFIG_FILE=/dev/null`` loads no file at all. (pip's documentation says
  the ``PIP_CONFIG_FILE`` file is loaded *first*; its code gives it precedence over the others.)
- values merge per ``section.key`` across files; then ``[global]`` < ``[install]`` < ``PIP_*``;
  an empty value is ignored; list options (``extra-index-url``, ``find-links``, ``trusted-host``) are
  split on whitespace, so ``PIP_EXTRA_INDEX_URL=" "`` clears the list while ``""`` does not.

uv (``uv help pip install`` of uv 0.13.9 and https://docs.astral.sh/uv/concepts/configuration-files/):

- ``UV_NO_CONFIG`` reads no file; ``UV_CONFIG_FILE`` reads only that one; otherwise the project file
  (``uv.toml``, else ``pyproject.toml`` with a ``[tool.uv]`` table, in the current directory or the
  nearest parent that has one), the user file (``$XDG_CONFIG_HOME/uv/uv.toml``) and the system file
  (``$XDG_CONFIG_DIRS/uv/uv.toml``, else ``/etc/uv/uv.toml``). Scalars: project > user > system;
  arrays are joined, project first. ``[pip]`` settings win over top-level ones for ``uv pip``.
- ``UV_DEFAULT_INDEX`` / ``UV_INDEX_URL`` replace the default index; ``UV_INDEX`` (space-separated,
  ``name=url`` allowed) and ``UV_EXTRA_INDEX_URL`` add indexes ahead of the configured ones;
  ``UV_FIND_LINKS`` is comma-separated (verified with uv 0.13.9); ``UV_OFFLINE`` stops network access.
  uv reads no pip configuration.

The parsers (``parse_pip_conf``, ``parse_uv_toml``) are pure and never raise; reading files is the
only I/O here, and an unreadable or malformed file becomes a note, never an exception.
"""

from __future__ import annotations

import configparser
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PIP_LIST_KEYS = ("extra-index-url", "find-links", "trusted-host")
PIP_KEYS = ("index-url", "extra-index-url", "find-links", "no-index", "trusted-host", "proxy", "cert", "client-cert", "constraint", "keyring-provider")
_TRUE = {"y", "yes", "t", "true", "on", "1"}
_FALSE = {"n", "no", "f", "false", "off", "0"}


# ---------------------------------------------------------------------------- data


@dataclass
class Source:
    """One place packages can come from.

    ``kind``: ``index`` (a PEP 503/691 root: ``<url>/<project>/``) or ``links`` (a find-links location:
    a folder, a local HTML file or a page of file links). ``role``: ``default`` (pip's index-url, uv's
    default index), ``extra`` (pip extra-index-url, uv index), ``links``, ``pytorch`` (the PyTorch
    variant index stackdoctor adds), ``mirror`` (a ``--mirror``). ``configured``: the installer uses
    it unasked (configuration or environment); otherwise stackdoctor must add it to the command.
    """

    url: str
    kind: str = "index"
    role: str = "extra"
    origin: str = ""
    configured: bool = True
    name: str | None = None
    explicit: bool = False

    @property
    def local(self) -> bool:
        """A folder, a file, or a ``file://`` URL: readable without a network."""
        return is_local(self.url)

    def label(self) -> str:
        return f"{self.url} ({self.origin})" if self.origin else self.url


@dataclass
class InstallerConfig:
    """What one installer (pip or uv) will use, with the origin of each value."""

    installer: str = "pip"
    sources: list[Source] = field(default_factory=list)
    no_index: bool = False
    offline: bool = False
    constraints: list[str] = field(default_factory=list)  # pip constraint files
    proxy: str | None = None
    cert: str | None = None
    client_cert: str | None = None
    trusted_hosts: list[str] = field(default_factory=list)
    keyring_provider: str | None = None  # pip's keyring-provider
    files: list[str] = field(default_factory=list)  # configuration files read, in load order
    origins: dict[str, str] = field(default_factory=dict)  # setting -> where it came from
    notes: list[str] = field(default_factory=list)  # unreadable / malformed files

    @property
    def indexes(self) -> list[Source]:
        return [s for s in self.sources if s.kind == "index"]

    @property
    def links(self) -> list[Source]:
        return [s for s in self.sources if s.kind == "links"]

    def default_index(self) -> Source | None:
        return next((s for s in self.sources if s.role == "default"), None)


# ---------------------------------------------------------------------------- helpers


def pypi_simple() -> str:
    """pip's and uv's built-in default index (PyPI), from the matrix's ``indexes.pypi`` row."""
    from stackdoctor.matrix import default_index_url

    return default_index_url("pypi")


def is_local(location: str) -> bool:
    return location.startswith("file:") or "://" not in location


def as_pip_takes_it(location: str, cwd: str | None = None) -> str:
    """A ``--find-links`` value as pip reads it: a URL (``file:`` included) unchanged, a path with ``~``
    expanded and made absolute against the current directory (``m/sw`` -> ``/home/me/proj/m/sw``), so that
    every later reader, and the installer whatever its working directory, sees the same folder."""
    if not is_local(location) or location.startswith("file:"):
        return location
    path = os.path.expanduser(location)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(cwd or os.getcwd(), path))


def _strtobool(value: str) -> bool | None:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return None


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


# ---------------------------------------------------------------------------- pip


def parse_pip_conf(text: str) -> dict[str, dict[str, str]]:
    """``{section: {key: value}}`` of a pip.conf (INI, as pip's RawConfigParser reads it).

    Keys are normalised as pip does (lower case, ``_`` -> ``-``, no leading ``--``). A file that
    configparser rejects gives ``{}`` (pip itself stops with an error on such a file).
    """
    cp = configparser.RawConfigParser()
    try:
        cp.read_string(text)
    except (configparser.Error, ValueError, TypeError, RecursionError):
        return {}
    out: dict[str, dict[str, str]] = {}
    for section in cp.sections():
        items: dict[str, str] = {}
        try:
            for key, value in cp.items(section):
                items[_pip_key(key)] = value if isinstance(value, str) else ""
        except (configparser.Error, ValueError):
            continue
        out[section] = items
    return out


def _pip_key(name: str) -> str:
    name = name.strip().lower().replace("_", "-")
    return name[2:] if name.startswith("--") else name


def pip_config_files(env: Mapping[str, str], prefix: str | None = None, *, isolated: bool = False) -> list[tuple[str, Path]]:
    """``(kind, path)`` of pip's configuration files in load order (later wins)."""
    explicit = env.get("PIP_CONFIG_FILE")
    if explicit is not None and explicit == os.devnull:
        return []
    home = _home(env)
    out: list[tuple[str, Path]] = []
    if sys.platform == "darwin":  # pragma: no cover - the global location pip uses on macOS
        out.append(("global", Path("/Library/Application Support/pip/pip.conf")))
    else:
        xdg_dirs = env.get("XDG_CONFIG_DIRS") or "/etc/xdg"
        out += [("global", Path(d) / "pip" / "pip.conf") for d in xdg_dirs.split(os.pathsep) if d]
        out.append(("global", Path("/etc/pip.conf")))
    if not isolated and not (explicit and os.path.exists(explicit)):
        out.append(("user", home / ".pip" / "pip.conf"))
        out.append(("user", Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf"))
    if prefix:
        out.append(("site", Path(prefix) / "pip.conf"))
    if explicit:
        out.append(("env", Path(explicit)))
    return out


def _read_text(path: Path, notes: list[str]) -> str | None:
    try:
        # user configuration, not a probed machine file: read directly (never under the sysroot)
        if not path.is_file():
            return None
        if path.stat().st_size > 1024 * 1024:
            notes.append(f"{path}: larger than 1 MiB, not read")
            return None
        from stackdoctor.system import read_bounded

        return read_bounded(path, 1024 * 1024).decode("utf-8", errors="replace")
    except OSError as exc:
        notes.append(f"{path}: cannot be read ({exc.strerror or exc})")
        return None


def _pip_effective(env: Mapping[str, str], prefix: str | None, cfg: InstallerConfig) -> dict[str, tuple[str, str]]:
    """key -> (value, origin) as pip takes them: its files in order, ``[global]`` then ``[install]``, then ``PIP_*``."""
    merged: dict[str, tuple[str, str]] = {}  # "section.key" -> (value, origin)
    for _kind, path in pip_config_files(env, prefix):
        text = _read_text(path, cfg.notes)
        if text is None:
            continue
        data = parse_pip_conf(text)
        if not data and text.strip() and "[" in text:
            cfg.notes.append(f"{path}: not a valid pip configuration file (pip would stop on it)")
        cfg.files.append(str(path))
        for section, items in data.items():
            for key, value in items.items():
                merged[f"{section}.{key}"] = (value, f"{path} [{section}] {key}")
    for var, value in env.items():
        if var.startswith("PIP_") and var not in ("PIP_CONFIG_FILE",):
            merged[f":env:.{_pip_key(var[4:])}"] = (value, var)
    effective: dict[str, tuple[str, str]] = {}
    for section in ("global", "install", ":env:"):
        for skey, (value, origin) in merged.items():
            sec, _, key = skey.partition(".")
            if sec == section and value:  # pip ignores empty values
                effective[key] = (value, origin)
    return effective


def read_pip_config(env: Mapping[str, str], prefix: str | None = None) -> InstallerConfig:
    """pip's effective index / find-links / network settings for ``pip install`` in the target."""
    cfg = InstallerConfig("pip")
    effective = _pip_effective(env, prefix, cfg)
    for key, (_value, origin) in effective.items():
        if key in PIP_KEYS:
            cfg.origins[key] = origin
    index_url = effective.get("index-url", (pypi_simple(), "pip's default (PyPI)"))
    cfg.sources.append(Source(index_url[0].strip(), "index", "default", index_url[1]))
    if "extra-index-url" in effective:
        value, origin = effective["extra-index-url"]
        cfg.sources += [Source(u, "index", "extra", origin) for u in value.split()]
    if "find-links" in effective:
        value, origin = effective["find-links"]
        cfg.sources += [Source(u, "links", "links", origin) for u in value.split()]
    if "no-index" in effective:
        cfg.no_index = bool(_strtobool(effective["no-index"][0]))
    if "trusted-host" in effective:
        cfg.trusted_hosts = effective["trusted-host"][0].split()
    for key, attr in (("proxy", "proxy"), ("cert", "cert"), ("client-cert", "client_cert"), ("keyring-provider", "keyring_provider")):
        if key in effective:
            setattr(cfg, attr, effective[key][0].strip() or None)
    if "constraint" in effective:
        cfg.constraints = effective["constraint"][0].split()
    return cfg


# ---------------------------------------------------------------------------- uv


def parse_uv_toml(text: str, *, pyproject: bool = False) -> dict[str, Any] | None:
    """The uv settings table of a ``uv.toml`` (or ``[tool.uv]`` of a pyproject.toml); ``None`` when
    there is none (a pyproject.toml without ``[tool.uv]``) or the TOML is invalid."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    try:
        data = tomllib.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    if pyproject:
        tool = data.get("tool")
        uv = tool.get("uv") if isinstance(tool, dict) else None
        return uv if isinstance(uv, dict) else None
    return data if isinstance(data, dict) else None


def _uv_project_file(cwd: Path, notes: list[str]) -> tuple[Path, dict[str, Any]] | None:
    for d in [cwd, *cwd.parents]:
        for name, pyproject in (("uv.toml", False), ("pyproject.toml", True)):
            path = d / name
            text = _read_text(path, notes)
            if text is None:
                continue
            table = parse_uv_toml(text, pyproject=pyproject)
            if table is None:
                if not pyproject:
                    notes.append(f"{path}: not valid TOML (uv would stop on it)")
                continue
            return path, table
    return None


def _uv_files(env: Mapping[str, str], cwd: Path, notes: list[str]) -> list[tuple[str, Path, dict[str, Any]]]:
    if (env.get("UV_NO_CONFIG") or "").strip().lower() not in ("", "0", "false", "no"):
        return []
    explicit = env.get("UV_CONFIG_FILE")
    if explicit:
        text = _read_text(Path(explicit), notes)
        table = parse_uv_toml(text) if text is not None else None
        return [("file", Path(explicit), table)] if table is not None else []
    out: list[tuple[str, Path, dict[str, Any]]] = []
    found = _uv_project_file(cwd, notes)
    if found:
        out.append(("project", found[0], found[1]))
    home = _home(env)
    user = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "uv" / "uv.toml"
    system_dirs = [Path(d) / "uv" / "uv.toml" for d in (env.get("XDG_CONFIG_DIRS") or "").split(os.pathsep) if d]
    system_dirs.append(Path("/etc/uv/uv.toml"))
    for kind, candidates in (("user", [user]), ("system", system_dirs)):
        for path in candidates:
            text = _read_text(path, notes)
            table = parse_uv_toml(text) if text is not None else None
            if table is not None:
                out.append((kind, path, table))
                break
    return out


def _strs(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _uv_settings(table: dict[str, Any]) -> dict[str, Any]:
    """Top-level settings with ``[pip]`` ones winning (uv pip commands)."""
    out = {k: v for k, v in table.items() if k in ("index", "index-url", "extra-index-url", "find-links", "no-index", "offline")}
    pip = table.get("pip")
    if isinstance(pip, dict):
        for k in ("index", "index-url", "extra-index-url", "find-links", "no-index"):
            if k in pip:
                out[k] = pip[k]
    return out


def _split_named(value: str) -> tuple[str | None, str]:
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)=(.+)$", value)
    if m and "://" not in m.group(1):
        return m.group(1), m.group(2)
    return None, value


@dataclass
class _UvSources:
    """uv's sources as they are found: extra indexes, find-links, the one default index (the first found wins)."""

    extra: list[Source] = field(default_factory=list)
    links: list[Source] = field(default_factory=list)
    default: Source | None = None
    no_index: bool | None = None


def _uv_env_sources(env: Mapping[str, str], found: _UvSources) -> None:
    """The environment first: it takes precedence (its indexes come before the configured ones)."""
    for raw in (env.get("UV_INDEX") or "").split():
        name, url = _split_named(raw)
        found.extra.append(Source(url, "index", "extra", "UV_INDEX", name=name))
    for url in (env.get("UV_EXTRA_INDEX_URL") or "").split():
        found.extra.append(Source(url, "index", "extra", "UV_EXTRA_INDEX_URL"))
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        if env.get(var, "").strip() and found.default is None:
            name, url = _split_named(env[var].strip())
            found.default = Source(url, "index", "default", var, name=name)
    for url in (env.get("UV_FIND_LINKS") or "").split(","):
        if url.strip():
            found.links.append(Source(url.strip(), "links", "links", "UV_FIND_LINKS"))


def _uv_index_tables(settings: dict[str, Any], where: str, found: _UvSources) -> None:
    """``[[index]]`` tables: a flat one is find-links, ``default = true`` the default index."""
    for i, idx in enumerate(settings.get("index") or [] if isinstance(settings.get("index"), list) else []):
        if not isinstance(idx, dict) or not isinstance(idx.get("url"), str):
            continue
        name = idx.get("name") if isinstance(idx.get("name"), str) else None
        origin = f"{where} index {name or i}"
        kind = "links" if idx.get("format") == "flat" else "index"
        src = Source(idx["url"], kind, "links" if kind == "links" else "extra", origin, name=name, explicit=bool(idx.get("explicit")))
        if idx.get("default") is True and kind == "index":
            src.role = "default"
            if found.default is None:
                found.default = src
            continue
        (found.links if kind == "links" else found.extra).append(src)


def _uv_file_sources(cfg: InstallerConfig, path: Path, table: dict[str, Any], found: _UvSources) -> None:
    settings = _uv_settings(table)
    where = f"{path}" + (" [tool.uv]" if path.name == "pyproject.toml" else "")
    _uv_index_tables(settings, where, found)
    if isinstance(settings.get("index-url"), str) and found.default is None:
        found.default = Source(settings["index-url"], "index", "default", f"{where} index-url")
    for url in _strs(settings.get("extra-index-url")):
        found.extra.append(Source(url, "index", "extra", f"{where} extra-index-url"))
    for url in _strs(settings.get("find-links")):
        found.links.append(Source(url, "links", "links", f"{where} find-links"))
    if isinstance(settings.get("no-index"), bool) and found.no_index is None:
        found.no_index = settings["no-index"]
        cfg.origins["no-index"] = f"{where} no-index"
    if isinstance(table.get("offline"), bool) and table["offline"]:
        cfg.offline = True
        cfg.origins["offline"] = f"{where} offline"


def read_uv_config(env: Mapping[str, str], cwd: str | Path | None = None) -> InstallerConfig:
    """uv's effective indexes and find-links for ``uv pip install`` run in ``cwd``."""
    cfg = InstallerConfig("uv")
    files = _uv_files(env, Path(cwd or os.getcwd()), cfg.notes)
    cfg.files = [str(p) for _, p, _ in files]
    found = _UvSources()
    _uv_env_sources(env, found)
    for _kind, path, table in files:
        _uv_file_sources(cfg, path, table, found)
    if (env.get("UV_OFFLINE") or "").strip().lower() not in ("", "0", "false", "no"):
        cfg.offline = True
        cfg.origins["offline"] = "UV_OFFLINE"
    cfg.no_index = bool(found.no_index)
    cfg.sources = found.extra + [found.default or Source(pypi_simple(), "index", "default", "uv's default (PyPI)")] + found.links
    return cfg


# ---------------------------------------------------------------------------- both


def read_config(installer: str, env: Mapping[str, str], *, prefix: str | None = None, cwd: str | Path | None = None) -> InstallerConfig:
    """The configuration of the installer stackdoctor will run (``uv`` or anything else -> pip)."""
    if installer == "uv":
        cfg = read_uv_config(env, cwd)
        # uv reads no pip configuration; the index check still uses pip's proxy/cert settings when
        # present, since those describe the network the user is on
        pipcfg = read_pip_config(env, prefix)
        cfg.proxy, cfg.cert, cfg.client_cert, cfg.trusted_hosts = pipcfg.proxy, pipcfg.cert, pipcfg.client_cert, pipcfg.trusted_hosts
        return cfg
    return read_pip_config(env, prefix)


def describe(cfg: InstallerConfig) -> list[str]:
    """One line per source, for ``-v`` style output and tests."""
    return [f"{s.kind} {s.url} [{s.role}] from {s.origin}" for s in cfg.sources]


def dedupe(sources: Sequence[Source]) -> list[Source]:
    seen: set[tuple[str, str]] = set()
    out: list[Source] = []
    for s in sources:
        key = (s.kind, s.url.rstrip("/"))
        if key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out


PYPI_HOSTS = ("pypi.org", "pypi.python.org")


def is_pypi(url: str | None) -> bool:
    """A URL that is PyPI itself (or none: the installer's default)."""
    return not url or any(h in url for h in PYPI_HOSTS)
