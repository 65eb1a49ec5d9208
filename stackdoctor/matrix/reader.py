"""Reading one matrix document: safe YAML with line numbers, bounded (size, alias expansion), and the
validation context (:class:`Ctx`) whose failures are one sentence naming the file, the line and the field."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from packaging.version import InvalidVersion, Version

from stackdoctor.core.errors import MatrixError

# One matrix file's bounds, checked before anything is parsed (a 4 MiB file of 82k plain rows took 14 s and
# 254 MB to parse): the shipped matrix is 13 files, 2,975 lines and 250 KB in all, its biggest 1,944 lines.
MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_DOCUMENT_LINES = 20_000
MAX_ALIASES = 200


class LDict(dict):  # type: ignore[type-arg]
    line: int = 0
    key_lines: dict[str, int]


class LList(list):  # type: ignore[type-arg]
    line: int = 0


MAX_EXPANDED_NODES = 200_000


def make_loader(file: str) -> Any:
    import yaml

    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class Loader(base):  # type: ignore[valid-type,misc]
        pass

    def construct_mapping(loader: Any, node: Any) -> LDict:
        loader.flatten_mapping(node)
        d = LDict()
        d.line = node.start_mark.line + 1
        d.key_lines = {}
        for k_node, v_node in node.value:
            key = loader.construct_object(k_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise MatrixError(f"compat matrix {file} line {k_node.start_mark.line + 1}: a mapping key must be a plain value.")
            key = str(key)
            d[key] = loader.construct_object(v_node, deep=True)
            d.key_lines[key] = v_node.start_mark.line + 1
        return d

    def construct_sequence(loader: Any, node: Any) -> LList:
        lst = LList(loader.construct_object(c, deep=True) for c in node.value)
        lst.line = node.start_mark.line + 1
        return lst

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    return Loader


def check_expansion(node: Any, file: str) -> None:
    """Refuse alias bombs: the document's size with every alias expanded must stay small.

    Aliases make the node graph a DAG; its expanded size is computed once per distinct node (memoised),
    so a billion-laughs document is measured in microseconds, never expanded. A recursive alias is refused.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    aliases = 0

    def size(n: Any) -> int:
        nonlocal aliases
        key = id(n)
        if key in sizes:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise MatrixError(
                    f"compat matrix {file} line {n.start_mark.line + 1}: more than {MAX_ALIASES} YAML alias references "
                    "(refusing a possible alias bomb)."
                )
            return sizes[key]
        if key in active:
            raise MatrixError(f"compat matrix {file} line {n.start_mark.line + 1}: a YAML alias refers to itself (recursive document).")
        value = n.value
        if isinstance(value, list):
            active.add(key)
            total = 1
            for child in value:
                if isinstance(child, tuple):
                    total += size(child[0]) + size(child[1])
                else:
                    total += size(child)
                if total > MAX_EXPANDED_NODES:
                    raise _too_many_values(file, n.start_mark.line + 1, aliases > 0)
            active.discard(key)
        else:
            total = 1
        sizes[key] = total
        return total

    size(node)


def _too_many_values(file: str, line: int, through_aliases: bool) -> MatrixError:
    """A document with too many values: an alias bomb only where aliases made it so."""
    if through_aliases:
        return MatrixError(
            f"compat matrix {file} line {line}: the document expands to more than "
            f"{MAX_EXPANDED_NODES} values through YAML aliases (refusing a possible alias bomb)."
        )
    return MatrixError(f"compat matrix {file} line {line}: the document has more than {MAX_EXPANDED_NODES} values, more than a matrix file may hold.")


def check_document_size(text: str, file: str) -> None:
    """Refuse a document for its size or its number of lines (rows), before it is parsed."""
    if len(text) > MAX_DOCUMENT_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_DOCUMENT_BYTES:
        raise MatrixError(f"compat matrix {file} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.")
    lines = text.count("\n") + (not text.endswith("\n"))
    if lines > MAX_DOCUMENT_LINES:
        raise MatrixError(
            f"compat matrix {file} line {MAX_DOCUMENT_LINES + 1}: the file has {lines} lines, more than the "
            f"{MAX_DOCUMENT_LINES} a matrix file may have; keep only the rows you need."
        )


def parse_yaml(text: str, file: str) -> Any:
    import yaml

    check_document_size(text, file)
    loader = make_loader(file)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node, file)
        return loader.construct_document(node)
    except MatrixError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = (exc.problem or exc.context or "invalid YAML").strip().rstrip(".")
        raise MatrixError(f"compat matrix {file} line {line}: malformed YAML ({problem}).") from None
    except yaml.YAMLError as exc:
        raise MatrixError(f"compat matrix {file} line 1: malformed YAML ({str(exc).splitlines()[0] if str(exc) else 'error'}).") from None
    except RecursionError:
        raise MatrixError(f"compat matrix {file} line 1: YAML nested too deeply.") from None
    finally:
        loader.dispose()


class Ctx:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, line: int | None, where: str, what: str) -> MatrixError:
        return MatrixError(f"compat matrix {self.file} line {line or 1}: {where}: {what}.")

    def line_of(self, d: Any, key: str | None = None) -> int:
        if isinstance(d, LDict):
            if key is not None and key in d.key_lines:
                return d.key_lines[key]
            return d.line
        return getattr(d, "line", 1) or 1

    def mapping(self, value: Any, where: str, line: int) -> LDict:
        if not isinstance(value, dict):
            raise self.fail(line, where, f"expected a mapping, got {type_name(value)}")
        return value  # type: ignore[return-value]

    def seq(self, value: Any, where: str, line: int) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(line, where, f"expected a list, got {type_name(value)}")
        return value

    def text(self, d: LDict, key: str, where: str, *, required: bool = False) -> str | None:
        if key not in d or d[key] is None:
            if required:
                raise self.fail(self.line_of(d), f"{where}.{key}", "missing (every row needs it)")
            return None
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"expected a string, got {type_name(v)}")
        s = str(v).strip()
        if required and not s:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", "must not be empty")
        return s

    def strings(self, d: LDict, key: str, where: str) -> tuple[str, ...]:
        if key not in d or d[key] is None:
            return ()
        v = d[key]
        if not isinstance(v, list):
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"expected a list, got {type_name(v)}")
        out = []
        for i, item in enumerate(v):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise self.fail(self.line_of(d, key), f"{where}.{key}[{i}]", f"expected a string, got {type_name(item)}")
            out.append(str(item).strip())
        return tuple(out)

    def version(self, d: LDict, key: str, where: str) -> Version:
        s = self.text(d, key, where, required=True)
        assert s is not None
        try:
            v = Version(s)
        except InvalidVersion:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"unparsable version {s!r}") from None
        if v.local:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"version {s!r} must not carry a local suffix (the variant says that)")
        return v


def type_name(v: Any) -> str:
    if v is None:
        return "nothing"
    return {dict: "a mapping", LDict: "a mapping", list: "a list", LList: "a list", str: "a string", bool: "true/false"}.get(
        type(v), type(v).__name__
    )


def check_keys(ctx: Ctx, d: LDict, allowed: Collection[str], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise ctx.fail(ctx.line_of(d, k), f"{where}.{k}", f"unknown field (expected one of {', '.join(sorted(allowed))})")
