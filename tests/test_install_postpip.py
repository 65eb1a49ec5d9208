"""After the installer's last line, ``install`` is never silent (issue 29, "Speed"): each step that follows (the
family's files against their RECORD, the import of torch in the target, the commit, the leftovers) is said before
it starts, on a terminal; ``-v`` says them in a pipe too, and each step's time. No time limit is asserted.

Real pip installs tests/indexserver.py's fake torch (NOT PyTorch) from a server on 127.0.0.1 into a real venv
(the fixtures of tests/test_install.py); the terminal is a real pseudo-terminal (``os.openpty``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_install import REPO, cli_env, family, py, sd, seeded, server, venv  # noqa: E402, F401

pytestmark = [pytest.mark.posix, pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")]

STEPS = [
    "stackdoctor: checking the installed files against their RECORD...",
    "stackdoctor: importing torch in the target...",
    "stackdoctor: committing the new build...",
    "stackdoctor: looking for the previous variant's packages left behind...",
]
TIME_LINE = re.compile(r"^  (record|import|commit|leftovers): \d+\.\d s$")


def _args(server, venv) -> list[str]:
    return ["--python", py(venv), "--torch", "2.13.0", "--variant", "cu130", "--index-base", server.base(), "--yes"]


def _in_order_before_done(lines: list[str], wanted: list[str]) -> None:
    done = next(i for i, ln in enumerate(lines) if ln.startswith("done: "))
    where = [lines.index(w) for w in wanted]  # each is there (ValueError names the one that is not)
    assert where == sorted(where) and where[-1] < done, lines
    pip_last = max(i for i, ln in enumerate(lines) if ln.startswith("Successfully installed"))
    assert pip_last < where[0], lines  # said after pip's last line, before the silence it fills


def test_verbose_in_a_pipe_says_each_step_and_its_time_before_done(server, venv, cli_env):
    p = sd([*_args(server, venv), "-v"], dict(cli_env, COLUMNS="250"))
    assert p.returncode == 0, p.stderr[-3000:]
    assert family(venv)["torch"] == "2.13.0+cu130"
    assert "\r" not in p.stderr and "\x1b" not in p.stderr  # a pipe gets plain lines: no spinner, no carriage return
    lines = p.stderr.splitlines()
    _in_order_before_done(lines, STEPS)
    times = [ln for ln in lines if TIME_LINE.match(ln)]
    assert [t.split(":")[0].strip() for t in times] == ["record", "import", "commit", "leftovers"], lines
    done = next(i for i, ln in enumerate(lines) if ln.startswith("done: "))
    assert all(lines.index(t) < done for t in times)


def test_without_verbose_a_pipe_gets_no_step_lines(server, venv, cli_env):
    p = sd(_args(server, venv), dict(cli_env, COLUMNS="250"))
    assert p.returncode == 0, p.stderr[-3000:]
    assert not any(s in p.stderr for s in STEPS) and not TIME_LINE.search(p.stderr), p.stderr


def _on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 180) -> tuple[int, str]:
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, cwd=REPO, start_new_session=True)
    os.close(slave)
    out = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout)
    finally:
        reader.join(5)
        os.close(master)
    return code, re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace")).replace("\r\n", "\n")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_on_a_terminal_each_step_is_said_before_it_starts(server, venv, cli_env, lang):
    env = dict(cli_env, COLUMNS="250", TERM="xterm", LANG="zh_CN.UTF-8" if lang == "zh" else "C.UTF-8")
    code, text = _on_a_terminal([sys.executable, "-m", "stackdoctor", "install", *_args(server, venv)], env)
    assert code == 0, text[-3000:]
    lines = [ln.rstrip() for ln in text.splitlines()]
    if lang == "en":
        _in_order_before_done(lines, STEPS)
    else:
        zh = ["正在按 RECORD 核对已安装的文件", "正在目标环境中导入 torch", "正在提交新构建", "正在查找上一个变体留下的软件包"]
        where = [next(i for i, ln in enumerate(lines) if w in ln) for w in zh]
        assert where == sorted(where), lines
    assert not TIME_LINE.search(text)  # the times are -v's


def test_a_file_hashed_once_is_read_again_when_it_changed(tmp_path):
    """The backup worker reads each file once per judgement (the waste measured: a same-build reinstall hashed
    every file twice), but a file rewritten in between, even to the same size, is hashed again."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sd_backup_under_test", REPO / "stackdoctor" / "_worker" / "sd_backup.py")
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    f = tmp_path / "m.py"
    f.write_text("VALUE = 1\n", encoding="utf-8")
    first = worker.hash_once(str(f))
    assert first == worker.sha256_b64(str(f)) == worker.hash_once(str(f))
    f.write_text("VALUE = 2\n", encoding="utf-8")  # same size, new content
    assert worker.hash_once(str(f)) == worker.sha256_b64(str(f)) != first


def test_the_record_check_hashed_by_threads_names_the_first_changed_file(tmp_path):
    """complete() hashes a distribution's files with a few threads (issue 44, the wait after pip): every file right
    is None, and a changed or missing file is named, the first in RECORD order."""
    import base64
    import hashlib
    import importlib.metadata
    import importlib.util

    spec = importlib.util.spec_from_file_location("sd_backup_threads", REPO / "stackdoctor" / "_worker" / "sd_backup.py")
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    site = tmp_path / "site"
    info = site / "fam-1.0.dist-info"
    info.mkdir(parents=True)
    rows = []
    for i in range(300):
        p = site / "fam" / f"m{i}.py"
        p.parent.mkdir(exist_ok=True)
        p.write_text(f"VALUE = {i}\n")
        digest = base64.urlsafe_b64encode(hashlib.sha256(p.read_bytes()).digest()).rstrip(b"=").decode()
        rows.append(f"fam/m{i}.py,sha256={digest},{p.stat().st_size}")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fam\nVersion: 1.0\n")
    (info / "RECORD").write_text("\n".join([*rows, "fam-1.0.dist-info/RECORD,,"]) + "\n")
    dist = importlib.metadata.PathDistribution(info)
    worker.HASH_THREADS = 4
    assert worker.complete(dist) is None
    (site / "fam" / "m250.py").write_text("VALUE = -1\n")
    (site / "fam" / "m120.py").unlink()
    assert worker.complete(dist) == "fam/m120.py is missing"
