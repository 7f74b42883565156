"""The path map and the `outside` rule on real files (spec S3 "Where the sandbox runs" 3-5): request paths
mapped to the host, reply paths mapped back, symlink and `..` escapes refused on the host disk, typed OS errors."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eukhe.core import pathmap
from eukhe.core.bound import Off
from eukhe.fs import (
    EditArgs,
    EditChange,
    FsContext,
    FsError,
    GlobArgs,
    GrepArgs,
    ReadArgs,
    Reason,
    WriteArgs,
    edit,
    glob,
    grep,
    read,
    write,
)
from eukhe.fs.context import Locator, look
from eukhe.fs.grepping import Engine
from tests.real.fs_support import ENGINES, local, make_tree, refused, snapshot, wrapped

pytestmark = pytest.mark.real


def one_patch(*lines: str) -> EditArgs:
    return EditArgs(patch="\n".join(["*** Begin Patch", *lines, "*** End Patch"]))


# --- the named test ------------------------------------------------------------------------------------------------


def escape_world(tmp_path: Path) -> tuple[Path, Path]:
    """A mount (host dir `work`, sandbox /work) and a directory outside every mount with a secret, and symlinks in
    the mount that lead out: absolute, relative, nested, and one whose `..` lands outside."""
    work = make_tree(tmp_path / "work", {"inside.txt": "fine\n", "sub/deep/f.txt": "deep\n"})
    outside = make_tree(tmp_path / "outside", {"secret.txt": "secret\n", "dir/x.txt": "x\n", "sibling.txt": "s\n"})
    (work / "out").symlink_to(outside)  # absolute target, out of every mount
    (work / "rel_out").symlink_to("../outside")  # relative target, out of every mount
    (work / "sub/deep/link").symlink_to(outside / "dir")  # deeper in the mount
    (work / "secret_file").symlink_to(outside / "secret.txt")  # a file symlink
    (work / "dangling").symlink_to(outside / "not-yet.txt")  # a write through it would create a file outside
    return work, outside


ESCAPES = [
    "out/secret.txt",  # through a symlink to a directory outside
    "/work/out/secret.txt",
    "rel_out/secret.txt",
    "secret_file",  # a symlink to a file outside
    "dangling",  # a symlink to a missing file outside
    "sub/deep/link/x.txt",
    "out/..",  # `..` after the symlink: the parent of its target, outside
    "out/../sibling.txt",
    "sub/deep/link/../secret.txt",
    "sub/deep/link/../../outside/secret.txt",
    "../outside/secret.txt",  # a plain `..` out of the mount
    "/work/../outside/secret.txt",
    "~/secret.txt",  # the sandbox home
    "/etc/passwd",  # no mount holds it
]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("engine", ENGINES)
def test_fs_requests_reject_a_symlink_in_a_mount_that_points_out_of_every_mount(
    tmp_path: Path, path: str, engine: Engine
) -> None:
    work, _ = escape_world(tmp_path)
    context = wrapped(work, {"/work": work}, sandbox_cwd="/work")
    before = snapshot(tmp_path)
    calls: dict[str, Callable[[], object]] = {
        "read": lambda: read(context, ReadArgs(path=path)),
        "write": lambda: write(context, WriteArgs(path=path, content="pwned\n")),
        "edit add": lambda: edit(context, one_patch(f"*** Add File: {path}", "+pwned")),
        "edit update": lambda: edit(context, one_patch(f"*** Update File: {path}", "-secret", "+pwned")),
        "edit delete": lambda: edit(context, one_patch(f"*** Delete File: {path}")),
        "edit move to": lambda: edit(
            context, one_patch("*** Update File: inside.txt", f"*** Move to: {path}", "-fine", "+pwned")
        ),
        "grep": lambda: grep(context, GrepArgs(pattern="secret", path=path), engine=engine),
        "glob": lambda: glob(context, GlobArgs(pattern="**", path=path)),
    }
    for name, call in calls.items():
        error = refused(call, Reason.OUTSIDE)
        assert error.path == path, name
        assert str(work) not in error.message, (name, error.message)  # the mount's host dir stays unseen
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_fs_walks_do_not_follow_symlinks_out_of_the_mount(tmp_path: Path, engine: Engine) -> None:
    work, _ = escape_world(tmp_path)
    context = wrapped(work, {"/work": work}, sandbox_cwd="/work", truncation=Off())
    assert glob(context, GlobArgs(pattern="**")).output.text == "inside.txt\nsub/deep/f.txt\n"
    assert grep(context, GrepArgs(pattern="secret|x|s"), engine=engine).matches == 0


# --- request paths in, reply paths out -----------------------------------------------------------------------------


def two_mounts(tmp_path: Path) -> tuple[FsContext, Path, Path]:
    """/work -> project, /work/data -> a data dir elsewhere, /cache -> a third dir; the kernel sits in /work/src."""
    project = make_tree(tmp_path / "home/me/project", {"src/app.py": "print('hi')\n", "README": "readme\n"})
    data = make_tree(tmp_path / "srv/data", {"set.csv": "a,b\n1,2\n"})
    cache = make_tree(tmp_path / "var/cache", {"c.bin": "cached\n"})
    (project / "src/data_link").symlink_to(data)  # a link from one mount into another
    context = wrapped(project, {"/work": project, "/work/data": data, "/cache": cache}, sandbox_cwd="/work/src")
    return context, project, data


def test_fs_request_paths_map_to_the_host_and_reply_paths_back(tmp_path: Path) -> None:
    context, project, data = two_mounts(tmp_path)
    assert read(context, ReadArgs(path="app.py")).absolute == "/work/src/app.py"
    assert read(context, ReadArgs(path="../README")).output.text == "readme\n"
    assert read(context, ReadArgs(path="/work/data/set.csv")).absolute == "/work/data/set.csv"
    assert read(context, ReadArgs(path="data_link/set.csv")).absolute == "/work/data/set.csv"  # mapped back
    assert read(context, ReadArgs(path="/cache/c.bin")).output.text == "cached\n"
    written = write(context, WriteArgs(path="../data/new.csv", content="n\n"))
    assert written.absolute == "/work/data/new.csv" and (data / "new.csv").read_text() == "n\n"
    assert not (project / "data").exists()  # the deeper mount wins: nothing in the project's own data dir
    assert grep(context, GrepArgs(pattern="hi")).absolute == "/work/src"
    assert glob(context, GlobArgs(pattern="*.csv", path="/work/data")).output.text == "new.csv\nset.csv\n"


def test_fs_patch_header_paths_and_move_rows_map_both_ways(tmp_path: Path) -> None:
    context, project, data = two_mounts(tmp_path)
    answer = edit(
        context,
        one_patch(
            "*** Update File: app.py",
            "*** Move to: /work/data/app.py",
            "-print('hi')",
            "+print('moved')",
            "*** Add File: ../docs/new.md",
            "+new",
            "*** Update File: data_link/set.csv",
            " a,b",
            "+3,4",
            "*** Delete File: /cache/c.bin",
        ),
    )
    assert answer.changes == (
        EditChange(action="moved", path="/work/src/app.py", destination="/work/data/app.py"),
        EditChange(action="added", path="/work/docs/new.md"),
        EditChange(action="updated", path="/work/data/set.csv"),
        EditChange(action="deleted", path="/cache/c.bin"),
    )
    assert (data / "app.py").read_text() == "print('moved')\n" and not (project / "src/app.py").exists()
    assert (project / "docs/new.md").read_text() == "new\n"
    assert (data / "set.csv").read_text() == "a,b\n3,4\n1,2\n"
    assert not (tmp_path / "var/cache/c.bin").exists()


def test_fs_cwd_is_checked_like_any_path(tmp_path: Path) -> None:
    work, outside = escape_world(tmp_path)
    args = ReadArgs(path="inside.txt")
    for cwd in ("/elsewhere", "/work/out", "/work/rel_out", "/work/.."):
        refused(partial(read, wrapped(work, {"/work": work}, sandbox_cwd=cwd), args), Reason.OUTSIDE)
    refused(lambda: read(wrapped(work, {"/work": work}, sandbox_cwd="work"), args), Reason.BAD_REQUEST)
    refused(lambda: read(wrapped(work, {"/work": work}, sandbox_cwd="/work/gone"), args), Reason.NOT_FOUND)
    refused(lambda: read(wrapped(work, {"/work": work}, sandbox_cwd="/work/inside.txt"), args), Reason.NOT_A_DIRECTORY)
    refused(lambda: read(wrapped(outside, {"/work": work}), args), Reason.OUTSIDE)  # the host cwd maps to no mount
    assert read(wrapped(work / "sub", {"/work": work}), ReadArgs(path="deep/f.txt")).absolute == "/work/sub/deep/f.txt"


def test_fs_local_transport_allows_every_host_path(tmp_path: Path) -> None:
    work, outside = escape_world(tmp_path)
    context = local(work)
    assert read(context, ReadArgs(path="out/secret.txt")).absolute == str(outside / "secret.txt")
    assert read(context, ReadArgs(path="out/../outside/sibling.txt")).absolute == str(outside / "sibling.txt")
    assert read(context, ReadArgs(path=str(outside / "dir/x.txt"))).output.text == "x\n"
    home = make_tree(tmp_path / "home", {"notes.txt": "mine\n"})
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        assert read(context, ReadArgs(path="~/notes.txt")).absolute == str(home / "notes.txt")
    finally:
        if old is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old


# --- the walk agrees with the OS -----------------------------------------------------------------------------------


@st.composite
def link_trees(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """Entries (kind, relative path, link target) for a small real tree with symlinks, parents first."""
    entries: list[tuple[str, str, str]] = []
    dirs = [""]
    for _ in range(draw(st.integers(1, 8))):
        parent = draw(st.sampled_from(dirs))
        name = draw(st.sampled_from(["a", "b", "c", "l", "m"]))
        path = f"{parent}/{name}" if parent else name
        if any(existing == path for _, existing, _ in entries):
            continue
        kind = draw(st.sampled_from(["dir", "file", "link"]))
        target = draw(st.sampled_from(["a", "b/c", "..", "../a", "l", "/ROOT/a", "/ROOT/b/../c", "m/x"]))
        entries.append((kind, path, target))
        if kind == "dir":
            dirs.append(path)
    return entries


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(link_trees(), st.lists(st.sampled_from(["a", "b", "c", "l", "m", "..", "x"]), min_size=1, max_size=5))
def test_fs_local_walk_agrees_with_realpath(
    tmp_path: Path, entries: list[tuple[str, str, str]], names: list[str]
) -> None:
    """Under Local (the identity map) the walk resolves a path as os.path.realpath does (symlinks followed in the
    part that exists, the rest read lexically), or refuses a loop or a file in the middle, which the OS refuses."""
    root = Path(tempfile.mkdtemp(dir=os.path.realpath(tmp_path)))
    for kind, path, target in entries:
        full = root / path
        if not full.parent.is_dir() or os.path.lexists(full):
            continue
        if kind == "dir":
            full.mkdir()
        elif kind == "file":
            full.write_text("x")
        else:
            full.symlink_to(target.replace("/ROOT", str(root)))
    path = str(root / "/".join(names))
    walked = pathmap.resolve(pathmap.PathMap.identity(), path, "/", look)
    if isinstance(walked, pathmap.Refused):
        assert walked.reason in (pathmap.Reason.LOOP, pathmap.Reason.NOT_A_DIRECTORY)
        with pytest.raises(OSError):
            os.stat(path)  # the OS cannot resolve it either
        return
    real = os.path.realpath(path)
    assert walked.host == walked.sandbox == real
    try:
        there = look(real)
    except OSError:
        return
    assert walked.kind == there


# --- OS errors are typed -------------------------------------------------------------------------------------------


def test_fs_os_errors_on_paths_are_typed_and_name_the_path(tmp_path: Path) -> None:
    make_tree(tmp_path, {"f": "x\n"})
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    context = local(tmp_path)
    long_name = "n" * 300
    cases = [
        (long_name, Reason.NAME_TOO_LONG),
        ("/".join(["d" * 200] * 25), Reason.NOT_FOUND),  # long but each name fits: simply missing
        ("loop1", Reason.SYMLINK_LOOP),
        ("loop1/x", Reason.SYMLINK_LOOP),
        ("a\0b", Reason.INVALID_PATH),
        ("lone\ud800surrogate", Reason.INVALID_PATH),
        ("", Reason.INVALID_PATH),
    ]
    for path, reason in cases:
        error = refused(partial(read, context, ReadArgs(path=path)), reason)
        assert error.path == path
    refused(lambda: write(context, WriteArgs(path=long_name, content="")), Reason.NAME_TOO_LONG)
    refused(lambda: write(context, WriteArgs(path="/".join(["d" * 250] * 20), content="")), Reason.NAME_TOO_LONG)
    refused(lambda: glob(context, GlobArgs(pattern="*", path="loop1")), Reason.SYMLINK_LOOP)
    refused(
        lambda: edit(context, EditArgs(patch=f"*** Begin Patch\n*** Delete File: {long_name}\n*** End Patch")),
        Reason.NAME_TOO_LONG,
    )


def unused_uid() -> int:
    uid = 54321
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def test_fs_permission_denied_is_typed() -> None:
    """A file the user may not read, and a directory it may not enter: `permission_denied`, naming the path. As root
    (which may read anything), the reads run in a child that drops to an unused uid."""
    root = Path(tempfile.mkdtemp(prefix="fs-perm-", dir="/tmp"))
    try:
        root.chmod(0o755)
        make_tree(root, {"private.txt": "no\n", "closed/inner.txt": "no\n"})
        (root / "private.txt").chmod(0o600)
        (root / "closed").chmod(0o700)
        said = run_as_another_user(root)
    finally:
        shutil.rmtree(root)
    assert said == "private.txt:permission_denied,closed/inner.txt:permission_denied"


def run_as_another_user(root: Path) -> str:
    """Read two paths in a forked child running as an unused uid (as root) or as the user whose files they are not."""
    if os.getuid() != 0:
        pytest.skip("needs root to read as another user")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 1
        try:
            os.close(read_fd)
            uid = unused_uid()
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            found = []
            for path in ("private.txt", "closed/inner.txt"):
                try:
                    read(local(root), ReadArgs(path=path))
                    found.append(f"{path}:read")
                except FsError as error:
                    found.append(f"{error.path}:{error.reason.value}")
            os.write(write_fd, ",".join(found).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        said = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said
    return said


def test_the_locator_checks_the_cwd_once(tmp_path: Path) -> None:
    locator = Locator(local(tmp_path))
    assert locator.cwd == os.path.realpath(tmp_path)
    refused(lambda: Locator(local(tmp_path / "gone")), Reason.NOT_FOUND)
