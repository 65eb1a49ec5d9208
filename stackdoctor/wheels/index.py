"""Confirm, before anything changes, that the wheels of a plan exist for the target's tags.

Reads PEP 503 HTML project pages (download.pytorch.org serves only these) and PEP 691 JSON
where an index offers it (asked for with the ``Accept`` header). Pages are streamed and
cut off past :data:`MAX_PAGE_BYTES`, fetched with one overall deadline, and cached under
the user cache dir, revalidated with ``ETag`` / ``Last-Modified``. ``--find-links DIR``
checks the files of a local directory instead (air-gapped clusters).

Network settings follow the user's: ``HTTPS_PROXY`` / ``NO_PROXY`` / ``SSL_CERT_FILE``
(httpx ``trust_env``), and pip's own ``proxy`` / ``cert`` / ``client-cert`` /
``trusted-host`` (``PIP_*`` variables and pip.conf files), which win as they do in pip.

Every failure is one :class:`~stackdoctor.core.errors.IndexError_` sentence (exit 2).
httpx is imported inside functions to keep start-up light.
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import os
import re
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackdoctor.core.errors import IndexError_
from stackdoctor.matrix import default_index_url
from stackdoctor.wheels.http import Budget, auth_class, network_settings, ssl_context

if TYPE_CHECKING:  # pragma: no cover
    import httpx

    from stackdoctor.matrix import Matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Plan, Request

MAX_PAGE_BYTES = 32 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0
MAX_REDIRECTS = 10
# PEP 691: JSON preferred, PEP 503 HTML accepted (download.pytorch.org answers HTML).
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


# ---------------------------------------------------------------------------- data


@dataclass(frozen=True)
class IndexFile:
    """One file an index page (or a find-links directory) lists."""

    filename: str  # "torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"
    url: str
    sha256: str | None = None
    requires_python: str | None = None
    yanked: bool = False
    size: int | None = None  # bytes, where the index says (PEP 700 ``size`` of the JSON API)
    metadata_sha256: str | None = None  # the PEP 658 / 714 core metadata file's sha256, where the page advertises it


@dataclass
class WheelMatch:
    """The wheel that would be installed for one planned package."""

    package: str  # "torch"
    requirement: str  # "torch==2.13.0+cu130"
    filename: str
    url: str
    sha256: str | None
    source: str  # the page URL or find-links directory it was found on


@dataclass
class Page:
    url: str  # final URL after redirects
    content_type: str
    text: str
    from_cache: bool = False


# ---------------------------------------------------------------------------- urls and names


def canonical_name(name: str) -> str:
    """PEP 503 normalisation: ``Torch_Vision`` -> ``torch-vision``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def index_base(option: str | None, env: Mapping[str, str], matrix: Matrix | None = None) -> str:
    """``--index-base``, else ``STACKDOCTOR_INDEX_BASE``, else the matrix's ``pytorch`` index
    (``matrix.index_url()``; the embedded matrix's when none is given)."""
    base = option or env.get("STACKDOCTOR_INDEX_BASE") or (matrix.index_url() if matrix is not None else default_index_url())
    return base.rstrip("/")


def project_page_url(index_url: str, name: str) -> str:
    """``https://download.pytorch.org/whl/cu130`` + ``torch`` -> ``.../whl/cu130/torch/``."""
    return f"{index_url.rstrip('/')}/{canonical_name(name)}/"


def cache_dir(env: Mapping[str, str]) -> Path:
    """``STACKDOCTOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/stackdoctor``, else ``~/.cache/stackdoctor``."""
    from stackdoctor.core.cachefiles import cache_dir as folder

    return folder(dict(env))


# ---------------------------------------------------------------------------- parsers (pure)


class _AnchorParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._current: dict[str, str | None] | None = None
        self._text: list[str] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        if tag == "a":
            self._current = dict(attrs)
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._current is not None:
            self.anchors.append((self._current, "".join(self._text).strip()))
            self._current = None


def _split_fragment(url: str) -> tuple[str, str | None]:
    base, _, frag = url.partition("#")
    m = re.match(r"sha256=([0-9a-fA-F]{64})$", frag)
    return base, (m.group(1).lower() if m else None)


def _filename_from_url(url: str) -> str:
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])


def parse_simple_html(text: str, page_url: str) -> list[IndexFile]:
    """Files listed on a PEP 503 project page; relative links resolved against the page.

    A real anchor from https://download.pytorch.org/whl/cu128/torch/ (captured in astral-sh/uv#13195)::

        <a href="https://download-r2.pytorch.org/whl/cu128/torch-2.7.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=...">
        torch-2.7.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>

    The filename is taken from the URL path (``%2B`` decoded), the anchor text only when the path has none.
    """
    parser = _AnchorParser()
    try:
        parser.feed(text)
        parser.close()
    except Exception:  # html.parser is lenient; a pathological page yields what was parsed so far
        pass
    base = urllib.parse.urljoin(page_url, parser.base) if parser.base else page_url
    out: list[IndexFile] = []
    for attrs, label in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        url, sha = _split_fragment(urllib.parse.urljoin(base, href))
        name = _filename_from_url(url) or label
        if not name or not link_allowed(page_url, url):
            continue
        yanked = "data-yanked" in attrs
        meta = _metadata_sha(attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata"))
        out.append(IndexFile(name, url, sha, attrs.get("data-requires-python"), yanked, metadata_sha256=meta))
    return out


def link_allowed(page_url: str, url: str) -> bool:
    """Whether a link on the page at ``page_url`` is followed: from an HTTP(S) page only to http(s) (a ``file:`` link
    there would read this machine's files: issue 44); from a local page (``file:``) to a local file or http(s)."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if urllib.parse.urlsplit(page_url).scheme.lower() in ("http", "https"):
        return scheme in ("http", "https")
    return scheme in ("http", "https", "file")


def _metadata_sha(value: Any) -> str | None:
    """The sha256 of PEP 658's ``data-core-metadata="sha256=..."`` or PEP 691's ``"core-metadata": {"sha256": ...}``."""
    if isinstance(value, dict):
        value = value.get("sha256")
        return value.lower() if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{64}", value) else None
    if isinstance(value, str):
        m = re.fullmatch(r"sha256=([0-9a-fA-F]{64})", value.strip())
        return m.group(1).lower() if m else None
    return None


def parse_simple_json(text: str, page_url: str) -> list[IndexFile]:
    """Files of a PEP 691 JSON project page.

    ``{"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": "torch-...whl",
    "url": "https://...", "hashes": {"sha256": "..."}, "requires-python": ">=3.10"}]}``

    :raises ValueError: when the text is not a PEP 691 project page.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise ValueError("no 'files' list")
    out: list[IndexFile] = []
    for f in data["files"]:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str) or not isinstance(f.get("url"), str):
            continue
        url, frag_sha = _split_fragment(urllib.parse.urljoin(page_url, f["url"]))
        if not link_allowed(page_url, url):
            continue
        hashes = h if isinstance(h := f.get("hashes"), dict) else {}
        sha = s if isinstance(s := hashes.get("sha256"), str) else frag_sha
        rp = r if isinstance(r := f.get("requires-python"), str) else None
        size = n if isinstance(n := f.get("size"), int) and not isinstance(n, bool) and n >= 0 else None
        meta = _metadata_sha(f.get("core-metadata", f.get("dist-info-metadata")))
        out.append(IndexFile(f["filename"], url, sha, rp, bool(f.get("yanked")), size, meta))
    return out


def parse_page(page: Page) -> list[IndexFile]:
    """Dispatch on the content type; a JSON page that is not PEP 691 raises ValueError."""
    if page.content_type.split(";")[0].strip().lower() == JSON_TYPE:
        return parse_simple_json(page.text, page.url)
    return parse_simple_html(page.text, page.url)


# ---------------------------------------------------------------------------- wheel selection (pure)


def wheel_parts(filename: str) -> tuple[str, Any, frozenset[str]] | None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import InvalidVersion

    if not filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return str(name), version, frozenset(str(t) for t in tags)


def wanted_version(version: str, variant: str | None) -> str:
    return f"{version}+{variant}" if variant else version


def _python_ok(requires_python: str | None, python_version: str | None) -> bool:
    if not requires_python or not python_version:
        return True
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(requires_python).contains(python_version, prereleases=True)
    except InvalidSpecifier:
        return True


def select_wheel(
    files: Sequence[IndexFile],
    name: str,
    version: str,
    tags: Sequence[str],
    *,
    python_version: str | None = None,
) -> IndexFile | None:
    """The wheel pip would take for ``name==version`` (local label included) under ``tags``.

    ``tags`` are the target's accepted tags, most preferred first (``cp311-cp311-manylinux_2_36_x86_64``).
    An empty ``tags`` accepts any wheel of that exact version. Yanked files are skipped.
    """
    from packaging.version import InvalidVersion, Version

    try:
        want = Version(version)
    except InvalidVersion:
        return None
    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[int, IndexFile] | None = None
    for f in files:
        parts = wheel_parts(f.filename)
        if parts is None or f.yanked:
            continue
        fname, fver, ftags = parts
        if fname != canonical_name(name) or fver != want or not _python_ok(f.requires_python, python_version):
            continue
        if not tags:
            return f
        score = min((rank[t] for t in ftags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, f)
    return best[1] if best else None


def describe_offer(files: Sequence[IndexFile], name: str, version: str) -> str:
    """What a page offers instead, for the error sentence: ``2.13.0+cu130 for cp312, cp313 (manylinux_2_28_x86_64)``."""
    from packaging.version import InvalidVersion, Version

    try:
        want = Version(version)
    except InvalidVersion:
        want = None
    same: list[frozenset[str]] = []
    versions: set[str] = set()
    for f in files:
        parts = wheel_parts(f.filename)
        if parts is None or parts[0] != canonical_name(name):
            continue
        versions.add(str(parts[1]))
        if parts[1] == want:
            same.append(parts[2])
    if same:
        pys = sorted({t.split("-")[1] for tags in same for t in tags})
        plats = sorted({t.split("-")[2] for tags in same for t in tags})
        return f"{version} exists only for {', '.join(pys)} on {', '.join(plats[:6])}"
    if versions:
        from packaging.version import Version as V

        newest = sorted(versions, key=lambda s: V(s), reverse=True)[:5]
        return f"it has no {version} at all (newest there: {', '.join(newest)})"
    return f"it lists no {canonical_name(name)} wheels"


# ---------------------------------------------------------------------------- target tags


def _expand_platform(platform: str) -> list[str]:
    """A what-if platform tag -> the platform tags such a machine accepts, most specific first."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if m:
        major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        out = [f"manylinux_{major}_{n}_{arch}" for n in range(minor, 16, -1)]
        if minor >= 17:
            out.append(f"manylinux2014_{arch}")
        out.append(f"linux_{arch}")
        return out
    m = re.fullmatch(r"macosx_(\d+)_(\d+)_(\w+)", platform)
    if m:
        from packaging import tags as ptags

        return list(ptags.mac_platforms((int(m.group(1)), int(m.group(2))), m.group(3)))
    return [platform]


def target_tags(facts: Facts, request: Request | None = None) -> list[str]:
    """The tags the install target accepts: the probed ones, or derived for a what-if request.

    ``--python-version 3.12`` / ``--platform manylinux_2_28_x86_64`` replace the interpreter /
    platform part; a free-threaded request is written ``3.13t``.
    """
    py_req = request.python_version if request else None
    plat_req = request.platform if request else None
    if not py_req and not plat_req:
        return list(facts.python.tags)
    from packaging import tags as ptags

    pyv = py_req or facts.python.version or ""
    free = pyv.endswith("t") or (not py_req and facts.python.free_threaded)
    nums = [int(x) for x in re.findall(r"\d+", pyv)[:2]]
    if len(nums) < 2:
        return []
    if plat_req:
        platforms = _expand_platform(plat_req)
    else:
        platforms = list(dict.fromkeys(t.split("-")[2] for t in facts.python.tags))
        if not platforms:
            return []
    interp = f"cp{nums[0]}{nums[1]}"
    abis = [interp + ("t" if free else "")]
    out = [str(t) for t in ptags.cpython_tags((nums[0], nums[1]), abis=abis, platforms=platforms)]
    out += [str(t) for t in ptags.compatible_tags((nums[0], nums[1]), interp, platforms)]
    return out


def python_version_of(facts: Facts, request: Request | None = None) -> str | None:
    v = (request.python_version if request else None) or facts.python.version
    return v.rstrip("t") if v else None


# ---------------------------------------------------------------------------- configuration


# ---------------------------------------------------------------------------- fetching


class PageCache:
    """Index pages on disk with their validators; every failure to read or write is ignored.

    Issue 44: a page is keyed and stored by its URL WITHOUT credentials (``user:password@`` never reaches the disk;
    the credentials of the asking URL are put back on a cached final URL of the same host), written 0600 in a 0700
    folder and read back only through :func:`stackdoctor.core.cachefiles.read_private` (this user's own regular file,
    bounded, never a FIFO or a link), so a page another user planted is never used, after a 304 or ever."""

    def __init__(self, root: Path | None, max_bytes: int = MAX_PAGE_BYTES) -> None:
        self.root = root / "index-pages" if root else None
        self.max_bytes = max_bytes

    def _paths(self, url: str) -> tuple[Path, Path] | None:
        if self.root is None:
            return None
        key = hashlib.sha256(without_credentials(url).encode()).hexdigest()[:32]
        return self.root / f"{key}.json", self.root / f"{key}.body"

    def get(self, url: str) -> tuple[dict[str, str], bytes] | None:
        from stackdoctor.core.cachefiles import read_private

        paths = self._paths(url)
        if paths is None:
            return None
        raw_meta = read_private(paths[0], 64 * 1024)
        body = read_private(paths[1], self.max_bytes) if raw_meta is not None else None
        if raw_meta is None or body is None:
            return None
        try:
            meta = json.loads(raw_meta.decode("utf-8"))
        except ValueError:
            return None
        if not isinstance(meta, dict) or meta.get("url") != without_credentials(url) or len(body) != meta.get("size"):
            return None
        final = meta.get("final_url")
        meta["final_url"] = _with_credentials_of(url, final) if isinstance(final, str) else url
        return meta, body

    def put(self, url: str, headers: Mapping[str, str], final_url: str, body: bytes) -> None:
        from stackdoctor.core.cachefiles import write_private

        paths = self._paths(url)
        etag, modified = headers.get("etag"), headers.get("last-modified")
        if paths is None or not (etag or modified) or len(body) > self.max_bytes:
            return
        meta = {
            "url": without_credentials(url),
            "final_url": without_credentials(final_url),
            "etag": etag,
            "last_modified": modified,
            "content_type": headers.get("content-type", ""),
            "size": len(body),
            "stored_at": time.time(),
        }
        write_private(paths[1], body)
        write_private(paths[0], json.dumps(meta).encode("utf-8"))


def without_credentials(url: str) -> str:
    """``url`` without its ``user:password@`` (what may be written to disk)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _with_credentials_of(asked: str, final: str) -> str:
    """``final`` with the credentials of ``asked`` when both name the same host and port (as the live answer would)."""
    a, f = urllib.parse.urlsplit(asked), urllib.parse.urlsplit(final)
    if "@" not in a.netloc or "@" in f.netloc or a.netloc.rpartition("@")[2] != f.netloc:
        return final
    return urllib.parse.urlunsplit(f._replace(netloc=a.netloc))


class IndexClient:
    """An httpx client with the user's network settings, a deadline per page, a size cap and a page cache."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = MAX_PAGE_BYTES,
        cache: PageCache | None = None,
        transport: Any = None,
        budget: Budget | None = None,
    ) -> None:
        import httpx

        self.env = dict(os.environ if env is None else env)
        self.budget = budget if budget is not None else Budget.of_run(self.env)  # every network read of this client
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.cache = cache if cache is not None else PageCache(cache_dir(self.env), max_bytes)
        self.settings = network_settings(self.env)
        kwargs: dict[str, Any] = {
            "timeout": httpx.Timeout(timeout_s),
            "follow_redirects": True,
            "max_redirects": MAX_REDIRECTS,
            "trust_env": True,
            "verify": ssl_context(self.settings, self.env),
            "headers": {"User-Agent": "stackdoctor (index check)"},
            "auth": auth_class()(self.env),
        }
        if self.settings.proxy:
            kwargs["proxy"] = self.settings.proxy
        if transport is not None:
            kwargs["transport"] = transport
        self._unverified: httpx.Client | None = None
        self._kwargs = kwargs
        self.client = httpx.Client(**kwargs)

    def close(self) -> None:
        self.client.close()
        if self._unverified is not None:
            self._unverified.close()

    def __enter__(self) -> IndexClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client_for(self, url: str) -> httpx.Client:
        host = urllib.parse.urlsplit(url).hostname or ""
        port = urllib.parse.urlsplit(url).port
        trusted = {h.strip().lower() for h in self.settings.trusted_hosts}
        if host.lower() in trusted or (port and f"{host}:{port}".lower() in trusted):
            if self._unverified is None:
                import httpx

                self._unverified = httpx.Client(**{**self._kwargs, "verify": False})
            return self._unverified
        return self.client

    def fetch(self, url: str) -> Page:
        """GET one index page; every failure is one IndexError_ sentence (``.reason``: "missing" for
        a 404, "unreachable", "failing"). A ``file://`` URL is read from disk, as pip does."""
        if url.startswith("file:"):
            return read_local_page(url, self.max_bytes)
        import httpx

        cached = self.cache.get(url)
        headers = {"Accept": ACCEPT}
        if cached:
            meta = cached[0]
            if meta.get("etag"):
                headers["If-None-Match"] = meta["etag"]
            if meta.get("last_modified"):
                headers["If-Modified-Since"] = meta["last_modified"]
        deadline = time.monotonic() + self.timeout_s
        try:
            with self._client_for(url).stream("GET", url, headers=headers, timeout=self.budget.timeout(self.timeout_s)) as resp:
                if resp.status_code == 304 and cached:
                    meta, body = cached
                    return Page(meta.get("final_url") or url, meta.get("content_type") or "", _text(body), from_cache=True)
                self._check_status(url, resp)
                body = self._read_body(url, resp, deadline)
                final = str(resp.url)
                self.cache.put(url, resp.headers, final, body)
                return Page(final, resp.headers.get("content-type", ""), _text(body))
        except IndexError_:
            raise
        except httpx.HTTPError as exc:
            raise self._transport_error(url, exc) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise index_error("failing", f"{url} could not be read: {type(exc).__name__}: {_first(str(exc))}.") from None

    def _check_status(self, url: str, resp: httpx.Response) -> None:
        """A page's status as one IndexError_ sentence, unless it is 200."""
        if resp.status_code in (401, 403):
            raise index_error("failing", _refused_sentence(url, resp.status_code, self.settings.keyring_provider))
        if resp.status_code == 404:
            raise index_error("missing", f"{url} does not exist (HTTP 404): the index has no such package or variant; check --index-base and --variant.")
        if resp.status_code >= 400:
            raise index_error(
                "failing",
                f"{url} answered HTTP {resp.status_code} {resp.reason_phrase}".rstrip()
                + "; the index is failing: try again later, use a mirror with --index-base, or --offline."
            )
        if resp.status_code != 200:
            raise index_error("failing", f"{url} answered HTTP {resp.status_code} instead of a package page.")

    def _read_body(self, url: str, resp: httpx.Response, deadline: float) -> bytes:
        """The page's bytes, bounded by ``max_bytes`` and by the time-out."""
        length = resp.headers.get("content-length")
        if length and length.isdigit() and int(length) > self.max_bytes:
            raise index_error("failing", _too_large(url, int(length), self.max_bytes))
        buf = bytearray()
        for chunk in resp.iter_bytes():  # each network read as it arrives: the limits are checked per read
            buf += chunk
            if len(buf) > self.max_bytes:
                raise index_error("failing", _too_large(url, None, self.max_bytes))
            if time.monotonic() > deadline:
                raise index_error("unreachable", _too_slow(url, self.timeout_s))
            self.budget.take(len(chunk), without_credentials(url))
        return bytes(buf)

    def _transport_error(self, url: str, exc: httpx.HTTPError) -> IndexError_:
        """What httpx raised on the way, as one IndexError_ sentence."""
        import httpx

        if isinstance(exc, httpx.TooManyRedirects):
            return index_error("failing", f"{url} redirects in a loop (more than {MAX_REDIRECTS} redirects); the index or a proxy is misconfigured.")
        if isinstance(exc, httpx.TimeoutException):
            return index_error("unreachable", _too_slow(url, self.timeout_s))
        if isinstance(exc, httpx.ProxyError):
            return index_error("unreachable", f"the proxy refused the request for {url}: {exc}.")
        if isinstance(exc, httpx.ConnectError):
            text = str(exc)
            if "CERTIFICATE_VERIFY_FAILED" in text or "certificate" in text.lower():
                return index_error(
                    "unreachable",
                    f"the TLS certificate of {urllib.parse.urlsplit(url).netloc} is not trusted ({_first(text)}); "
                    "set SSL_CERT_FILE or pip's `cert` to your CA bundle."
                )
            return index_error("unreachable", f"cannot connect to {urllib.parse.urlsplit(url).netloc} for {url}: {_first(text) or 'connection failed'}; check the network, HTTPS_PROXY, or use --index-base / --offline.")
        if isinstance(exc, httpx.DecodingError):
            return index_error("failing", f"{url} sent a body that cannot be decoded ({_first(str(exc))}).")
        return index_error("failing", f"{url} could not be read: {type(exc).__name__}: {_first(str(exc))}.")


def _refused_sentence(url: str, status: int, keyring: str | None) -> str:
    if keyring:
        return (f"{url} answered HTTP {status}: it needs credentials; pip is set to take them from the keyring "
                f"(keyring-provider = {keyring}), which stackdoctor does not read: put them in ~/.netrc or in the index URL.")
    return f"{url} answered HTTP {status}: it needs credentials, and none for it are in the URL or in ~/.netrc (pip reads both)."


def index_error(reason: str, message: str) -> IndexError_:
    """An IndexError_ that also says what kind of failure it is (the index check skips an
    "unreachable" or "failing" source instead of handing it to pip or uv)."""
    exc = IndexError_(message)
    exc.reason = reason  # type: ignore[attr-defined]
    return exc


def failure_reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", "failing"))


def local_path(location: str) -> Path:
    """A ``file://`` URL or a plain path as a local path (``file:///opt/pypi/simple`` -> ``/opt/pypi/simple``)."""
    if location.startswith("file:"):
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(location).path)).expanduser()
    return Path(location).expanduser()


def read_local_page(url: str, max_bytes: int = MAX_PAGE_BYTES) -> Page:
    """A local index page: a directory's ``index.html`` (as pip reads ``file://`` index URLs) or an HTML file."""
    from stackdoctor.system import TooLarge, read_bounded

    path = local_path(url)
    target = path / "index.html" if path.is_dir() else path
    try:
        # the user's own index on disk, not a probed machine file: read directly
        if target.stat().st_size > max_bytes:
            raise index_error("failing", _too_large(url, target.stat().st_size, max_bytes))
        data = read_bounded(target, max_bytes, too_large=True)  # a FIFO or /dev/zero: refused, never read
    except TooLarge:
        raise index_error("failing", f"{url} is larger than {max_bytes} bytes; not an index page.") from None
    except FileNotFoundError:
        raise index_error("missing", f"{url} does not exist (no {target}).") from None
    except NotADirectoryError:
        raise index_error("missing", f"{url} does not exist ({path.parent} is not a directory).") from None
    except OSError as exc:
        raise index_error("failing", f"{url} cannot be read: {exc.strerror or exc}.") from None
    page_url = url if url.endswith("/") or not path.is_dir() else url + "/"
    return Page(page_url, "text/html", _text(data))


def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _first(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""


def _too_large(url: str, length: int | None, cap: int) -> str:
    size = f"{length // (1024 * 1024)} MiB" if length else f"more than {cap // (1024 * 1024)} MiB"
    return f"{url} is {size}, larger than any package page should be (limit {cap // (1024 * 1024)} MiB); stopped reading it."


def _too_slow(url: str, timeout_s: float) -> str:
    return f"{url} did not answer in {timeout_s:g} s; the index is unreachable or too slow: use a mirror with --index-base, or --offline."


# ---------------------------------------------------------------------------- listing and checking


def list_project(client: IndexClient, index_url: str, name: str) -> tuple[str, list[IndexFile]]:
    """(page URL, files) of one project on an index; a page that lists nothing is an error."""
    url = project_page_url(index_url, name)
    page = client.fetch(url)
    try:
        files = parse_page(page)
    except (ValueError, RecursionError):
        raise IndexError_(f"{url} is not a valid PEP 691 JSON package page.") from None
    if not files:
        raise IndexError_(f"{url} is not a package index page (no file links in it); check --index-base.")
    return url, files


def list_find_links(location: str, client: IndexClient | None = None) -> list[IndexFile]:
    """Files of a ``--find-links`` directory (or an HTML page of links, as pip accepts)."""
    if location.startswith(("http://", "https://")):
        if client is None:
            raise IndexError_(f"--find-links {location} is a URL, which the offline check cannot read.")
        return parse_simple_html(client.fetch(location).text, location)
    path = Path(location[7:] if location.startswith("file://") else location).expanduser()
    try:
        # the user's own directory, not a probed machine path: read directly
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        raise IndexError_(f"--find-links {location}: no such directory.") from None
    except NotADirectoryError:
        raise IndexError_(f"--find-links {location} is not a directory.") from None
    except OSError as exc:
        raise IndexError_(f"--find-links {location} cannot be read: {exc.strerror or exc}.") from None
    return [IndexFile(n, (path / n).resolve().as_uri()) for n in names if n.endswith(".whl")]


def verify_plan(
    plan: Plan,
    tags: Sequence[str],
    *,
    python_version: str | None = None,
    find_links: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = MAX_PAGE_BYTES,
    client: IndexClient | None = None,
) -> list[WheelMatch]:
    """Confirm every planned package has a wheel for ``tags``; raise IndexError_ (one sentence) otherwise.

    With ``find_links`` only that location is checked (the install then runs with ``--no-index``).
    """
    own = client is None
    if client is None:
        client = IndexClient(env, timeout_s=timeout_s, max_bytes=max_bytes)
    try:
        matches: list[WheelMatch] = []
        local: list[IndexFile] | None = None
        for pkg in plan.packages:
            want = wanted_version(pkg.version, pkg.variant)
            if find_links:
                if local is None:
                    local = list_find_links(find_links, client)
                files, where = local, find_links
            else:
                index_url = pkg.index_url or plan.index_url or default_index_url("pypi")
                where, files = list_project(client, index_url, pkg.name)
            hit = select_wheel(files, pkg.name, want, tags, python_version=python_version)
            if hit is None:
                shown = tags[0] if tags else "any tag"
                raise IndexError_(
                    f"{pkg.name} {want} has no wheel for this target ({shown}) on {where}: {describe_offer(files, pkg.name, want)}."
                )
            matches.append(WheelMatch(pkg.name, f"{pkg.name}=={want}", hit.filename, hit.url, hit.sha256, where))
        return matches
    finally:
        if own:
            client.close()
