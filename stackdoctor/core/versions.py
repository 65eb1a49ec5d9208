"""Version strings as numbers: the one helper every module uses (pure, never raises).

>>> release("2.13.0+cu130")
(2, 13, 0)
>>> release("rocm6.2.4")
()
>>> major_minor("12")
(12, 0)
>>> major_minor("14_0")
(14, 0)
>>> at_least("550.54.14", "550.54")
True
>>> same_release("550.54", "550.54.14")
True
>>> public("2.13.0+cu130"), local("2.13.0+cu130"), mm("3.11.7")
('2.13.0', 'cu130', '3.11')
"""

from __future__ import annotations

import re

__all__ = ["at_least", "dotted", "local", "major_minor", "mm", "public", "release", "same_release"]

_LEADING = re.compile(r"\s*(\d+(?:\.\d+)*)")
_DOTTED = re.compile(r"^\d+(?:\.\d+){0,3}$")
_MM = re.compile(r"^\s*(\d+)(?:[._](\d+))?")


def release(text: str | None) -> tuple[int, ...]:
    """The leading dotted numbers of a version as a tuple: ``"2.13.0+cu130"`` -> ``(2, 13, 0)``; ``()`` when none."""
    if not text:
        return ()
    m = _LEADING.match(text)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def dotted(text: str | None) -> tuple[int, ...] | None:
    """A version made only of 1 to 4 dotted numbers (a driver: ``"580.82.07"``), else None."""
    t = (text or "").strip()
    return tuple(int(x) for x in t.split(".")) if _DOTTED.match(t) else None


def major_minor(text: str | None) -> tuple[int, int] | None:
    """``(major, minor)`` of ``"12.4"``, ``"12"`` (minor 0) or ``"14_0"`` (macOS platform tags); None when not a version."""
    m = _MM.match(text or "")
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def at_least(a: str | None, b: str | None) -> bool:
    """``a >= b`` for dotted versions, missing parts counting as 0; False when either is not a version."""
    ta, tb = dotted(a), dotted(b)
    if ta is None or tb is None:
        return False
    n = max(len(ta), len(tb))
    return ta + (0,) * (n - len(ta)) >= tb + (0,) * (n - len(tb))


def same_release(a: str, b: str) -> bool:
    """Equal, or one a dotted prefix of the other (nvidia-smi's table prints "550.54" for 550.54.14)."""
    a, b = a.strip(), b.strip()
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def public(version: str | None) -> str | None:
    """The public part of a version: ``"2.13.0+cu130"`` -> ``"2.13.0"``."""
    return version.split("+", 1)[0] if version else version


def local(version: str | None) -> str | None:
    """The local label of a version: ``"2.13.0+cu130"`` -> ``"cu130"``; None without one."""
    return version.split("+", 1)[1] if version and "+" in version else None


def mm(version: str | None) -> str | None:
    """``"major.minor"`` of a version: ``"3.11.7"`` -> ``"3.11"``; None when it has no minor."""
    t = release(version)
    return f"{t[0]}.{t[1]}" if len(t) >= 2 else None
