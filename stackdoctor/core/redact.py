"""Redact a report before it leaves the machine: identities and secrets out, meaning kept.

:func:`redact_report` works on the JSON data of a report (``Report.to_data()``) and returns a
redacted copy. What goes:

- user names in home paths (``/home/alice/x`` -> ``<home>/x``; ``/Users/alice``; ``C:\\Users\\alice``)
  and the bare user name elsewhere (``<user>``);
- the host name (``facts.platform.hostname``) everywhere, raw tool outputs included (``<host-1>``);
- IPv4 addresses, keeping their kind (``<ip-linklocal-1>``, ``<ip-private-1>``, ``<ip-loopback-1>``,
  ``<ip-public-1>``, ``<ip-multicast-1>``), IPv6 likewise as ``<ip6-linklocal-1>``...; MAC addresses (``<mac-1>``);
- GPU / MIG / board / system UUIDs (``GPU-<gpu-uuid-1>``, ``MIG-<mig-uuid-1>``, ``<uuid-1>``: the
  ``GPU-`` prefix stays so ``CUDA_VISIBLE_DEVICES`` entries still read as UUIDs) and serial numbers;
- values of environment variables whose names look secret (TOKEN, KEY, SECRET, PASSWORD, ...);
- anything shaped like a known credential (``hf_``, ``ghp_``/``gho_``/..., ``github_pat_``, ``sk-``,
  ``xoxb-``, ``AKIA...``, JWTs, PEM private keys, ``user:pass@`` in URLs, ``Bearer ...``).

Replacements are stable within one report (the same host is ``<host-1>`` everywhere) and keep
the kind of value, so diagnosis rules that depend on the kind still hold after redaction; use
:func:`address_kind` and :func:`address_family` to ask about an address that may be redacted. Version fields
are never mistaken for IPv4 addresses (``nvidia-cudnn-cu12 9.1.0.70`` stays).
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import os
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "MASK",
    "DeviceIds",
    "Redactor",
    "address_family",
    "address_kind",
    "describe_counts",
    "escape_controls",
    "fix_undecodable",
    "has_credentials",
    "is_secret_name",
    "is_secret_param",
    "redact_report",
    "redact_text",
    "redact_url",
    "safe_copy",
    "safe_data",
    "scrub",
    "scrub_secrets",
]

# ---------------------------------------------------------------------------- patterns
# Every pattern runs over raw tool outputs of up to 4 MiB: no nested or unbounded-then-backtracking
# quantifiers (tests/test_redact.py times them on pathological input).

_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|APIKEY|API_KEY|ACCESS_?KEY|(?:^|_)KEYS?(?:_|$)|(?:^|_)PASS(?:_|$)|(?:^|_)PWD_)",
    re.IGNORECASE,
)
# In lower/mixed case text (JSON keys, kwargs) only unambiguous words count: Apple's "device_name_key" is no key.
_STRONG_SECRET_NAME = re.compile(r"(token|secret|passw(?:or)?d|passphrase|credential|api_?key|access_?key|private_?key|client_secret)", re.IGNORECASE)
# Names that match the pattern above but hold no secret.
_NOT_SECRET_NAMES = frozenset({"PIP_KEYRING_PROVIDER", "UV_KEYRING_PROVIDER", "SSH_AUTH_SOCK"})

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)
_URL_CREDS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://)(?P<userinfo>[^\s/@<>\"']+)@")
_CREDENTIALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("github-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("github-token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    ("hf-token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("api-key", re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("aws-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[A-Z0-9]{16}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    ("pypi-token", re.compile(r"\bpypi-[A-Za-z0-9_\-]{40,}")),
)
# What each credential pattern cannot match without (case-sensitive literals): a text with none of them is not
# searched by that pattern at all (issue 33: a report scrubs a thousand strings and then its whole text).
_CREDENTIAL_HINTS: dict[str, tuple[str, ...]] = {
    _CREDENTIALS[0][1].pattern: ("github_pat_",),
    _CREDENTIALS[1][1].pattern: ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _CREDENTIALS[2][1].pattern: ("hf_",),
    _CREDENTIALS[3][1].pattern: ("sk-",),
    _CREDENTIALS[4][1].pattern: ("xox",),
    _CREDENTIALS[5][1].pattern: ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA"),
    _CREDENTIALS[6][1].pattern: ("eyJ",),
    _CREDENTIALS[7][1].pattern: ("glpat-",),
    _CREDENTIALS[8][1].pattern: ("npm_",),
    _CREDENTIALS[9][1].pattern: ("pypi-",),
}
_BEARER = re.compile(r"(?i)\b(bearer|token|basic)(\s+)([A-Za-z0-9._~+/\-]{16,}=*)")
_CREDENTIAL_HINT = re.compile("|".join(re.escape(hint) for hints in _CREDENTIAL_HINTS.values() for hint in hints))
_BEARER_HINT = re.compile("bearer|token|basic")  # in a lower-cased ASCII text, as _BEARER's (?i) words
# A name _ASSIGN's callback replaces the value of (is_secret_name, _STRONG_SECRET_NAME) holds one of these, any case
_SECRET_NAME_HINT = re.compile("token|secret|pass|credential|auth|cookie|session|private|key|pwd_")
_SURROGATE = re.compile("[\ud800-\udfff]")
# NAME=value / NAME: value / "NAME": "value" where NAME looks secret (env dumps, collect_env, -q outputs)
_ASSIGN = re.compile(r"""(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)(?P<sep>["']?\s*[=:]\s*["']?)(?P<value>[^\s"',;]+)""")

_GPU_UUID = re.compile(r"\bGPU-(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{16})\b")
_MIG_UUID = re.compile(r"\bMIG-(?:GPU-)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?:/\d+/\d+)?")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# not part of a longer colon-hex run (IPv6, InfiniBand GIDs), but "mac:3c:22:..." is fine
_MAC = re.compile(
    r"(?<![0-9A-Fa-f])(?<![0-9A-Fa-f]{2}[:\-])(?:[0-9A-Fa-f]{2}([:\-]))(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![0-9A-Fa-f])(?![:\-][0-9A-Fa-f]{2}(?![0-9A-Za-z]))"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(?:\d{1,3}\.){3}\d{1,3}(?![0-9A-Za-z]|\.\d)")
_IPV6 = re.compile(r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{0,4}|(?:\d{1,3}\.){3}\d{1,3})(?:%[A-Za-z0-9_.\-]+)?(?![0-9A-Za-z:])")
_HOME = re.compile(
    # on whole path components only: /srv/x/home/alice is no /home/alice (that HOME is learnt as a whole, see _prime)
    r"(?<![^\s\"'=:;,(\[{<>|])(?P<pre>/home/|/Users/|/var/home/)(?P<user>[^/\\\s\"'<>:;,]+)"
    # Windows profile folders may hold spaces ("C:\\Users\\Bob Smith")
    r"|(?P<wpre>\b[A-Za-z]:[\\/]Users[\\/])(?P<wuser>[^/\\\r\n\"'<>:;,|*?]+)"
)
# "Serial Number : 1324...", "Serial Number (system): C02...", "serial_num" : "..." (nvidia-smi -q, system_profiler, dmidecode)
_SERIAL_LINE = re.compile(
    r"(?im)(?P<key>(?<![A-Za-z0-9])(?:serial(?:[ _]?(?:number|num|no))?|udid|uid|hardware[ _]uuid|board[ _]id)(?:[ _]key)?(?: \([a-z ]+\))?\"?\s*[:=]\s*\"?)(?P<value>[^\s\",]+)"
)
_PLAIN_VALUES = frozenset({"true", "false", "none", "null", "yes", "no", "on", "off", "unset", "required", "optional"})
_NOT_A_VALUE = frozenset({"n/a", "[n/a]", "none", "null", "not specified", "to be filled by o.e.m.", "default string", "0", "unknown", "[not supported]", "not supported", "-"})

# users / hosts that identify no one; never replaced outside their own field
_GENERIC_NAMES = frozenset(
    {"root", "user", "users", "admin", "ubuntu", "debian", "fedora", "centos", "runner", "jenkins", "gitlab-runner", "ec2-user",
     "pi", "vagrant", "docker", "localhost", "home", "public", "shared", "default", "guest", "test", "<home>", "<user>"}
)

# report paths where dotted numbers are versions, never addresses
_VERSION_CONTAINERS = frozenset({"distributions", "conda_packages", "config", "observed", "arch_list", "arch_list_files", "arch_list_torch", "arch_extra"})


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name suggests its value is a secret (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``)."""
    return name.upper() not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(name))


_ADDR_BEFORE = re.compile(r"(?:\binet6?|\baddr|\bsrc|\bdst|\bvia|\bpeer|\bfrom|\bhost|\bserver|\bnameserver|\bip|_ADDR|_HOST|@|//)[\s:=\"']*$", re.IGNORECASE)


def _address_context(m: re.Match[str]) -> bool:
    """Whether the text around an IPv4-shaped match says it is an address, not a version."""
    s, start, end = m.string, m.start(), m.end()
    if start == 0 and (end == len(s) or s[end] in "/:"):
        return True
    return bool(_ADDR_BEFORE.search(s[max(0, start - 16) : start]))


def _ip_kind(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if addr.is_unspecified:
        return None  # 0.0.0.0 / :: identify nothing
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "linklocal"
    if addr.is_multicast:
        return "multicast"
    if isinstance(addr, ipaddress.IPv4Address) and str(addr) == "255.255.255.255":
        return None
    if addr.is_private:
        return "private"
    return "public"


_TOKEN_KIND = re.compile(r"^<ip(6?)-(loopback|linklocal|multicast|private|public)-\d+>$")


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().split("/", 1)[0].split("%", 1)[0])
    except ValueError:
        return None


def address_kind(text: str) -> str | None:
    """``loopback`` / ``linklocal`` / ``multicast`` / ``private`` / ``public`` for an address, redacted or not.

    ``"169.254.3.1"``, ``"169.254.3.1/16"``, ``"<ip-linklocal-1>"`` and ``"<ip-linklocal-1>/16"`` are all ``linklocal``.
    """
    m = _TOKEN_KIND.match(text.strip().split("/", 1)[0])
    if m:
        return m.group(2)
    addr = _parse_ip(text)
    return _ip_kind(addr) if addr is not None else None


def address_family(text: str) -> int | None:
    """4 or 6 for an address, redacted (``<ip-...>`` is IPv4, ``<ip6-...>`` IPv6) or not; ``None`` otherwise."""
    m = _TOKEN_KIND.match(text.strip().split("/", 1)[0])
    if m:
        return 6 if m.group(1) else 4
    addr = _parse_ip(text)
    return addr.version if addr is not None else None


# ---------------------------------------------------------------------------- the output boundary
# Everything stackdoctor writes (screens, JSON documents, emitted files, relayed installer output, logs, the
# bundle) passes :func:`scrub`: credentials become ``****`` the way pip's ``redact_auth_from_url`` shows them,
# so a reader still sees *that* an index needed credentials (``https://alice:****@host``), never their value.

MASK = "****"

# a URL (scheme://...) up to white space or a quote; its userinfo is everything before the first @ of the authority
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{0,31}://[^\s\"'<>`]+")
_AUTHORITY_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31}://)(?P<userinfo>[^/?#@\s]*)@")
# user:password@host without a scheme (a URL's netloc quoted alone: "cannot connect to gina:pw@host:9")
_BARE_USERINFO = re.compile(r"(?<![\w/:.%+\-])(?P<user>[\w.%+\-]{1,64}):(?P<pw>[^\s/@:\"'<>]{1,256})@(?=[\w\[])")
# name=value pairs of a query string (or a fragment): ?a=1&b=2;c=3
_QUERY_PAIR = re.compile(r"(?P<pre>[?&;#])(?P<name>[^=&;#?\s]+)=(?P<value>[^&;#\s]*)")
_SECRET_PARAM_WORDS = re.compile(r"(token|secret|passw|signature|credential|api[-_]?key|access[-_]?key|private[-_]?key|auth)", re.IGNORECASE)
_SECRET_PARAM_NAMES = frozenset({"key", "sig", "pass", "pwd", "code", "session", "sessionid", "client_secret", "apikey", "sv_sig"})


def is_secret_param(name: str) -> bool:
    """Whether a URL query parameter carries a secret: ``token``, ``private_token``, ``access_token``,
    ``job_token``, ``key``, ``password``, ``secret``, ``signature``, ``sig`` (Azure SAS),
    ``X-Amz-Security-Token`` / ``X-Amz-Signature`` / ``X-Amz-Credential`` (S3 pre-signed), ``X-Goog-Signature``..."""
    low = name.lower()
    return low in _SECRET_PARAM_NAMES or bool(_SECRET_PARAM_WORDS.search(low))


def _mask_userinfo(userinfo: str) -> str:
    """pip's form: ``user:pass`` -> ``user:****``; a lone token (``ghp_...@``) -> ``****``."""
    if ":" in userinfo:
        return userinfo.split(":", 1)[0] + ":" + MASK
    return MASK


def redact_url(url: str, mask: Callable[[str, str], str] | None = None) -> str:
    """One URL with its userinfo and secret query parameters replaced.

    ``mask(kind, value)`` makes the replacement (``kind`` is ``"credentials"`` for the whole userinfo,
    ``"secret"`` for a parameter's value); the default is pip's ``****``."""
    m = _AUTHORITY_USERINFO.match(url)
    if m and m.group("userinfo") and not m.group("userinfo").startswith("<"):
        ui = m.group("userinfo")
        if mask is None:
            if ui.split(":", 1)[-1] != MASK and ui != MASK:
                url = m.group("scheme") + _mask_userinfo(ui) + "@" + url[m.end() :]
        else:
            url = m.group("scheme") + mask("credentials", ui) + "@" + url[m.end() :]
    if "=" not in url:
        return url

    def pair(q: re.Match[str]) -> str:
        value = q.group("value")
        if not value or not is_secret_param(q.group("name")) or value == MASK or value.startswith("<"):
            return q.group(0)
        return q.group("pre") + q.group("name") + "=" + (mask("secret", value) if mask else MASK)

    return _QUERY_PAIR.sub(pair, url)


def has_credentials(url: str) -> bool:
    """Whether a URL carries credentials (userinfo or a secret query parameter): a fact that may be shown."""
    return redact_url(url) != url


def _known_secrets(environ: Any) -> list[str]:
    """Values the environment holds that are secrets wherever they show up (``HF_TOKEN``'s value, a
    password inside ``PIP_INDEX_URL``): replaced as literals, so a value split or re-quoted by a tool
    (``%40``, ``user:pass`` on its own) still goes."""
    found: set[str] = set()
    for name, value in environ.items():
        if not isinstance(value, str) or not value:
            continue
        if is_secret_name(str(name)) and len(value) >= 6 and value.lower() not in _PLAIN_VALUES:
            found.add(value)
        if "://" in value:

            def keep(kind: str, v: str) -> str:
                found.add(v.split(":", 1)[-1] if kind == "credentials" else v)
                return v

            for url in _URL.findall(value):
                redact_url(url, keep)
    return sorted((v for v in found if len(v) >= 6), key=len, reverse=True)


_LITERALS: dict[str, Any] = {"key": None, "pattern": None, "env": None}


def _literal_pattern() -> re.Pattern[str] | None:
    # the secrets are looked for again only when the environment changed: a report scrubs ~1000 strings, and
    # reading (decoding) the whole environment for each was most of `check --no-kernels`' own time
    raw = getattr(os.environ, "_data", None)  # os._Environ's undecoded mapping: compared without decoding
    env = dict(raw) if isinstance(raw, dict) else dict(os.environ.items())
    if _LITERALS["env"] == env:
        cached: re.Pattern[str] | None = _LITERALS["pattern"]
        return cached
    _LITERALS["env"] = env
    values = _known_secrets(os.environ)
    key = "\0".join(values)
    if _LITERALS["key"] != key:
        _LITERALS["key"] = key
        _LITERALS["pattern"] = re.compile("|".join(re.escape(v) for v in values)) if values else None
    pattern: re.Pattern[str] | None = _LITERALS["pattern"]
    return pattern


def scrub_secrets(text: str, mask: Callable[[str, str], str] | None = None) -> str:
    """Credentials out of free text: URL userinfo and secret query parameters (:func:`redact_url`), tokens shaped
    like a known credential (``hf_``, ``ghp_``, ``AKIA...``, JWTs, PEM keys), ``NAME=value`` where NAME is a
    secret's name, and the secret values the environment holds. ``mask(kind, value)`` as for :func:`redact_url`."""
    if not text:
        return text
    sub = mask or (lambda _kind, _value: MASK)
    if "-----BEGIN" in text:
        text = _PEM.sub(lambda m: sub("private-key", m.group(0)), text)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0), mask), text)
    if "@" in text:
        text = _BARE_USERINFO.sub(lambda m: m.group(0) if m.group("pw") == MASK or m.group("pw").startswith("<") else m.group("user") + ":" + sub("secret", m.group("pw")) + "@", text)
    for kind, pat in _CREDENTIALS if _CREDENTIAL_HINT.search(text) else ():
        if not any(hint in text for hint in _CREDENTIAL_HINTS[pat.pattern]):
            continue  # the pattern cannot match: not searched

        def shaped(m: re.Match[str], kind: str = kind) -> str:
            return sub(kind, m.group(0))

        text = pat.sub(shaped, text)
    # (?i) patterns: the hints are only conclusive in ASCII text (re folds a few non-ASCII letters onto ASCII ones)
    low = text.lower() if text.isascii() else None
    if low is None or _BEARER_HINT.search(low):
        text = _BEARER.sub(lambda m: m.group(0) if m.group(3).startswith("<") or m.group(3) == MASK else m.group(1) + m.group(2) + sub("secret", m.group(3)), text)
        low = text.lower() if text.isascii() else None

    def assign(m: re.Match[str]) -> str:
        name, value = m.group("name"), m.group("value")
        secret = is_secret_name(name) if name.upper() == name else bool(_STRONG_SECRET_NAME.search(name))
        if not secret or value.startswith("<") or value == MASK or len(value) < 3 or value.lower() in _PLAIN_VALUES or "://" in value:
            return m.group(0)
        return name + m.group("sep") + sub("secret", value)

    if ("=" in text or ":" in text) and (low is None or _SECRET_NAME_HINT.search(low)):
        text = _ASSIGN.sub(assign, text)
    literal = _literal_pattern()
    if literal is not None:
        text = literal.sub(lambda m: sub("secret", m.group(0)), text)
    return text


def fix_undecodable(text: str) -> str:
    """A string decoded with ``surrogateescape`` (a non-UTF-8 path) with each undecodable byte written as
    ``\\xff``: visible, and encodable as UTF-8 (a lone surrogate is not)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    out = []
    for c in text:
        if "\udc80" <= c <= "\udcff":
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif "\ud800" <= c <= "\udfff":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def scrub(text: str) -> str:
    """What may leave stackdoctor: :func:`scrub_secrets` and :func:`fix_undecodable`."""
    return fix_undecodable(scrub_secrets(text))


# C0 (but the ones a layout keeps), DEL, C1, and the bidirectional overrides / isolates that reorder what is shown
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(m: re.Match[str]) -> str:
    c = m.group(0)
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def escape_controls(text: str, *, lines: bool = False) -> str:
    """``text`` with control characters shown, not obeyed: ESC (``\\x1b``), CR (``\\r``), other C0 and C1
    characters and bidi overrides (``\\u202e``) become visible escapes. ``lines``: keep LF and TAB (a tool's
    multi-line output); otherwise they are escaped too (one value is one line)."""
    return (_CONTROL if lines else _CONTROL_ALL).sub(_escape_one, text)


# dicts of environment variables (a report's facts.environment, a plan's command_env / a route's env)
ENV_DICTS = frozenset({"environment", "command_env", "env"})


def safe_data(obj: Any, *, screen: bool = False, lines_in: frozenset[str] = frozenset()) -> Any:
    """A copy of a JSON document fit to leave: every string :func:`scrub` bed; in a dict of environment variables
    (:data:`ENV_DICTS`) the value of a secret-named one (``HF_TOKEN``) ``****`` (that it is set stays a fact).
    ``screen``: control characters escaped too (:func:`escape_controls`), keeping line breaks only under the
    keys in ``lines_in`` (raw tool outputs)."""

    def walk(o: Any, lines: bool, env: bool) -> Any:
        if isinstance(o, str):
            o = scrub(o)
            return escape_controls(o, lines=lines) if screen else o
        if isinstance(o, dict):
            out: dict[Any, Any] = {}
            for k, v in o.items():
                key = fix_undecodable(k) if isinstance(k, str) else k
                if env and isinstance(k, str) and isinstance(v, str) and v and v != MASK and is_secret_name(k):
                    out[key] = MASK
                else:
                    out[key] = walk(v, lines or (isinstance(k, str) and k in lines_in), isinstance(k, str) and k in ENV_DICTS)
            return out
        if isinstance(o, (list, tuple)):
            return [walk(v, lines, False) for v in o]
        return o

    return walk(obj, False, False)


def safe_copy(obj: Any, *, screen: bool = False) -> Any:
    """A copy of a dataclass tree (a plan) with every string as :func:`safe_data` would leave it; for the
    objects that are drawn without a JSON round trip."""
    def walk(o: Any, key: str | None, env: bool = False) -> Any:
        if isinstance(o, str):
            if env and key is not None and o and o != MASK and is_secret_name(key):
                return MASK
            o = scrub(o)
            return escape_controls(o) if screen else o
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            changes = {f.name: walk(getattr(o, f.name), f.name) for f in dataclasses.fields(o) if f.init}
            return dataclasses.replace(o, **changes)
        if isinstance(o, dict):
            return {k: walk(v, k if isinstance(k, str) else None, key in ENV_DICTS) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v, None) for v in o]
        if isinstance(o, tuple):
            return tuple(walk(v, None) for v in o)
        return o

    return walk(obj, None)


# ---------------------------------------------------------------------------- the redactor


class Redactor:
    """Stable replacements: the same value of the same kind always gets the same ``<kind-N>``."""

    def __init__(self) -> None:
        self._tokens: dict[str, dict[str, str]] = {}
        # (pattern, replacement function, also inside facts)
        self.literals: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str], bool]] = []
        self.users: set[str] = set()
        self.gpu_uuids: list[str] = []  # full GPU UUIDs the facts name (for CUDA_VISIBLE_DEVICES prefixes)

    def token(self, kind: str, value: str, *, fold: bool = True) -> str:
        key = value.lower() if fold else value
        table = self._tokens.setdefault(kind, {})
        if key not in table:
            table[key] = f"<{kind}-{len(table) + 1}>"
        return table[key]

    @property
    def counts(self) -> dict[str, int]:
        """How many distinct values of each kind were replaced."""
        return {k: len(v) for k, v in self._tokens.items()}

    def add_literal(self, value: str, kind: str, *, fixed: str | None = None, in_facts: bool = True) -> None:
        """Replace ``value`` (case-insensitive, on word boundaries) wherever it appears.

        ``in_facts=False``: only in raw outputs and finding texts (a user called ``cuda`` must not
        turn ``facts.torch.variant`` into ``<user>``; in the facts user names only appear in paths).
        """
        if not value or len(value) < 3:
            return
        pat = re.compile(r"(?<![A-Za-z0-9_<\-])" + re.escape(value) + r"(?![A-Za-z0-9_>])", re.IGNORECASE)
        repl = fixed if fixed is not None else self.token(kind, value)
        self.literals.append((pat, _always(repl), in_facts))
        self.literals.sort(key=lambda pr: -len(pr[0].pattern))

    def _whole(self, kind: str) -> Callable[[re.Match[str]], str]:
        """A replacement that tokenises the whole match as ``kind``."""
        return lambda m: self.token(kind, m.group(0), fold=False)

    # -- one string
    def text(self, s: str, *, versions: bool = False, in_facts: bool = False) -> str:
        """Redact one string. ``versions``: a version field (no IPv4 redaction); ``in_facts``: a fact value."""
        if not s:
            return s
        s = _PEM.sub(lambda m: self.token("private-key", m.group(0), fold=False), s)
        # the output boundary's rules (userinfo, secret query parameters), with stable tokens instead of ****
        if "://" in s:
            s = _URL.sub(lambda m: redact_url(m.group(0), lambda kind, v: self.token(kind, v, fold=False)), s)
            s = _URL_CREDS.sub(lambda m: m.group(0) if m.group("userinfo").startswith("<") else m.group("scheme") + self.token("credentials", m.group("userinfo"), fold=False) + "@", s)
        if "@" in s:
            s = _BARE_USERINFO.sub(lambda m: m.group(0) if m.group("pw").startswith("<") else m.group("user") + ":" + self.token("secret", m.group("pw"), fold=False) + "@", s)
        for kind, pat in _CREDENTIALS:
            s = pat.sub(self._whole(kind), s)
        s = _BEARER.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) if m.group(3).startswith("<") else self.token("secret", m.group(3), fold=False)), s)
        s = _ASSIGN.sub(self._assign, s)
        s = _HOME.sub(self._home, s)
        for pat, repl, everywhere in self.literals:
            if everywhere or not in_facts:
                s = pat.sub(repl, s)
        # keep the GPU- / MIG- prefix: CUDA_VISIBLE_DEVICES rules recognise UUID entries by it
        s = _MIG_UUID.sub(lambda m: "MIG-" + self.token("mig-uuid", m.group(0)), s)
        s = _GPU_UUID.sub(lambda m: "GPU-" + self.token("gpu-uuid", m.group(0)), s)
        s = _UUID.sub(lambda m: self.token("uuid", m.group(0)), s)
        s = _MAC.sub(self._mac, s)
        s = _IPV6.sub(self._ip, s)
        if not versions:
            s = _IPV4.sub(self._ip, s)
        s = _SERIAL_LINE.sub(self._serial, s)
        return s

    def _assign(self, m: re.Match[str]) -> str:
        name, value = m.group("name"), m.group("value")
        secret = is_secret_name(name) if name.upper() == name else bool(_STRONG_SECRET_NAME.search(name))
        if not secret or value.startswith("<") or len(value) < 3 or value.lower() in _PLAIN_VALUES:
            return m.group(0)
        return name + m.group("sep") + self.token("secret", value, fold=False)

    def _home(self, m: re.Match[str]) -> str:
        user = m.group("user") or m.group("wuser")
        if user.startswith("<") or user.lower() in ("shared", "public", "default", "all users"):
            return m.group(0)
        self.users.add(user)
        return "<home>"

    def _mac(self, m: re.Match[str]) -> str:
        mac = m.group(0).replace("-", ":").lower()
        if mac in ("ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00"):  # broadcast / none: identify nothing
            return m.group(0)
        return self.token("mac", mac)

    def _ip(self, m: re.Match[str]) -> str:
        text = m.group(0)
        try:
            addr = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            return text
        kind = _ip_kind(addr)
        # 1.2.3.4-shaped versions (cuDNN 9.1.0.70) are far commoner than a machine's own address in 1.0.0.0/5,
        # unless the text says it is an address: a whole value ("3.14.15.92/24"), or after inet / src / @ / // ...
        if kind is None:
            return text
        if isinstance(addr, ipaddress.IPv4Address) and int(text.split(".", 1)[0]) < 10 and not _address_context(m):
            return text
        family = "ip" if isinstance(addr, ipaddress.IPv4Address) else "ip6"
        return self.token(f"{family}-{kind}", str(addr))

    def _serial(self, m: re.Match[str]) -> str:
        value = m.group("value")
        if value.lower() in _NOT_A_VALUE or value.startswith("<"):
            return m.group(0)
        return m.group("key") + self.token("serial", value, fold=False)


# ---------------------------------------------------------------------------- the report


@dataclasses.dataclass(frozen=True)
class DeviceIds:
    """Where the kinds name their devices (:func:`stackdoctor.kinds.device_ids`), and names that identify no one."""
    gpus: tuple[str, ...] = ()  # the facts subjects whose ``gpus`` entries carry a uuid / serial (both redacted)
    serials: tuple[str, ...] = ()  # those whose serials are also learnt, to be replaced in any text
    anonymous: frozenset[str] = frozenset()  # the user and host names a kind's systems ship with


def _get(data: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(data, dict):
            return None
        data = data.get(p)
    return data


def _always(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement that is always ``text``."""
    return lambda _m: text


def _obj(value: Any) -> dict[str, Any]:
    """``value`` where it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _prime(r: Redactor, data: dict[str, Any], ids: DeviceIds) -> None:
    """Learn the identifying values that the facts name, so they are replaced everywhere."""
    facts = _obj(data.get("facts"))
    platform = _obj(facts.get("platform"))
    generic = _generic_words(platform) | ids.anonymous
    _prime_host(r, platform, generic)
    _prime_devices(r, facts, ids)
    env = _obj(facts.get("environment"))
    _prime_secrets(r, env)
    _prime_home(r, env, generic)
    _prime_users(r, data, generic)


def _generic_words(platform: dict[str, Any]) -> set[str]:
    """Words that identify no one: the generic names and the words of the OS's own names."""
    generic = set(_GENERIC_NAMES)
    for key in ("os_id", "os_name", "system", "machine"):
        v = platform.get(key)
        if isinstance(v, str):
            generic.update(w.lower() for w in re.split(r"[\s/]+", v) if w)
    return generic


def _prime_host(r: Redactor, platform: dict[str, Any], generic: set[str]) -> None:
    """The host name and its first label, one token for both."""
    host = platform.get("hostname")
    if isinstance(host, str) and host.strip():
        host = host.strip()
        tok = r.token("host", host)
        short = host.split(".", 1)[0]
        if host.lower() not in generic:
            r.add_literal(host, "host", fixed=tok)
        if short != host and short.lower() not in generic and len(short) >= 3:
            r.add_literal(short, "host", fixed=tok)


def _prime_devices(r: Redactor, facts: dict[str, Any], ids: DeviceIds) -> None:
    """GPU serials and UUIDs, and the Thunderbolt peers' names."""
    for gpu in (g for sub in ids.serials for g in _get(facts, sub, "gpus") or []):
        if isinstance(gpu, dict) and isinstance(gpu.get("serial"), str) and gpu["serial"].strip().lower() not in _NOT_A_VALUE:
            r.add_literal(gpu["serial"].strip(), "serial")
    for sub in ids.gpus:
        for gpu in _get(facts, sub, "gpus") or []:
            if isinstance(gpu, dict) and isinstance(gpu.get("uuid"), str) and gpu["uuid"].strip():
                r.gpu_uuids.append(gpu["uuid"].strip())
                r.token("gpu-uuid", gpu["uuid"].strip())
    for port in _get(facts, "thunderbolt", "ports") or []:
        if isinstance(port, dict) and isinstance(port.get("peer"), str) and port["peer"].strip():
            r.add_literal(port["peer"].strip(), "peer", in_facts=False)


def _prime_secrets(r: Redactor, env: dict[str, Any]) -> None:
    """The values of environment variables whose names say they are secret."""
    for name, value in env.items():
        if isinstance(value, str) and is_secret_name(str(name)) and len(value) >= 4:
            r.add_literal(value, "secret", fixed=r.token("secret", value, fold=False))


def _prime_home(r: Redactor, env: dict[str, Any], generic: set[str]) -> None:
    """The home folder itself, wherever it lives (HOME=/srv/x/home/alice.smith), replaced on whole path
    components, and its last component as the user's name."""
    for home in {str(env.get("HOME") or ""), os.environ.get("HOME", "")}:
        home = home.rstrip("/\\")
        user = re.split(r"[/\\]", home)[-1]
        if len(home) < 2 or not user or user.lower() in generic:
            continue  # "/", "/root": identify no one
        pat = re.compile(r"(?<![^\s\"'=:;,(\[{<>|])" + re.escape(home) + r"(?![^/\\\s\"'<>:;,|)\]}])")
        r.literals.append((pat, _always("<home>"), True))
        r.literals.sort(key=lambda pr: -len(pr[0].pattern))
        if len(user) >= 3 and not user.startswith("<"):
            r.add_literal(user, "user", fixed="<user>", in_facts=False)


def _prime_users(r: Redactor, data: dict[str, Any], generic: set[str]) -> None:
    """User names from home paths anywhere in the report."""
    found: set[str] = set()

    def scan(obj: Any) -> None:
        if isinstance(obj, str):
            for m in _HOME.finditer(obj):
                found.add(m.group("user") or m.group("wuser"))
        elif isinstance(obj, dict):
            for v in obj.values():
                scan(v)
        elif isinstance(obj, list):
            for v in obj:
                scan(v)

    scan(data)
    for user in sorted(found):
        if user.lower() not in generic and not user.startswith("<") and len(user) >= 3:
            r.add_literal(user, "user", fixed="<user>", in_facts=False)


def _visible_entry(r: Redactor, entry: str) -> str:
    """One CUDA/HIP_VISIBLE_DEVICES entry: a UUID prefix of a known GPU becomes that GPU's token."""
    e = entry.strip()
    if e.upper().startswith("GPU-") and len(e) > 4:
        for full in r.gpu_uuids:
            if full.lower().startswith(e.lower()):
                return "GPU-" + r.token("gpu-uuid", full)
    return r.text(entry, in_facts=True)


def _walk(r: Redactor, obj: Any, path: tuple[str, ...]) -> Any:
    if isinstance(obj, str):
        versions = any(p in _VERSION_CONTAINERS or "version" in p for p in path)
        return r.text(obj, versions=versions, in_facts=bool(path) and path[0] == "facts")
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if path == ("facts", "environment") and isinstance(v, str) and is_secret_name(str(k)):
                out[k] = r.token("secret", v, fold=False) if v else v
            elif path == ("facts", "environment") and isinstance(v, str) and str(k).endswith("VISIBLE_DEVICES"):
                out[k] = ",".join(_visible_entry(r, e) for e in v.split(","))
            else:
                out[k] = _walk(r, v, (*path, str(k)))
        return out
    if isinstance(obj, list):
        return [_walk(r, v, path) for v in obj]
    return obj


def _structured(r: Redactor, data: dict[str, Any], ids: DeviceIds) -> None:
    """Fields whose whole value identifies the machine, whatever their shape."""
    facts = data.get("facts")
    if not isinstance(facts, dict):
        return
    platform = facts.get("platform")
    if isinstance(platform, dict) and isinstance(platform.get("hostname"), str) and platform["hostname"].strip() and not platform["hostname"].startswith("<"):
        platform["hostname"] = r.token("host", platform["hostname"].strip())
    for gpu in (g for sub in ids.gpus for g in _get(facts, sub, "gpus") or []):
        if isinstance(gpu, dict):
            _structured_gpu(r, gpu, "gpu-uuid")
    for port in _get(facts, "thunderbolt", "ports") or []:
        if isinstance(port, dict):
            _structured_port(r, port)
    for iface in _get(facts, "thunderbolt", "interfaces") or []:
        if isinstance(iface, dict) and isinstance(iface.get("mac"), str) and iface["mac"].strip() and not iface["mac"].startswith("<"):
            iface["mac"] = r.token("mac", iface["mac"].strip().replace("-", ":"))


def _structured_gpu(r: Redactor, gpu: dict[str, Any], kind: str) -> None:
    """A GPU's UUID (its ``GPU-`` prefix kept) and serial number."""
    u = gpu.get("uuid")
    if isinstance(u, str) and u.strip() and "<" not in u:
        gpu["uuid"] = ("GPU-" if u.strip().startswith("GPU-") else "") + r.token(kind, u.strip())
    s = gpu.get("serial")
    if isinstance(s, str) and s.strip() and s.strip().lower() not in _NOT_A_VALUE and not s.startswith("<"):
        gpu["serial"] = r.token("serial", s.strip(), fold=False)


def _structured_port(r: Redactor, port: dict[str, Any]) -> None:
    """A Thunderbolt port's peer and domain UUIDs and its peer's name."""
    for key in ("peer_uuid", "domain_uuid"):
        v = port.get(key)
        if isinstance(v, str) and v.strip() and not v.startswith("<"):
            port[key] = r.token("uuid", v.strip())
    if isinstance(port.get("peer"), str) and port["peer"].strip() and not port["peer"].startswith("<"):
        port["peer"] = r.token("peer", port["peer"].strip())


def redact_report(data: dict[str, Any], redactor: Redactor | None = None, *, ids: DeviceIds) -> dict[str, Any]:
    """A redacted deep copy of a report's JSON data (``Report.to_data()``), the input not changed (``ids``: kinds.device_ids())."""
    r = redactor or Redactor()
    out = copy.deepcopy(data)
    if not isinstance(out, dict):
        return out
    _prime(r, out, ids)
    out = _walk(r, out, ())
    _structured(r, out, ids)
    return out


def redact_text(text: str, redactor: Redactor | None = None) -> str:
    """Redact free text with the generic rules (no report to learn the host name from)."""
    return (redactor or Redactor()).text(text)


# What each token kind is called when counted ("1 URL credential", "2 host names"): (one, many).
_KIND_NOUNS: dict[str, tuple[str, str]] = {
    "credentials": ("URL credential", "URL credentials"),
    "host": ("host name", "host names"),
    "user": ("user name", "user names"),
    "mac": ("MAC address", "MAC addresses"),
    "serial": ("serial number", "serial numbers"),
    "uuid": ("UUID", "UUIDs"),
    "gpu-uuid": ("GPU UUID", "GPU UUIDs"),
    "mig-uuid": ("MIG UUID", "MIG UUIDs"),
    "peer": ("Thunderbolt peer name", "Thunderbolt peer names"),
    "secret": ("secret", "secrets"),
    "private-key": ("private key", "private keys"),
    "api-key": ("API key", "API keys"),
    "aws-key": ("AWS key", "AWS keys"),
    "jwt": ("JSON web token", "JSON web tokens"),
}


def describe_counts(counts: dict[str, int]) -> str:
    """``{"credentials": 1, "host": 2}`` -> ``"1 URL credential, 2 host names"`` (sorted by kind)."""
    parts = []
    for kind, n in sorted(counts.items()):
        if kind in _KIND_NOUNS:
            one, many = _KIND_NOUNS[kind]
        elif kind.endswith("-token"):
            what = kind[: -len("-token")]
            what = {"github": "GitHub", "gitlab": "GitLab", "hf": "Hugging Face", "slack": "Slack"}.get(what, what.replace("-", " "))
            one, many = f"{what} token", f"{what} tokens"
        elif kind.startswith(("ip-", "ip6-")):
            family, _, scope = kind.partition("-")
            one = f"{'IPv4' if family == 'ip' else 'IPv6'} address" + (f" ({scope.replace('linklocal', 'link-local')})" if scope else "")
            many = one.replace("address", "addresses", 1)
        else:
            one = many = kind
        parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts)
