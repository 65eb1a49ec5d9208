"""Issue 35 item 5: under Chinese (``LANG=zh_CN.UTF-8`` or ``--lang zh``) every sentence of stackdoctor's own is
Chinese: install's plans (several machines and what-ifs), its real result lines (a real pip into a real venv from an
index on 127.0.0.1), explain, diff and ``check -v``. Each run FAILS on a run of three or more English words that are
not a command, a path, a flag, a version or a code (:func:`english_runs`); pip's own transcript is pip's, not ours."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import copy_venv, machine_env, run_sd, venv_bin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from indexserver import IndexServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEAD_INDEX = "http://127.0.0.1:9/simple"

# a value, never a sentence: `code`, a path or URL, KEY=value, a flag, anything with a digit, 'quoted', {field}
_VALUE = re.compile(r"`[^`]*`|\S*[/\\=]\S*|--?[A-Za-z][\w.-]*|\S*\d\S*|'[^']*'|\{[^}]*\}")
_WORD = re.compile(r"[A-Za-z]*[a-z][A-Za-z'-]*")  # an acronym (CPU, AMD, EPYC) or a name in capitals is no sentence
# a command line as the screen shows one (the plan's command, a route's): a program, not a sentence
_COMMAND_LINE = re.compile(r"^(\$ |env |[A-Z_]+=|/|python|stackdoctor |pip |uv |conda |mamba |micromamba |pixi |export |& )")


def english_runs(text: str) -> list[str]:
    """Runs of >= 3 plain English words in ``text``, once commands, paths, flags, versions and codes are taken out."""
    out: list[str] = []
    for line in text.splitlines():
        s = line.strip().lstrip("-+!•·✓✗ ").strip()
        if _COMMAND_LINE.match(s):
            continue
        s = re.sub(r"[，。：；（）、“”]|[\u4e00-\u9fff]+", " | ", s)  # Chinese text and punctuation end a run
        run: list[str] = []
        for w in _VALUE.sub(" | ", s).split():
            bare = w.strip(",.;:()[]（）：；，。")
            if bare and _WORD.fullmatch(bare) and bare == w.strip(",.;:()"):
                run.append(bare)
                continue
            if len(run) >= 3:
                out.append(" ".join(run))
            run = []
        if len(run) >= 3:
            out.append(" ".join(run))
    return out


def test_the_detector_finds_english_and_passes_chinese():
    assert english_runs("torch 2.13.0 cpu：no GPU found on this machine") == ["found on this machine"]
    assert english_runs("✓ CPU      AMD EPYC，2 核") == []
    assert english_runs("  - torch 2.14.0 cu126：适用于本机的最新版本与 CUDA 构建") == []
    assert english_runs("命令：\n  /x/bin/python -m pip install torch==2.13.0+cpu --index-url https://download.pytorch.org/whl/cpu") == []
    assert english_runs("stackdoctor: the install failed (error: x)") == ["stackdoctor the install failed error x"]
    assert english_runs("修复：stackdoctor install --python /usr/bin/python3") == []


# pip's own transcript (it is pip's language, not stackdoctor's): its progress lines and its error box
_PIP_LINE = re.compile(
    r"^\s*(Looking in|Collecting|Downloading|Installing collected|Attempting uninstall|Found existing|Uninstalling|"
    r"Successfully|Requirement already|Using cached|Processing|Obtaining|Rolling back|Moving to|from /|ERROR:|WARNING:|DEPRECATION:|\[notice\])"
)


def ours(stderr: str) -> str:
    """stderr without pip's transcript: its lines, and its ``error: ...`` box up to its ``hint:`` line."""
    keep, in_box = [], False
    for line in stderr.splitlines():
        if re.match(r"^error: [a-z-]+$", line):
            in_box = True
        if in_box:
            in_box = not line.startswith("hint:")
            continue
        if not _PIP_LINE.match(line):
            keep.append(re.sub(r"[（(](ERROR|error): .*?[）)](?=[；;。.])", "(pip)", line))  # pip's own line, quoted in ours
    return "\n".join(keep)


# the matrix's own notes are data with their sources (compat_matrix/), quoted as the matrix writes them
_MATRIX_NOTES = re.compile(r"(有未经核实的信息：).*$|(导入：)[^；。]*", re.MULTILINE)  # and Python's own ImportError text


def assert_chinese(*texts: str) -> None:
    for text in texts:
        text = _MATRIX_NOTES.sub(lambda m: m.group(1) or m.group(2), text)
        left = english_runs(text)
        assert left == [], f"English left in a zh screen: {left}\n---\n{text}"


def zh_env(tmp_path: Path, how: str, **extra: str) -> tuple[dict[str, str], list[str]]:
    """``how``: "LANG" (zh_CN.UTF-8) or "--lang" (the flag, with an English LANG)."""
    env = machine_env(tmp_path / "bin", None, PIP_INDEX_URL=DEAD_INDEX, **extra)
    if how == "LANG":
        env["LANG"] = "zh_CN.UTF-8"
        return env, []
    return env, ["--lang", "zh"]


# ---------------------------------------------------------------- install's plans: several machines and what-ifs

DRY_RUNS = {
    "this-machine": [],
    "cuda-on-no-gpu": ["--variant", "cu126"],
    "unknown-torch": ["--torch", "9.9"],
    "rocm-here": ["--variant", "rocm7.2"],
    "ada-old-driver": ["--driver", "550.54.14", "--gpu", "sm_89"],
    "hopper-what-if": ["--gpu", "sm_90", "--driver", "570.86.10", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.12"],
    "blackwell": ["--gpu", "sm_120", "--driver", "580.65.06"],
    "windows": ["--platform", "win_amd64", "--python-version", "3.12"],
    "mac": ["--platform", "macosx_14_0_arm64", "--python-version", "3.12"],
    "amd-what-if": ["--gfx", "gfx1100"],
    "emit-yml": ["--emit", "environment.yml"],
    "emit-req": ["--emit", "requirements"],
}


@pytest.mark.parametrize("how", ["LANG", "--lang"])
@pytest.mark.parametrize("case", sorted(DRY_RUNS))
def test_install_plans_are_chinese(tmp_path, case, how):
    env, flag = zh_env(tmp_path, how)
    r = run_sd(["install", "--dry-run", "--offline", *DRY_RUNS[case], *flag], env=env, cwd=tmp_path)
    assert r.rc in (0, 1, 2), r.stderr
    assert "Traceback" not in r.stderr and "None" not in r.stdout + r.stderr
    shown = r.stderr if DRY_RUNS[case][:1] == ["--emit"] else r.stdout + r.stderr
    assert_chinese(shown)
    assert re.search(r"[\u4e00-\u9fff]", r.stdout + r.stderr), r.stdout + r.stderr


def test_install_usage_errors_are_chinese_with_the_flag(tmp_path):
    env, flag = zh_env(tmp_path, "--lang")
    r = run_sd(["install", "--dry-run", "--torch", "banana", *flag], env=env, cwd=tmp_path)
    assert r.rc == 2 and "banana" in r.stderr
    assert_chinese(r.stderr)


# ---------------------------------------------------------------- install's real result lines


@pytest.fixture(scope="module")
def server():
    srv = IndexServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """The run's one seeded venv (fake torch 2.12.0+cu126, torchvision 0.27.0+cu126; tests/test_install.py), never changed:
    each test copies it."""
    from test_install import shared_seed

    return shared_seed(tmp_path_factory)


def test_install_result_lines_are_chinese(server, seeded, tmp_path):
    """Installed (done, the leftover), already satisfied, leftovers removed, a torch whose wheel fails put back from
    its own files, a torch that does not import rolled back: each line stackdoctor writes is Chinese."""
    venv = tmp_path / "venv"
    copy_venv(seeded, venv)
    env, _ = zh_env(tmp_path, "LANG", STACKDOCTOR_MATRIX="", PIP_CACHE_DIR=str(tmp_path / "pip-cache"))
    py = str(venv_bin(venv))

    def install(*args: str, mode: str = "ok") -> str:
        r = run_sd(["install", "--python", py, "--index-base", server.base(mode), "--yes", *args], env=env, cwd=tmp_path, timeout=300)
        assert r.rc in (0, 1), r.stderr[-3000:]
        assert_chinese(r.stdout, ours(r.stderr))
        return r.stderr

    first = install("--torch", "2.13.0", "--variant", "cu130")
    assert "完成：" in first and "--remove-leftovers" in first
    assert "已满足" in install("--torch", "2.13.0", "--variant", "cu130")
    install("--torch", "2.12.0", "--variant", "cu126", "--remove-leftovers")
    broken = install("--torch", "2.13.0", "--variant", "cu130", mode="brokentorch")
    assert "放回" in broken or "重新安装" in broken, broken[-2000:]
    noimport = install("--torch", "2.13.0", "--variant", "cu130", mode="noimport")
    assert "stackdoctor: " in noimport, noimport[-2000:]


# ---------------------------------------------------------------- explain, diff, check -v


def test_explain_is_chinese(tmp_path):
    env, _ = zh_env(tmp_path, "LANG")
    for code in ("driver-too-old", "install-unfinished", "torch-missing"):
        r = run_sd(["explain", code], env=env)
        assert r.rc == 0
        head = r.stdout.split("\n\n", 1)[0]
        assert "规则组：驱动" in head or code != "driver-too-old", head
        assert_chinese(head)


@pytest.fixture(scope="module")
def two_reports(tmp_path_factory, torch_python):
    d = tmp_path_factory.mktemp("zh-diff")
    env = machine_env(d / "bin", None)
    a = run_sd(["check", "--no-kernels", "--json", "--python", torch_python], env=env)
    b = run_sd(["check", "--no-kernels", "--json", "--python", sys.executable], env=env)
    (d / "a.json").write_text(a.stdout, encoding="utf-8")
    (d / "b.json").write_text(b.stdout, encoding="utf-8")
    return d / "a.json", d / "b.json", env


def test_diff_is_chinese_and_has_no_python_words(two_reports):
    a, b, env = two_reports
    zh = dict(env, LANG="zh_CN.UTF-8")
    r = run_sd(["diff", str(a), str(b)], env=zh)
    assert r.rc in (0, 1), r.stderr
    assert_chinese(r.stdout)
    cells = re.findall(r"[│|]\s*([^│|]+?)\s*(?=[│|])", r.stdout)
    assert not {"True", "False", "None", "warn", "ok", "fail"} & set(cells), r.stdout
    assert all(line == line.rstrip() for line in r.stdout.splitlines()), "a line ends in spaces in a pipe"
    en = run_sd(["diff", str(a), str(b)], env=env)
    assert all(line == line.rstrip() for line in en.stdout.splitlines())
    assert not {"True", "False", "None"} & set(re.findall(r"[│|]\s*([^│|]+?)\s*(?=[│|])", en.stdout)), en.stdout


def test_check_verbose_is_chinese(two_reports):
    _, b, env = two_reports
    r = run_sd(["check", "--replay", str(b), "-v", "--lang", "zh"], env=env)
    assert "(absent)" not in r.stdout, r.stdout
    assert_chinese(r.stdout)


def test_every_command_takes_lang(tmp_path):
    """``--lang zh`` is an option of every command that prints sentences (install's was "No such option")."""
    env = machine_env(tmp_path / "bin", None)
    for args in (["install", "--help"], ["check", "--help"], ["kernels", "--help"], ["explain", "--help"], ["report", "--help"],
                 ["diff", "--help"], ["matrix", "show", "--help"], ["matrix", "learn", "--help"]):
        r = run_sd(args, env=env)
        assert r.rc == 0 and "--lang" in r.stdout, (args, r.stdout[-500:])
    r = run_sd(["install", "--lang", "xx", "--dry-run"], env=env)
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1 and "en" in r.stderr



# ---------------------------------------------------------------- every literal plan sentence has a Chinese template

_PLAN_SITES = ("reasons.append", "warnings.append", "suggestions.append", "cautions.append", "Reject", "notes.append")
# the resolver's package, every file of it, and the install package's flow, conda and the files that were install.py
# (issue 31 split resolve.py and availability.py into stackdoctor/resolve/, install*.py into stackdoctor/install/)
_PLAN_FILES = (*sorted(p.relative_to(REPO / "stackdoctor").as_posix() for p in (REPO / "stackdoctor" / "resolve").glob("*.py")),
               "install/flow.py", "install/request.py", "install/locate.py", "install/conda.py", "install/transaction.py", "install/verify.py",
               "install/backup.py", "install/argv.py", "install/emit.py", "install/talk.py",
               # the kinds' own paths and sentences that moved out of them (issue 45): macOS's and the Jetson's plans, conda's CUDA builds
               "accelerators/apple/plan.py", "accelerators/jetson/plan.py", "accelerators/nvidia/conda.py")


def _plan_sentence_sites():
    import ast

    for name in _PLAN_FILES:
        path = REPO / "stackdoctor" / name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and ast.unparse(node.func).endswith(_PLAN_SITES):
                yield f"{name}:{node.lineno}", ast.unparse(node.func).endswith("Reject"), node.args[0]
            elif isinstance(node, ast.Call) and len(node.args) == 2 and ast.unparse(node.func).endswith("reasons.insert"):
                yield f"{name}:{node.lineno}", False, node.args[1]


def test_every_literal_plan_sentence_is_catalogued_in_chinese():
    """Each literal reason, warning, suggestion, caution, rejection and install note the resolver, the sources check,
    the conda routes and the install write has a ``sentences:`` template, so the zh screen shows it in Chinese."""
    from test_catalog import _variants

    from stackdoctor.rules import catalog

    missing, sites = [], 0
    for where, reject, arg in _plan_sentence_sites():
        found = _variants(arg)
        if found is None:
            continue  # built from another sentence (a rejection's reason, a note a worker wrote): checked where written
        sites += 1
        variants, tokens = found
        for text in variants:
            if reject:  # shown as "torch X: <reason>", the variant's name taken off
                text = re.sub(r"^Zq0q: ", "", text)
            zh = catalog.sentence(text, "zh")
            if english_runs(zh.replace("Zq", " 0").replace("q", " ")) and zh == text:
                missing.append(f"{where}: {text}")
    assert sites > 60
    assert not missing, "add a sentences: entry to en.yaml and zh.yaml for:\n" + "\n".join(missing)


# ---------------------------------------------------------------- issue 35 item 13: the fixture count README states


def test_readme_fixture_counts_are_the_folders_there():
    real = REPO / "tests" / "fixtures" / "real"
    folders = sum(1 for p in real.iterdir() if p.is_dir())
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"(\d+) folders of real recorded tool outputs as fixtures[^:]*:(.*?)\.\n", readme, re.DOTALL)
    assert m and int(m.group(1)) == folders, (m and m.group(1), folders)
    parts = [int(n) for n in re.findall(r"(?<![\d.])(\d+)\s+(?:pasted|committed|quoted|printed|captured)", m.group(2))]
    assert sum(parts) == folders, parts
    assert f"## What they are ({folders} folders)" in (real / "README.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- issue 35 item 7: no stray placeholder


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_kernels_not_run_has_no_placeholder(tmp_path, torch_python, lang):
    """A project that asks for a kernel, checked with --no-kernels: "the kernels did not run." (before: "... (-)")."""
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nkernels = ["matmul"]\n', encoding="utf-8")
    env = machine_env(tmp_path / "bin", None, COLUMNS="200")
    r = run_sd(["check", "--no-kernels", "--json", "--lang", lang, "--python", torch_python], env=env, cwd=tmp_path)
    unmet = [f for f in r.json()["findings"] if f["code"] == "requirement-unmet"]
    assert unmet and all("(-)" not in f["detail"] and "（-）" not in f["detail"] for f in unmet), unmet
    assert any("did not run" in f["detail"] or "没有运行" in f["detail"] for f in unmet), unmet


# ---------------------------------------------------------------- issue 35 item 11: errors a newcomer meets


@pytest.mark.parametrize(
    "args, want",
    [
        (["install", "torchvison", "--dry-run"], "did you mean torchvision?"),
        (["kernels", "matmal"], "did you mean matmul?"),
        (["report", "-o", "{tmp}/nonexistent/x/y", "--no-kernels"], "the folder {tmp}/nonexistent/x does not exist"),
        (["diff", "{tmp}/nope-a.json", "{tmp}/nope-b.json"], "{tmp}/nope-a.json: no such file."),
    ],
)
def test_newcomer_errors_are_one_sentence_exit_2(tmp_path, args, want):
    env = machine_env(tmp_path / "bin", None)
    r = run_sd([a.replace("{tmp}", str(tmp_path)) for a in args], env=env, cwd=tmp_path)
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert want.replace("{tmp}", str(tmp_path)) in r.stderr, r.stderr
    assert not (tmp_path / "nonexistent").exists()  # report -o refused before creating any folder
    zh = run_sd([a.replace("{tmp}", str(tmp_path)) for a in args], env=dict(env, LANG="zh_CN.UTF-8"), cwd=tmp_path)
    assert zh.rc == 2 and re.search(r"[\u4e00-\u9fff]", zh.stderr) and "did you mean" not in zh.stderr and "no such" not in zh.stderr, zh.stderr


# ---------------------------------------------------------------- issue 35 item 3: environment.yml from a plain venv


def test_emit_environment_yml_in_a_venv_offers_no_conda_route(tmp_path):
    """The file is written (conda-forge's build), but the screen of a plain venv shows no conda route and no
    `conda install -p <venv>`: a venv is not a conda env."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = machine_env(tmp_path / "bin", None, PIP_INDEX_URL=DEAD_INDEX)
    r = run_sd(["install", "--dry-run", "--offline", "--torch", "2.13.0", "--emit", "environment.yml", "--python", str(venv_bin(venv))], env=env, cwd=tmp_path)
    assert r.rc == 0, r.stderr
    assert "channels:" in r.stdout and "conda-forge" in r.stdout
    assert "route " not in r.stderr and "conda install" not in r.stderr and "recommended" not in r.stderr, r.stderr


# ---------------------------------------------------------------- issue 35 item 4: an externally managed Python (PEP 668)

SYSTEM_PY = Path("/usr/bin/python3")


def _marked() -> bool:
    if not SYSTEM_PY.exists():
        return False
    out = subprocess.run([str(SYSTEM_PY), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"], capture_output=True, text=True)
    return out.returncode == 0 and (Path(out.stdout.strip()) / "EXTERNALLY-MANAGED").is_file()


@pytest.mark.skipif(not _marked(), reason="needs a system Python marked EXTERNALLY-MANAGED (Debian/Ubuntu's /usr/bin/python3)")
def test_externally_managed_python_is_warned_at_dry_run_and_its_failure_says_make_a_venv(server, tmp_path):
    env = machine_env(tmp_path / "bin", None, PIP_INDEX_URL=DEAD_INDEX, STACKDOCTOR_MATRIX="", PIP_CACHE_DIR=str(tmp_path / "pip-cache"))
    venv_cmd = f"{SYSTEM_PY} -m venv .venv && stackdoctor install --python .venv/bin/python"
    args = ["install", "--python", str(SYSTEM_PY), "--torch", "2.13.0", "--variant", "cpu", "--index-base", server.base()]
    dry = run_sd([*args, "--dry-run"], env=env, cwd=tmp_path)
    assert dry.rc == 0, dry.stderr
    assert "externally managed (PEP 668)" in dry.stdout and venv_cmd in dry.stdout, dry.stdout
    real = run_sd([*args, "--yes"], env=env, cwd=tmp_path, timeout=300)
    assert real.rc == 1, real.stderr[-2000:]
    assert "pip refuses to install into it; make a venv and install there: " + venv_cmd in real.stderr, real.stderr[-2000:]
    zh = run_sd([*args, "--yes", "--lang", "zh"], env=env, cwd=tmp_path, timeout=300)
    assert "请创建 venv 并安装到那里：" + venv_cmd in zh.stderr
    assert_chinese(zh.stdout, ours(zh.stderr))


# ---------------------------------------------------------------- issue 35 item 7: Markdown says what the screen says


def test_markdown_probe_table_says_none_found_as_the_screen_does(two_reports, tmp_path):
    _, b, env = two_reports
    r = run_sd(["report", "--replay", str(b), "-o", str(tmp_path / "rep")], env=env, cwd=tmp_path)
    assert r.rc in (0, 1), r.stderr
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    screen = run_sd(["check", "--replay", str(b), "-v"], env=env).stdout
    for probe in ("nvidia", "rocm"):
        if re.search(rf"^{probe}\s+.\s*none found", screen, re.MULTILINE) or re.search(rf"^{probe}\s+│\s*none found", screen, re.MULTILINE):
            assert f"| {probe} | none found |" in md, md
    assert "| nvidia | ok |" not in md


def test_markdown_puts_a_fix_that_starts_with_a_path_in_a_code_block(two_reports):
    from stackdoctor.model.report import load_report
    from stackdoctor.render.markdown import render_markdown

    _, b, _ = two_reports
    report = load_report(str(b))
    report.findings[0].fix = "/usr/bin/python3 -m pip install 'numpy<2'"
    md = render_markdown(report, redacted=False, lang="en")
    assert "```sh\n/usr/bin/python3 -m pip install 'numpy<2'\n```" in md, md


def test_matrix_learn_errors_show_the_users_own_index_and_its_own_flags(tmp_path):
    """matrix learn's error names the index as the user typed it (127.0.0.1, as install does; a bundle's host
    redaction is for sharing) and suggests its own --index, never install's --index-base / --offline."""
    env = machine_env(tmp_path / "bin", None)
    args = ["matrix", "learn", "--index", DEAD_INDEX, "--out", str(tmp_path / "l.yaml"), "--torch", "2.13.0"]
    r = run_sd(args, env=env, cwd=tmp_path)
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "127.0.0.1:9" in r.stderr and "<ip-" not in r.stderr and "--index-base" not in r.stderr and "--offline" not in r.stderr, r.stderr
    assert "--index." in r.stderr
    zh = run_sd([*args, "--lang", "zh"], env=env, cwd=tmp_path)
    assert "换一个 --index" in zh.stderr, zh.stderr
    secret = run_sd(["matrix", "learn", "--index", "http://user:hunter22@127.0.0.1:9/simple", "--out", str(tmp_path / "l.yaml"), "--torch", "2.13.0"], env=env, cwd=tmp_path)
    assert "hunter22" not in secret.stderr and "127.0.0.1:9" in secret.stderr, secret.stderr
