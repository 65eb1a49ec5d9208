"""The network as pip sees it, for the index check: pip's network options (proxy, CA bundle, client certificate,
trusted hosts, keyring provider), credentials from ``~/.netrc`` as pip (through requests) finds them, and the TLS
context they make."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackdoctor.core.errors import IndexError_


@dataclass
class NetworkSettings:
    """What the index check borrows from the user's configuration (pip's wins over the environment)."""

    proxy: str | None = None
    cert: str | None = None  # CA bundle
    client_cert: str | None = None
    trusted_hosts: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    keyring_provider: str | None = None  # pip's keyring-provider (auto, import, subprocess; "disabled" is None)


def network_settings(env: Mapping[str, str], prefix: str | None = None) -> NetworkSettings:
    """pip's network options as pip would see them (files in pip's load order, ``[global]`` then
    ``[install]``, then ``PIP_*``): see :func:`stackdoctor.wheels.sources.read_pip_config`."""
    from stackdoctor.wheels.sources import read_pip_config

    cfg = read_pip_config(env, prefix if prefix is not None else env.get("VIRTUAL_ENV"))
    out = NetworkSettings(proxy=cfg.proxy, cert=cfg.cert, client_cert=cfg.client_cert, trusted_hosts=list(cfg.trusted_hosts))
    for key, attr in (("proxy", "proxy"), ("cert", "cert"), ("client-cert", "client_cert"), ("trusted-host", "trusted_hosts")):
        if key in cfg.origins:
            out.sources[attr] = cfg.origins[key]
    if cfg.keyring_provider and cfg.keyring_provider.lower() != "disabled":
        out.keyring_provider = cfg.keyring_provider
    return out


def netrc_file(env: Mapping[str, str]) -> Path | None:
    """The netrc file pip (through requests) reads: ``NETRC``, else ``~/.netrc``, else ``~/_netrc``."""
    if env.get("NETRC"):
        return Path(env["NETRC"]).expanduser()
    home = env.get("HOME") or os.path.expanduser("~")
    for name in (".netrc", "_netrc"):
        path = Path(home) / name
        if path.is_file():
            return path
    return None


def netrc_credentials(env: Mapping[str, str], host: str) -> tuple[str, str] | None:
    """``(login, password)`` for ``host`` (its ``machine`` entry, else ``default``) from the user's netrc, as
    requests looks them up for pip; a missing or malformed file is no credentials (requests ignores it too)."""
    import netrc

    path = netrc_file(env)
    if path is None or not host:
        return None
    try:
        found = netrc.netrc(str(path)).authenticators(host)
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return None
    if not found:
        return None
    login, _account, password = found
    return (login or "", password or "")


def _basic(user: str, password: str) -> str:
    import base64

    raw = f"{user}:{password}"
    try:
        data = raw.encode("latin-1")  # as requests (pip) encodes them
    except UnicodeEncodeError:
        data = raw.encode("utf-8")
    return "Basic " + base64.b64encode(data).decode("ascii")


def auth_class() -> Any:
    import httpx

    class PipAuth(httpx.Auth):
        """Credentials where pip finds them: the URL's own ``user:password@``, else the netrc entry of its host."""

        def __init__(self, env: Mapping[str, str]) -> None:
            self.env = env

        def auth_flow(self, request: httpx.Request) -> Any:
            url = request.url
            cred = (url.username, url.password) if url.username else netrc_credentials(self.env, url.host)
            if cred is not None and "Authorization" not in request.headers:
                request.headers["Authorization"] = _basic(*cred)
            yield request

    return PipAuth


def ssl_context(settings: NetworkSettings, env: Mapping[str, str]) -> Any:
    import ssl

    cafile = settings.cert or env.get("SSL_CERT_FILE") or None
    capath = None if settings.cert else (env.get("SSL_CERT_DIR") or None)
    try:
        if cafile or capath:
            ctx = ssl.create_default_context(cafile=cafile if cafile and os.path.isfile(cafile) else None, capath=capath if capath and os.path.isdir(capath) else None)
            if cafile and os.path.isdir(cafile):
                ctx.load_verify_locations(capath=cafile)
        else:
            try:
                import certifi

                ctx = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                ctx = ssl.create_default_context()
        if settings.client_cert:
            ctx.load_cert_chain(settings.client_cert)
    except (OSError, ssl.SSLError) as exc:
        raise IndexError_(f"the certificate settings cannot be used ({settings.sources.get('cert') or 'SSL_CERT_FILE'}): {exc}.") from None
    return ctx


# ---------------------------------------------------------------------------- one budget for every network read


BUDGET_S_ENV = "STACKDOCTOR_NET_BUDGET_S"  # seconds for every network read of one run (default: no run-wide limit)
BUDGET_MB_ENV = "STACKDOCTOR_NET_BUDGET_MB"  # MiB for every network read of one run (default: no run-wide limit)


class Budget:
    """Bytes and time for network reads, checked on EVERY read (issue 44: a body that trickles one byte at a time
    kept a run waiting, because the socket's read timeout starts again with each byte and the time was checked per
    MiB). A budget made by :meth:`part` (one page, one wheel) has its own cap and deadline and charges its parent,
    so the run's budget (``STACKDOCTOR_NET_BUDGET_S`` / ``STACKDOCTOR_NET_BUDGET_MB``) bounds every read of the run."""

    def __init__(self, max_bytes: float = float("inf"), seconds: float = float("inf"), *, parent: Budget | None = None,
                 what: str = "") -> None:
        import time

        self.max_bytes = max_bytes
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.parent = parent
        self.used = 0
        self.what = what

    @classmethod
    def of_run(cls, env: Mapping[str, str]) -> Budget:
        """The run's budget from the environment; a value that is not a positive number is no limit."""

        def num(name: str) -> float:
            try:
                v = float(env.get(name) or "inf")
            except ValueError:
                return float("inf")
            return v if v > 0 else float("inf")

        return cls(num(BUDGET_MB_ENV) * (1 << 20), num(BUDGET_S_ENV), what="run")

    def part(self, max_bytes: float = float("inf"), seconds: float = float("inf")) -> Budget:
        """A budget for one read (a page, a wheel) inside this one."""
        return Budget(max_bytes, seconds, parent=self)

    def left_s(self) -> float:
        import time

        now = time.monotonic()
        out = self.deadline - now
        return min(out, self.parent.left_s()) if self.parent is not None else out

    def timeout(self, per_read: float) -> Any:
        """The ``httpx.Timeout`` of one request: no wait on the socket longer than the time left."""
        import httpx

        left = self.left_s()
        return httpx.Timeout(max(0.05, min(per_read, left)))

    def take(self, n: int, url: str) -> None:
        """Charge ``n`` bytes just read; one :class:`IndexError_` sentence when a cap or a deadline is passed."""
        node: Budget | None = self
        while node is not None:
            node.used += n
            if node.used > node.max_bytes:
                if node.what == "run":
                    raise IndexError_(f"{url}: the network reads of this run passed {BUDGET_MB_ENV}={node.max_bytes / (1 << 20):g} MiB; stopped.")
                raise IndexError_(f"{url}: reading it would take more than {int(node.max_bytes) // (1024 * 1024)} MiB; stopped.")
            node = node.parent
        self.check_time(url)

    def check_time(self, url: str) -> None:
        import time

        now = time.monotonic()
        node: Budget | None = self
        while node is not None:
            if now > node.deadline:
                if node.what == "run":
                    raise IndexError_(f"{url}: the network reads of this run passed {BUDGET_S_ENV}={node.seconds:g} s; stopped.")
                raise IndexError_(f"{url}: not read in {node.seconds:g} s; stopped.")
            node = node.parent
