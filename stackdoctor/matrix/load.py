"""Loading the matrix: each file parsed and validated against the declarations (:data:`~stackdoctor.matrix.tables.TABLES`),
then the layers (embedded files, the learned layer, ``--matrix`` files) layered in order by each table's rule."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackdoctor.core.errors import MatrixError
from stackdoctor.matrix.model import SCHEMA, Matrix
from stackdoctor.matrix.reader import MAX_DOCUMENT_BYTES, Ctx, check_document_size, check_keys, parse_yaml
from stackdoctor.matrix.table import Table
from stackdoctor.matrix.tables import TABLES

# keys a document may carry besides its tables
_DOCUMENT_KEYS = ("schema", "note")


def top_keys(tables: Sequence[Table[Any]] | None = None) -> set[str]:
    """The keys a matrix document may carry at its top level: ``schema``, ``note`` and every table's."""
    return {*_DOCUMENT_KEYS, *(t.key for t in (TABLES if tables is None else tables))}


TOP_KEYS = top_keys()


class Parsed:
    """One validated document: each table's rows (by YAML key), in the order the file gives them.

    ``layered``: the rows of a matrix already built (``learn.witness_matrix`` layers rows over one): they are taken
    as they are, not merged again (a learned patch row merged twice would repeat its sources)."""

    def __init__(self, rows: dict[str, list[Any]] | None = None, *, layered: bool = False) -> None:
        self.rows: dict[str, list[Any]] = rows if rows is not None else {}
        self.layered = layered

    def table(self, key: str) -> list[Any]:
        return self.rows.get(key, [])

    def count(self, key: str) -> int:
        return len(self.rows.get(key, ()))


def parse_document(data: Any, file: str, tables: Sequence[Table[Any]] | None = None) -> Parsed:
    reg = TABLES if tables is None else tables
    ctx = Ctx(file)
    out = Parsed()
    if data is None:
        return out
    top = ctx.mapping(data, "the document", 1)
    check_keys(ctx, top, TOP_KEYS if tables is None else top_keys(reg), "top level")
    schema = ctx.text(top, "schema", "top level")
    if schema is not None and schema != SCHEMA:
        raise ctx.fail(ctx.line_of(top, "schema"), "schema", f"unsupported schema {schema!r} (this stackdoctor reads {SCHEMA})")
    for t in reg:
        raw = top.get(t.key)
        if raw is None:
            continue
        line = ctx.line_of(top, t.key)
        rows: list[Any] = []
        if t.shape == "list":
            for i, item in enumerate(ctx.seq(raw, t.key, line)):
                where = f"{t.key}[{i}]"
                d = ctx.mapping(item, where, line)
                check_keys(ctx, d, t.names, where)
                rows.extend(t.parse(ctx, d, where, ""))
        elif t.shape == "mapping":
            m = ctx.mapping(raw, t.key, line)
            for key, item in m.items():
                where = f"{t.key}.{key}"
                wrong = t.check_key(key) if t.check_key is not None else None
                if wrong is not None:
                    raise ctx.fail(ctx.line_of(m, key), where, wrong)
                d = ctx.mapping(item, where, ctx.line_of(m, key))
                check_keys(ctx, d, t.names, where)
                rows.extend(t.parse(ctx, d, where, key))
        else:
            d = ctx.mapping(raw, t.key, line)
            check_keys(ctx, d, t.names, t.key)
            rows.extend(t.parse(ctx, d, t.key, t.key))
        out.rows[t.key] = rows
    return out


def build(parts: Sequence[tuple[str, Parsed]], tables: Sequence[Table[Any]] | None = None) -> Matrix:
    """The layers in order, each table layered by its rule (a later row meets the earlier one of the same key)."""
    reg = tuple(TABLES if tables is None else tables)
    accs: dict[str, dict[Any, Any]] = {t.key: {} for t in reg}
    for _file, p in parts:
        for t in reg:
            rows = p.rows.get(t.key)
            if not rows:
                continue
            acc = accs[t.key]
            key_of, merge = t.key_of, (None if p.layered else t.merge)
            for row in rows:
                acc[key_of(row)] = merge(acc, row) if merge is not None else row
    values = {t.key: t.value(accs[t.key]) for t in reg}
    named = {t.attr: values[t.key] for t in reg if t.attr}
    return Matrix(**named, files=tuple(f for f, _ in parts), tables=values, registry=reg)


def parse_matrix_text(text: str, file: str, tables: Sequence[Table[Any]] | None = None) -> Parsed:
    """Parse and validate one matrix document (raises :class:`MatrixError`)."""
    return parse_document(parse_yaml(text, file), file, tables)


def read_user_file(path: str | Path) -> str:
    from stackdoctor.system import TooLarge, read_bounded

    p = Path(path)
    try:
        if p.stat().st_size > MAX_DOCUMENT_BYTES:
            raise MatrixError(f"compat matrix {p} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.")
        # a FIFO or /dev/zero is refused before anything is read (NotRegularFile: an OSError with its reason)
        text = read_bounded(p, MAX_DOCUMENT_BYTES, too_large=True).decode("utf-8")
        check_document_size(text, str(p))
        return text
    except TooLarge:
        raise MatrixError(f"compat matrix {p} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.") from None
    except MatrixError:
        raise
    except UnicodeDecodeError:
        raise MatrixError(f"compat matrix {p} line 1: the file is not UTF-8 text.") from None
    except FileNotFoundError:
        raise MatrixError(f"cannot read the compat matrix {p}: no such file.") from None
    except IsADirectoryError:
        raise MatrixError(f"cannot read the compat matrix {p}: it is a folder, not a YAML file.") from None
    except PermissionError:
        raise MatrixError(f"cannot read the compat matrix {p}: permission denied.") from None
    except OSError as exc:
        raise MatrixError(f"cannot read the compat matrix {p}: {(exc.strerror or str(exc)).lower()}.") from None


@functools.lru_cache(maxsize=1)
def embedded_parts() -> tuple[tuple[str, Parsed], ...]:
    from stackdoctor.core.parsecache import package_files  # importlib.resources.files without its zip reader's imports

    try:
        base: Any = package_files("stackdoctor.compat_matrix")
    except ModuleNotFoundError:
        # run from a source checkout (``python -m stackdoctor`` in a clone): the data sits beside the package
        base = Path(__file__).resolve().parent.parent.parent / "compat_matrix"
    texts = []
    # learned*.yaml (written by ``stackdoctor matrix learn --shipped``) last: it layers over the hand-kept rows
    for entry in sorted(base.iterdir(), key=lambda e: (e.name.startswith("learned"), e.name)):
        if entry.name.endswith(".yaml") and entry.is_file():
            texts.append((f"compat_matrix/{entry.name}", entry.read_text(encoding="utf-8")))
    from stackdoctor.core import parsecache  # what the last run parsed, when nothing it depends on has changed
    from stackdoctor.matrix.pure import PLUGIN_VARIANT_KINDS

    here = Path(__file__).resolve().parent
    inputs: list[str | bytes] = [f"{kind} {pattern.pattern}" for kind, pattern in sorted(PLUGIN_VARIANT_KINDS.items())]
    inputs += [part for name, text in texts for part in (name, text)]
    inputs += parsecache.source_of(*sorted(here.glob("*.py")), here.parent / "core" / "versions.py", here.parent / "core" / "errors.py")

    def parse() -> tuple[tuple[str, Parsed], ...]:
        return tuple((name, parse_matrix_text(text, name)) for name, text in texts)

    def valid(kept: Any) -> bool:
        return isinstance(kept, tuple) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], Parsed) for p in kept)

    return parsecache.kept("matrix", inputs, parse, valid)


@functools.lru_cache(maxsize=1)
def embedded_matrix() -> Matrix:
    return build(embedded_parts())


def user_matrix_paths(extra: Sequence[str | Path] = (), env: dict[str, str] | None = None) -> list[str]:
    """``--matrix`` files, then ``STACKDOCTOR_MATRIX`` (os.pathsep-separated) when no ``--matrix`` was given."""
    paths = [str(p) for p in extra if str(p)]
    if not paths:
        raw = (os.environ if env is None else env).get("STACKDOCTOR_MATRIX", "")
        paths = [p for p in raw.split(os.pathsep) if p.strip()]
    return paths


def learned_layer_path(env: dict[str, str] | None = None) -> Path:
    """The user's learned layer (``stackdoctor matrix learn`` writes it; :func:`load_matrix` layers it over the
    embedded matrix, under ``--matrix`` files): ``STACKDOCTOR_LEARNED``, else
    ``$XDG_CONFIG_HOME/stackdoctor/learned.yaml`` (``~/.config/stackdoctor/learned.yaml``)."""
    e = os.environ if env is None else env
    if e.get("STACKDOCTOR_LEARNED"):
        return Path(e["STACKDOCTOR_LEARNED"]).expanduser()
    base = Path(e["XDG_CONFIG_HOME"]).expanduser() if e.get("XDG_CONFIG_HOME") else Path(e.get("HOME") or "~").expanduser() / ".config"
    return base / "stackdoctor" / "learned.yaml"


def own_layer(path: Path, *, explicit: bool) -> bool:
    """Whether the learned layer is read: a regular file (a FIFO or a device never is); the default one
    (``~/.config/stackdoctor/learned.yaml``) only when this user owns it and no one else may write it (issue 44: a
    layer another user planted would change a plan); one named by ``STACKDOCTOR_LEARNED`` is the user's choice."""
    import stat

    try:
        st = os.stat(path)  # a home folder this user cannot read (another user's HOME under sudo -u): no layer
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if explicit or not hasattr(os, "getuid"):
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def load_matrix(extra: Sequence[str | Path] = (), *, embedded: bool = True, tables: Sequence[Table[Any]] | None = None) -> Matrix:
    """The embedded matrix with user files layered over it (later files win).

    ``extra`` are ``--matrix`` files; without them ``STACKDOCTOR_MATRIX`` is read. With ``embedded=False`` the
    matrix is ``extra`` alone, layered in order, and ``STACKDOCTOR_MATRIX`` is not read (tests use this to run
    the resolver against a frozen matrix of their own). ``tables`` replaces the declarations the user files are
    read and layered with (a test's registry with a table of its own; the embedded files are read as shipped).

    :raises MatrixError: a file is unreadable, malformed or invalid (one sentence: file, line, field).
    """
    if not embedded:
        return build([(str(p), parse_matrix_text(read_user_file(p), str(p), tables)) for p in extra], tables)
    paths = user_matrix_paths(extra)
    learned = learned_layer_path()
    have_learned = own_layer(learned, explicit=bool(os.environ.get("STACKDOCTOR_LEARNED")))
    if have_learned:
        paths = [str(learned), *paths]
    if not paths and tables is None:
        return embedded_matrix()
    # the user's files are read and sized first: one too big is refused before anything is parsed
    texts = [(str(p), read_user_file(p)) for p in paths]
    parts = list(embedded_parts())
    for name, text in texts:
        parts.append((name, parse_matrix_text(text, name, tables)))
    return build(parts, tables)


def default_index_url(name: str = "pytorch") -> str:
    """``index_url(name)`` of the embedded matrix: the default where no matrix is at hand (a ``--matrix`` file
    can move it; code that holds a :class:`Matrix` asks it instead)."""
    return embedded_matrix().index_url(name)


def validate_file(path: str | Path) -> Parsed:
    """Validate one user matrix file on its own (``stackdoctor matrix validate``)."""
    return parse_matrix_text(read_user_file(path), str(path))

