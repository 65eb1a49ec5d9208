"""The torch releases a request allows (newest first), and the request values that cannot mean anything."""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from stackdoctor.matrix import (
    Matrix,
    Release,
    parse_platform,
)
from stackdoctor.model.plan import Request

# ---------------------------------------------------------------------------- release candidates


def release_candidates(matrix: Matrix, request: Request) -> tuple[list[tuple[Release, Version]], str | None]:
    """(release, version) pairs the request allows, newest first; an error sentence when the pin is unknown."""
    spec_text = (request.torch or "").strip()
    out: list[tuple[Release, Version]] = []
    if not spec_text:
        return [(r, r.version) for r in matrix.releases], None
    if re.search(r"[<>=!~,]", spec_text):
        try:
            spec = SpecifierSet(spec_text)
        except InvalidSpecifier:
            return [], f"--torch {spec_text!r} is neither a version nor a version specifier"
        for r in matrix.releases:
            for v in r.versions:
                if spec.contains(v, prereleases=True):
                    rel = matrix.release(v)
                    if rel is not None:
                        out.append((rel, v))
                    break
        if not out:
            return [], f"no torch release in the matrix matches {spec_text}"
        return out, None
    try:
        Version(spec_text.split("+", 1)[0])
    except InvalidVersion:
        return [], f"--torch {spec_text!r} is not a version"
    rel = matrix.release(spec_text)
    if rel is None:
        return [], f"torch {spec_text} is not in the compatibility matrix (known: {', '.join(str(r.version) for r in matrix.releases[:6])}, ...)"
    return [(rel, rel.version)], None


def newer_than(version: Version, cands: list[tuple[Release, Version]]) -> list[tuple[Release, Version]]:
    return [(r, v) for r, v in cands if v > version]


_PYTHON_RE = re.compile(r"^(?:cp|python)?(\d)(?:\.?(\d{1,2}))?(t?)$", re.I)


def request_value_error(torch: str | None = None, platform: str | None = None, python_version: str | None = None) -> str | None:
    """One sentence for a request value that cannot mean anything (the install command exits 2 with it), else None.

    ``--platform amiga`` (not a wheel platform tag), ``--python-version 2.7`` (torch wheels are Python 3 only),
    ``--torch banana`` (neither a version nor a specifier). Values that parse but that no release serves are
    the resolver's to answer (an unmet plan, with what would work instead)."""
    if platform is not None:
        os_, _arch, _floor = parse_platform(platform)
        if os_ == "unknown" or not platform.strip():
            return (
                f"--platform {platform!r} is not a wheel platform tag (expected like manylinux_2_28_x86_64, manylinux_2_28_aarch64, "
                "win_amd64 or macosx_14_0_arm64)."
            )
    if python_version is not None:
        m = _PYTHON_RE.match(python_version.strip())
        if not m:
            return f"--python-version {python_version!r} is not a Python version (expected like 3.12 or 3.13t)."
        if m.group(1) != "3":
            return f"--python-version {python_version}: torch wheels are for Python 3 only (e.g. --python-version 3.12)."
    if torch is not None:
        text = torch.strip()
        if not text:
            return "--torch needs a version (e.g. 2.13.0) or a specifier (e.g. '>=2.6,<2.12')."
        if re.search(r"[<>=!~,]", text):
            try:
                SpecifierSet(text)
            except InvalidSpecifier:
                return f"--torch {torch!r} is neither a version nor a version specifier (e.g. 2.13.0 or '>=2.6,<2.12')."
        else:
            try:
                Version(text)
            except InvalidVersion:
                return f"--torch {torch!r} is not a torch version (e.g. 2.13.0, or a specifier like '>=2.6,<2.12')."
    return None


def english_sentence(key: str, **values: str) -> str:
    """The sentence ``key`` of en.yaml's ``sentences:``, filled with ``values``: a sentence whose words (the kinds'
    builds it lists, as the locale's data) live only there, written as every other sentence is read back
    (:func:`stackdoctor.core.texts.sentence` finds the same template for the reader's language)."""
    from stackdoctor.core import texts

    return str(texts.texts("en")["sentences"][key]).format(**values)
