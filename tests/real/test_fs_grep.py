"""`fs.grep` on real trees, with ripgrep and with the Python engine, and both engines on the same trees compared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eukhe.core.bound import Off
from eukhe.fs import GrepAnswer, GrepArgs, Reason, grep
from eukhe.fs.grepping import Engine
from tests.real.fs_support import ENGINES, local, make_tree, refused, small_limits
from tests.real.tools import needs_tools

pytestmark = pytest.mark.real

needs_rg = needs_tools("rg")

TRICKY: dict[str, str | bytes | None] = {
    "a.py": "import os\nx = 1\n",
    "a-b.txt": "x marks\n",
    "a.txt": "no\nx\n",
    "a/b.py": "x = 2\r\nlast line without newline x",
    "B.md": "X upper\nx lower\n",
    "é.txt": "x é\n",
    "_x": "x\n",
    ".hidden.py": "x hidden\n",
    ".hdir/in.py": "x in hidden dir\n",
    ".gitignore": "*.log\nbuild/\n!keep.log\n/rooted.txt\nsub/deep/*.tmp\n",
    "app.log": "x logged\n",
    "keep.log": "x kept\n",
    "rooted.txt": "x rooted\n",
    "sub/rooted.txt": "x not rooted here\n",
    "build/out.py": "x built\n",
    "sub/build": "x a file named build\n",
    "sub/deep/t.tmp": "x tmp\n",
    "sub/deep/t.py": "x deep\n",
    "sub/.gitignore": "!*.log\n*.py\n!keep.py\n",
    "sub/again.log": "x re-included\n",
    "sub/skip.py": "x skipped\n",
    "sub/keep.py": "x kept py\n",
    "bin/early.dat": b"x\0binary\n",
    "bin/late.dat": b"x before\n" + b"y" * 300_000 + b"\n\0x after\n",
    "latin1.txt": b"caf\xe9 x\n",
    "empty.txt": "",
    "nul-free/long.txt": "x\n" * 1000,
}


def tricky_tree(root: Path) -> Path:
    make_tree(root, TRICKY)
    (root / "link.py").symlink_to(root / "a.py")
    (root / "linkdir").symlink_to(root / "sub")
    os.mkfifo(root / "fifo")
    (root / os.fsdecode(b"raw\xff.txt")).write_bytes(b"x raw name\n")
    return root


def lines(answer: GrepAnswer) -> list[str]:
    return answer.output.text.splitlines()


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_follows_the_documented_rules(tmp_path: Path, engine: Engine) -> None:
    root = tricky_tree(tmp_path / "t")
    answer = grep(local(root, Off()), GrepArgs(pattern="x"), engine=engine)
    found = lines(answer)
    paths = [line.split(":", 1)[0] for line in found]
    # Sorted by path component by component (bytes), then line; a directory's files come where its name sorts.
    assert paths == sorted(paths, key=lambda p: [os.fsencode(part) for part in p.split("/")])
    assert paths.index("a/b.py") < paths.index("a-b.txt") < paths.index("a.py")
    assert "a/b.py:1:x = 2" in found  # the \r of a CRLF line is not shown
    assert "a/b.py:2:last line without newline x" in found
    assert "B.md:2:x lower" in found and "B.md:1:X upper" not in found  # case-sensitive
    assert "keep.log:1:x kept" in found and "sub/again.log:1:x re-included" in found
    assert "sub/rooted.txt:1:x not rooted here" in found
    assert "sub/deep/t.py:1:x deep" not in found  # sub/.gitignore ignores *.py below sub
    assert "sub/keep.py:1:x kept py" in found
    assert "sub/build:1:x a file named build" in found  # `build/` ignores directories only
    assert "nul-free/long.txt:1000:x" in found
    assert "latin1.txt:1:caf\ufffd x" in found
    assert "raw\ufffd.txt:1:x raw name" in found
    for absent in ("app.log", "rooted.txt:", "build/out.py", "sub/deep/t.tmp", ".hidden.py", ".hdir", "bin/", "link"):
        assert not any(line.startswith(absent) for line in found), absent
    assert answer.matches == len(found)
    assert answer.files == len(dict.fromkeys(paths))
    assert answer.absolute == str(root)


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_glob_is_an_override_of_the_rules(tmp_path: Path, engine: Engine) -> None:
    root = tricky_tree(tmp_path / "t")
    context = local(root, Off())

    def paths(glob: str | None) -> list[str]:
        answer = grep(context, GrepArgs(pattern="x", glob=glob), engine=engine)
        return list(dict.fromkeys(line.split(":", 1)[0] for line in lines(answer)))

    # A file the glob names is searched even when hidden or ignored (if its directory is entered: .hdir is not).
    assert paths("*.py") == [".hidden.py", "a/b.py", "a.py", "sub/deep/t.py", "sub/keep.py", "sub/skip.py"]
    assert paths("*.log") == ["app.log", "keep.log", "sub/again.log"]
    assert paths("!*.py") == [p for p in paths(None) if not p.endswith(".py")]
    assert paths("sub/*.py") == ["sub/keep.py", "sub/skip.py"]
    assert paths("sub") == []  # a glob matches the path itself, not the files below a directory it names
    # A directory the glob names is entered even when hidden or ignored; its files still need the glob.
    assert ".hdir/in.py" in paths("*") and "build/out.py" in paths("*") and ".hdir/in.py" not in paths(".h*")


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_in_one_file_ignores_the_walk_rules(tmp_path: Path, engine: Engine) -> None:
    root = tricky_tree(tmp_path / "t")
    context = local(root, Off())
    for name in ("app.log", ".hidden.py", "sub/skip.py"):
        answer = grep(context, GrepArgs(pattern="x", path=name, glob="*.md"), engine=engine)
        assert answer.matches == 1 and lines(answer)[0].startswith(os.path.basename(name) + ":1:")
        assert answer.absolute == str(root / name)
    binary = grep(context, GrepArgs(pattern="x", path="bin/late.dat"), engine=engine)
    assert (binary.matches, binary.output.text) == (0, "")


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_refusals(tmp_path: Path, engine: Engine) -> None:
    root = tricky_tree(tmp_path / "t")
    context = local(root)
    refused(lambda: grep(context, GrepArgs(pattern="(", path="."), engine=engine), Reason.INVALID_PATTERN)
    refused(lambda: grep(context, GrepArgs(pattern="\ud800"), engine=engine), Reason.INVALID_PATTERN)
    refused(lambda: grep(context, GrepArgs(pattern="x", glob="a\0"), engine=engine), Reason.INVALID_PATTERN)
    refused(lambda: grep(context, GrepArgs(pattern="x", glob="{a,{b}}"), engine=engine), Reason.INVALID_PATTERN)
    refused(lambda: grep(context, GrepArgs(pattern="x", path="nope"), engine=engine), Reason.NOT_FOUND)
    refused(lambda: grep(context, GrepArgs(pattern="x", path="fifo"), engine=engine), Reason.NOT_A_FILE)
    refused(lambda: grep(context, GrepArgs(pattern="x", path="a.py/x"), engine=engine), Reason.NOT_A_DIRECTORY)


@pytest.mark.parametrize("engine", ENGINES)
def test_grep_answer_is_bounded_with_the_notice_and_the_artifact(tmp_path: Path, engine: Engine) -> None:
    root = make_tree(tmp_path / "t", {"big.txt": "".join(f"match {n}\n" for n in range(20_000))})
    answer = grep(
        local(root, small_limits(1000, 10), tmp_path / "artifacts"),
        GrepArgs(pattern="match"),
        engine=engine,
    )
    assert answer.matches == 20_000 and answer.files == 1
    assert lines(answer) == [f"big.txt:{n + 1}:match {n}" for n in range(10)]  # the head
    assert answer.output.lines_kept == 10 and answer.output.lines_dropped == 19_990
    assert (
        answer.output.artifact is not None
        and answer.output.notice is not None
        and answer.output.artifact in answer.output.notice
    )
    full = Path(answer.output.artifact).read_text().splitlines()
    assert len(full) == 20_000 and full[-1] == "big.txt:20000:match 19999"


# --- the two engines give the same answers -------------------------------------------------------------------------

CASES = [
    ("x", ".", None),
    ("^x$", ".", None),
    ("x", "sub", None),
    ("x", "a.py", None),
    ("é", ".", None),
    (r"\bx\b", ".", "*.txt"),
    ("x", ".", "!*.py"),
    ("x", ".", "**/deep/*"),
    ("(?i)X", ".", "*.md"),
    ("", ".", "*.py"),
    ("x.*x", "a", None),
    ("caf", ".", None),
    ("x", ".", "{a,b}.py"),
    ("x", ".", "*.{py,md}"),
    ("x", ".", "/a.py"),
]


@needs_rg
@pytest.mark.parametrize(("pattern", "path", "glob"), CASES)
def test_grep_engines_give_the_same_answers(tmp_path: Path, pattern: str, path: str, glob: str | None) -> None:
    root = tricky_tree(tmp_path / "t")
    args = GrepArgs(pattern=pattern, path=path, glob=glob)
    assert grep(local(root, Off()), args, engine="rg") == grep(local(root, Off()), args, engine="python")


NAMES = ["a", "b", ".h", "a.py", "b.log", "z.txt", "é", "A"]
IGNORES = [
    "*.log", "!b.log", "*.py", "/a", "a/", "b/*", ".h", "!.h", "**/z.txt", "#c", "z*", "!z.txt", "é", "a/**",
    "**/a", "!a", "a/b", "z.txt  ", "[ab]", "?.py", "a/**/z.txt", "*", "!*/", "b/", "A", "{a,b}", "*.{py,log}",
    "{a,{b}}", "!{z.txt,a.py}",
]  # fmt: skip
CONTENTS = [b"x\n", b"y\n", b"x\ny\nx", b"X\r\n", b"x\0\n", b"\xffx\n", b"", b"xx yy\n"]


@st.composite
def trees(draw: st.DrawFn) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for directory in ["", *draw(st.lists(st.sampled_from(["a", "b", ".h", "a/b", "b/a", "é"]), max_size=3))]:
        for name in draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True)):
            path = f"{directory}/{name}" if directory else name
            if any(other.startswith(path + "/") or path.startswith(other + "/") for other in files):
                continue
            files[path] = draw(st.sampled_from(CONTENTS))
        if draw(st.booleans()):
            gitignore = f"{directory}/.gitignore" if directory else ".gitignore"
            if not any(other.startswith(gitignore + "/") or gitignore.startswith(other + "/") for other in files):
                files[gitignore] = "\n".join(draw(st.lists(st.sampled_from(IGNORES), max_size=4))).encode()
    return files


@needs_rg
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    trees(),
    st.sampled_from(["x", "^x", "y$", "."]),
    st.sampled_from([None, "*.py", "!*.log", "a/*", ".h", "**/a/*", "[ab]*", "?.py", "!a", "*", "{a,b}.py"]),
)
@example(files={".gitignore": b"[ab]\n!*/", "a/a": b"x\n"}, pattern="x", glob="a/*")  # `*/` re-includes a
def test_grep_engines_agree_on_generated_trees(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes], pattern: str, glob: str | None
) -> None:
    root = make_tree(tmp_path_factory.mktemp("gen"), files)
    args = GrepArgs(pattern=pattern, glob=glob)
    assert grep(local(root, Off()), args, engine="rg") == grep(local(root, Off()), args, engine="python")
