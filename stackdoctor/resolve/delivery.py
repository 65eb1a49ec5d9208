"""What the installer is handed: the arguments and environment that point pip or uv at exactly the sources that
answered (a source that did not answer is overridden, never retried)."""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor.wheels.sources import InstallerConfig, Source, dedupe

if TYPE_CHECKING:  # pragma: no cover

    pass
from stackdoctor.resolve.survey import UV_INDEX_VARS, Probe

# ---------------------------------------------------------------------------- what the installer is handed


@dataclass
class Delivery:
    """Arguments and environment that point the installer at exactly the sources that answered."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str | None] = field(default_factory=dict)
    used: list[Source] = field(default_factory=list)
    dropped: list[Probe] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _secrets_to_env(d: Delivery, options: dict[str, tuple[str, list[str], str]]) -> None:
    """Credentialed URLs leave the installer's argv (``ps`` and /proc/<pid>/cmdline show it to every local
    user) for its environment: each option whose values carry credentials becomes its variable, holding what
    the installer would have combined (``before``: the configured values the option adds to).

    ``options``: option -> (variable, configured values it adds to, separator)."""
    from stackdoctor.core.redact import has_credentials

    for option, (var, before, sep) in options.items():
        values = [d.args[i + 1] for i in range(len(d.args) - 1) if d.args[i] == option]
        if not any(has_credentials(v) for v in values):
            continue
        keep: list[str] = []
        skip = False
        for i, a in enumerate(d.args):
            if skip:
                skip = False
                continue
            if a == option and i + 1 < len(d.args):
                skip = True
                continue
            keep.append(a)
        d.args = keep
        d.env[var] = sep.join(dict.fromkeys([*before, *values]))


def _dropped(d: Delivery, probes: Sequence[Probe]) -> set[int]:
    """The configured sources that did not answer (kept in ``d.dropped``), as a set of their ids."""
    d.dropped = [p for p in probes if p.source.configured and p.status in ("unreachable", "failing", "skipped")]
    return {id(p.source) for p in d.dropped}


def _left_out(d: Delivery) -> Delivery:
    for p in d.dropped:
        d.notes.append(f"{p.source.url} ({p.source.origin}) is left out of the install command: {p.detail or p.status}")
    return d


def deliver_pip(cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    """pip: configured sources that did not answer are overridden, the added ones are passed."""
    d = Delivery()
    configured = [s for s in cfg.sources if s.configured]
    dropped_src = _dropped(d, probes)
    extras = [s for s in configured if s.role == "extra"]
    links = [s for s in configured if s.kind == "links"]
    kept_extras = [s for s in extras if id(s) not in dropped_src]
    kept_links = [s for s in links if id(s) not in dropped_src]
    add_links = [s for s in added if s.kind == "links"]
    index_left: list[Source] = []
    if no_index or cfg.no_index:
        d.args.append("--no-index")
    else:
        index_left = _pip_indexes(d, cfg, dropped_src, kept_extras, [s for s in added if s.kind == "index"], bool(extras or links))
    _pip_overrides(d, kept_extras if len(kept_extras) != len(extras) and not (no_index or cfg.no_index) else None,
                   kept_links if len(kept_links) != len(links) else None)
    for s in add_links:
        d.args += ["--find-links", s.url]
    _secrets_to_env(d, {"--index-url": ("PIP_INDEX_URL", [], " "), "--extra-index-url": ("PIP_EXTRA_INDEX_URL", [s.url for s in kept_extras], " "),
                        "--find-links": ("PIP_FIND_LINKS", [s.url for s in kept_links], " ")})
    d.used = dedupe(index_left + kept_links + list(add_links))
    return _left_out(d)


def _pip_overrides(d: Delivery, extras: list[Source] | None, links: list[Source] | None) -> None:
    """pip's configured extra indexes and find-links, overridden in its environment by those that answered (None:
    all of them did; a space: none did, which pip reads as empty)."""
    if extras is not None:
        d.env["PIP_EXTRA_INDEX_URL"] = " ".join(s.url for s in extras) or " "
    if links is not None:
        d.env["PIP_FIND_LINKS"] = " ".join(s.url for s in links) or " "


def _pip_indexes(d: Delivery, cfg: InstallerConfig, dropped_src: set[int], kept_extras: list[Source], add_index: list[Source],
                 other_configured: bool) -> list[Source]:
    """pip's ``--index-url`` / ``--extra-index-url`` (or ``--no-index``) when the default index did not answer or PyPI
    is not configured; the indexes the installer is then left with, in order."""
    default = cfg.default_index()
    default_kept = default is not None and id(default) not in dropped_src
    pypi_unconfigured = default is not None and default.origin.startswith("pip's default")
    index_arg: Source | None = None
    extra_args = list(add_index)
    if add_index and pypi_unconfigured and (not default_kept or not other_configured):
        # PyPI is not configured (or did not answer): the PyTorch index serves torch and its
        # dependencies, as PyTorch's own install commands assume
        index_arg = extra_args.pop(0)
    if default is not None and not default_kept and index_arg is None:
        if kept_extras:
            index_arg = kept_extras[0]
        elif extra_args:
            index_arg = extra_args.pop(0)
    if index_arg is not None:
        d.args += ["--index-url", index_arg.url]
    elif default is not None and not default_kept:
        d.args.append("--no-index")
    for s in extra_args:
        d.args += ["--extra-index-url", s.url]
    head = [index_arg] if index_arg is not None else ([default] if default_kept and default is not None else [])
    return head + kept_extras + extra_args


def deliver_uv(cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    """uv: when a configured source did not answer, ``--no-config`` and the answering ones explicitly."""
    d = Delivery()
    dropped_src = _dropped(d, probes)
    configured = [s for s in cfg.sources if s.configured]
    add_index = [s for s in added if s.kind == "index"]
    add_links = [s for s in added if s.kind == "links"]
    if d.dropped:
        used = _uv_without_config(d, [s for s in configured if id(s) not in dropped_src and not (s.explicit and s.kind == "index")], add_index)
    else:
        for s in add_index:
            d.args += ["--index", s.url]
        used = [s for s in configured if not (s.explicit and s.kind == "index")] + list(add_index)
    if no_index or cfg.no_index:
        if "--no-index" not in d.args:
            d.args.append("--no-index")
        used = [s for s in used if s.kind == "links"]
    for s in add_links:
        d.args += ["--find-links", s.url]
    _secrets_to_env(d, {"--index": ("UV_INDEX", [], " "), "--default-index": ("UV_DEFAULT_INDEX", [], " "), "--find-links": ("UV_FIND_LINKS", [], ",")})
    d.used = dedupe(used + list(add_links))
    return _left_out(d)


def _uv_without_config(d: Delivery, kept: list[Source], add_index: list[Source]) -> list[Source]:
    """``--no-config`` (and uv's index variables unset), then the configured sources that answered and the added
    ones, explicitly; the sources the installer is then left with."""
    d.args.append("--no-config")
    for var in UV_INDEX_VARS:
        d.env[var] = None
    default = next((s for s in kept if s.role == "default"), None)
    for s in add_index:
        d.args += ["--index", s.url]
    for s in kept:
        if s.kind == "index" and s.role != "default":
            d.args += ["--index", s.url]
    if default is not None:
        d.args += ["--default-index", default.url]
    elif not add_index and not any(s.kind == "index" for s in kept):
        d.args.append("--no-index")
    for s in kept:
        if s.kind == "links":
            d.args += ["--find-links", s.url]
    return kept + list(add_index)


def deliver(installer: str, cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    fn = deliver_uv if installer == "uv" else deliver_pip
    return fn(cfg, probes, added, no_index=no_index, offline=offline)
