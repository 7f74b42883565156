"""Laws of eukhe.core.pathmap (spec S3 "Where the sandbox runs"): the round trip, the deepest mount, the
`outside` refusal, and a walk on a (model) host disk that never leaves the chosen mount's host dir."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.pathmap import (
    Entry,
    Kind,
    Link,
    Mount,
    Outside,
    PathMap,
    Reason,
    Refused,
    Resolved,
    is_within,
    normalize,
    rebase,
    resolve,
    split,
)

NAMES = ("a", "ab")  # "ab" shares a prefix with "a": /ab is not below /a


def small_dirs(depth: int = 2) -> list[str]:
    """Every absolute path of up to `depth` names over NAMES."""
    return ["/" + "/".join(names) for n in range(depth + 1) for names in itertools.product(NAMES, repeat=n)]


DIRS = small_dirs()
HOSTS = ["/h", "/h/a", "/ha", "/"]


def small_maps() -> Iterator[PathMap]:
    """Every map of one or two mounts over the small dirs and hosts (sandbox dirs distinct)."""
    for sandbox in DIRS:
        for host in HOSTS:
            yield PathMap((Mount(sandbox, host),))
    for (s1, s2), (h1, h2) in itertools.product(itertools.combinations(DIRS, 2), itertools.product(HOSTS, HOSTS)):
        yield PathMap((Mount(s1, h1), Mount(s2, h2)))


def request_paths() -> Iterator[str]:
    """Relative and absolute request paths with `.` and `..` components, over the small names."""
    words = ["a", "ab", "..", "."]
    for n in range(4):
        for combo in itertools.product(words, repeat=n):
            yield "/".join(combo) or "."
            yield "/" + "/".join(combo)


REQUESTS = list(request_paths())

names_st = st.sampled_from(["a", "ab", "b", "..", ".", ""])
abs_paths_st = st.lists(names_st, max_size=5).map(lambda parts: "/" + "/".join(parts))
rel_paths_st = st.lists(names_st, min_size=1, max_size=5).map("/".join).filter(bool)
mounts_st = st.lists(
    st.builds(Mount, abs_paths_st, abs_paths_st), min_size=1, max_size=4, unique_by=lambda m: normalize(m.sandbox)
).map(lambda mounts: PathMap(tuple(mounts)))


def chosen(path_map: PathMap, sandbox_path: str) -> Mount | None:
    """The deepest holding mount, read independently: the longest sandbox dir among those holding the path."""
    holding = [m for m in path_map.mounts if m.sandbox == "/" or (sandbox_path + "/").startswith(m.sandbox + "/")]
    return max(holding, key=lambda m: len(split(m.sandbox)), default=None)


# --- round trip ---------------------------------------------------------------------------------------------------


def check_round_trip(path_map: PathMap, path: str) -> None:
    back = path_map.sandbox_of(path)
    if not isinstance(back, Outside):
        assert path_map.host_of(back) == normalize(path)  # host_of . sandbox_of = id on mapped paths
    host = path_map.host_of(path)
    if not isinstance(host, Outside):
        again = path_map.sandbox_of(host)
        assert not isinstance(again, Outside)  # every host path a sandbox path maps to maps back
        assert path_map.host_of(again) == host


def test_pathmap_round_trip_small_scope() -> None:
    for path_map in small_maps():
        for path in DIRS + HOSTS:
            check_round_trip(path_map, path)


@given(mounts_st, abs_paths_st)
def test_pathmap_round_trip(path_map: PathMap, path: str) -> None:
    check_round_trip(path_map, path)


# --- the deepest mount wins ---------------------------------------------------------------------------------------


def check_deepest_wins(path_map: PathMap, path: str) -> None:
    mount = chosen(path_map, normalize(path))
    host = path_map.host_of(path)
    if mount is None:
        assert isinstance(host, Outside)
        return
    rest = normalize(path)[len(mount.sandbox) :].strip("/") if mount.sandbox != "/" else normalize(path).strip("/")
    assert host == normalize(mount.host + "/" + rest)


def test_pathmap_deepest_mount_wins_small_scope() -> None:
    for path_map in small_maps():
        for path in DIRS:
            check_deepest_wins(path_map, path)


@given(mounts_st, abs_paths_st)
def test_pathmap_deepest_mount_wins(path_map: PathMap, path: str) -> None:
    check_deepest_wins(path_map, path)


def test_pathmap_deepest_mount_wins_example() -> None:
    path_map = PathMap((Mount("/work", "/home/me/project"), Mount("/work/data", "/srv/data")))
    assert path_map.host_of("/work/src/x.py") == "/home/me/project/src/x.py"
    assert path_map.host_of("/work/data/set.csv") == "/srv/data/set.csv"
    assert path_map.host_of("/work/database") == "/home/me/project/database"
    assert path_map.sandbox_of("/srv/data/set.csv") == "/work/data/set.csv"
    assert path_map.sandbox_of("/home/me/project/src") == "/work/src"
    # The sandbox shows /work/data from /srv/data, so the project's own data dir is hidden there.
    assert isinstance(path_map.sandbox_of("/home/me/project/data/x"), Outside)


# --- outside is refused -------------------------------------------------------------------------------------------


@given(mounts_st, st.sampled_from(["~", "~/", "~/x", "~/a/../b"]), abs_paths_st)
def test_pathmap_outside_is_refused_for_the_sandbox_home(path_map: PathMap, path: str, cwd: str) -> None:
    assert isinstance(path_map.to_host(path, cwd), Outside)
    assert resolve(path_map, path, cwd, lambda _host: Kind.DIR) == Refused(
        Reason.OUTSIDE, f"{path} names the sandbox home, which no mount holds"
    )


@given(mounts_st, abs_paths_st, st.one_of(abs_paths_st, rel_paths_st))
def test_pathmap_outside_is_refused(path_map: PathMap, cwd: str, path: str) -> None:
    absolute = path_map.absolute(path, cwd)
    assert not isinstance(absolute, Outside)
    held = chosen(path_map, absolute) is not None
    assert isinstance(path_map.to_host(path, cwd), Outside) == (not held)
    walked = resolve(path_map, path, cwd, lambda _host: Kind.DIR)
    assert isinstance(walked, Resolved) == held
    if not held:
        assert isinstance(walked, Refused) and walked.reason is Reason.OUTSIDE


def test_pathmap_names_like_tilde_x_are_plain_names() -> None:
    path_map = PathMap((Mount("/work", "/h"),))
    assert path_map.to_host("~x", "/work") == "/h/~x"
    assert path_map.to_host("a/~/b", "/work") == "/h/a/~/b"


# --- never maps into a path outside the chosen mount's host dir ---------------------------------------------------


def check_within_chosen(path_map: PathMap, path: str, cwd: str) -> None:
    absolute = path_map.absolute(path, cwd)
    assert not isinstance(absolute, Outside)
    host = path_map.to_host(path, cwd)
    mount = chosen(path_map, absolute)
    if mount is None:
        assert isinstance(host, Outside)
    else:
        assert isinstance(host, str) and host == normalize(host) and is_within(host, mount.host)


def test_pathmap_never_maps_outside_the_chosen_mount_small_scope() -> None:
    for path_map in itertools.islice(small_maps(), 0, None, 7):
        for cwd in DIRS:
            for path in REQUESTS:
                check_within_chosen(path_map, path, cwd)


@given(mounts_st, abs_paths_st, st.one_of(abs_paths_st, rel_paths_st))
def test_pathmap_never_maps_outside_the_chosen_mount(path_map: PathMap, cwd: str, path: str) -> None:
    check_within_chosen(path_map, path, cwd)


# --- the walk on a model host disk --------------------------------------------------------------------------------

TARGETS = ["a", "b", "l", "..", "../..", "../x", "a/..", "b/l", "/h", "/h/a", "/x", "/x/a", "/etc", "/h/../etc", "/"]
WALK_NAMES = ("a", "b", "l")


@st.composite
def host_trees(draw: st.DrawFn) -> dict[str, Entry]:
    """A model host disk below /h and /x: directories, files and symlinks (to TARGETS), up to depth 3.

    /h and /x (the mounts' host dirs) are directories; everything else is drawn, parents before children.
    """
    tree: dict[str, Entry] = {"/": Kind.DIR, "/h": Kind.DIR, "/x": Kind.DIR, "/etc": Kind.DIR}
    frontier = ["/h", "/x"]
    for _ in range(3):
        deeper = []
        for parent in frontier:
            for name in WALK_NAMES:
                kind = draw(st.sampled_from(["none", "dir", "file", "link"]))
                path = f"{parent}/{name}"
                if kind == "dir":
                    tree[path] = Kind.DIR
                    deeper.append(path)
                elif kind == "file":
                    tree[path] = Kind.FILE
                elif kind == "link":
                    tree[path] = Link(draw(st.sampled_from(TARGETS)))
        frontier = deeper
    return tree


WALK_MAPS = [
    PathMap((Mount("/work", "/h"),)),
    PathMap((Mount("/work", "/h"), Mount("/work/b", "/x"))),
    PathMap((Mount("/work", "/h/a"), Mount("/data", "/x"))),
]
walk_paths_st = st.lists(st.sampled_from(["a", "b", "l", "..", "."]), min_size=1, max_size=5).map("/".join)
walk_cwds_st = st.sampled_from(["/work", "/work/a", "/work/b", "/data", "/"])


def host_kind(tree: Mapping[str, Entry], host: str) -> Entry:
    """What the model disk has at a host path; the directories above its entries exist (as on a real disk)."""
    if host in tree:
        return tree[host]
    if host == "/" or any(key.startswith(host + "/") for key in tree):
        return Kind.DIR
    return Kind.MISSING


def check_walk(path_map: PathMap, tree: Mapping[str, Entry], path: str, cwd: str) -> Resolved | Refused:
    looked: list[str] = []

    def look(host: str) -> Entry:
        looked.append(host)
        return host_kind(tree, host)

    walked = resolve(path_map, path, cwd, look)
    if isinstance(walked, Refused):
        return walked
    mount = path_map.mount_for_sandbox(walked.sandbox)
    assert mount is not None
    assert walked.host == path_map.host_of(walked.sandbox)
    assert is_within(walked.host, mount.host)  # never leaves the chosen mount's host dir
    # Symlink-free: every existing component below the mount's host dir is a directory, the last one what it says.
    names = split(walked.host[len(mount.host) :])
    prefix = mount.host
    for index, name in enumerate(names):
        prefix = prefix.rstrip("/") + "/" + name
        entry = host_kind(tree, prefix)
        assert not isinstance(entry, Link), f"{prefix} is a symlink in a resolved path"
        if entry is Kind.MISSING:
            assert walked.kind is Kind.MISSING
            break
        if index < len(names) - 1:
            assert entry is Kind.DIR
        else:
            assert entry is walked.kind
    return walked


@given(host_trees(), st.sampled_from(WALK_MAPS), walk_paths_st, walk_cwds_st)
def test_pathmap_walk_never_leaves_the_chosen_mount_and_holds_no_symlink(
    tree: dict[str, Entry], path_map: PathMap, path: str, cwd: str
) -> None:
    check_walk(path_map, tree, path, cwd)


@given(host_trees(), st.sampled_from(WALK_MAPS), walk_paths_st, walk_cwds_st)
def test_pathmap_walk_without_symlinks_is_the_lexical_map(
    tree: dict[str, Entry], path_map: PathMap, path: str, cwd: str
) -> None:
    plain = {host: (Kind.DIR if isinstance(entry, Link) else entry) for host, entry in tree.items()}
    plain = {host: entry for host, entry in plain.items() if not any(plain.get(p) is Kind.FILE for p in parents(host))}
    walked = check_walk(path_map, plain, path, cwd)
    lexical = path_map.to_host(path, cwd)
    if isinstance(walked, Resolved):
        assert walked.host == lexical
    elif walked.reason is Reason.OUTSIDE:
        assert isinstance(lexical, Outside)
    else:
        assert walked.reason is Reason.NOT_A_DIRECTORY


def parents(path: str) -> Iterator[str]:
    parts = split(path)
    for n in range(1, len(parts)):
        yield "/" + "/".join(parts[:n])


@pytest.mark.parametrize("path", ["l", "l/x", "l/..", "l/../x", "a/l2/../../l", "./l/"])
def test_pathmap_walk_refuses_a_symlink_out_of_every_mount(path: str) -> None:
    tree: dict[str, Entry] = {
        "/h": Kind.DIR,
        "/h/l": Link("/etc"),
        "/h/a": Kind.DIR,
        "/h/a/l2": Link("../../outside/deep"),
    }
    walked = resolve(PathMap((Mount("/work", "/h"),)), path, "/work", lambda host: host_kind(tree, host))
    assert isinstance(walked, Refused) and walked.reason is Reason.OUTSIDE


def test_pathmap_walk_follows_links_between_mounts_and_reports_sandbox_paths() -> None:
    path_map = PathMap((Mount("/work", "/home/me/p"), Mount("/data", "/srv/d")))
    tree: dict[str, Entry] = {
        "/home/me/p": Kind.DIR,
        "/home/me/p/d": Link("/srv/d/sets"),
        "/home/me/p/rel": Link("src/../d"),
        "/home/me/p/src": Kind.DIR,
        "/srv/d": Kind.DIR,
        "/srv/d/sets": Kind.DIR,
        "/srv/d/sets/x.csv": Kind.FILE,
        "/home/me/p/loop": Link("loop"),
    }

    def look(host: str) -> Entry:
        return host_kind(tree, host)

    assert resolve(path_map, "d/x.csv", "/work", look) == Resolved("/data/sets/x.csv", "/srv/d/sets/x.csv", Kind.FILE)
    assert resolve(path_map, "rel/x.csv", "/work", look) == Resolved("/data/sets/x.csv", "/srv/d/sets/x.csv", Kind.FILE)
    assert resolve(path_map, "d/..", "/work", look) == Resolved("/data", "/srv/d", Kind.DIR)
    assert resolve(path_map, "src/new/../y", "/work", look) == Resolved("/work/src/y", "/home/me/p/src/y", Kind.MISSING)
    assert resolve(path_map, "loop", "/work", look) == Refused(Reason.LOOP, "more than 40 symlinks resolving loop")
    assert isinstance(resolve(path_map, "d/x.csv/..", "/work", look), Refused)
    assert resolve(path_map, "a\0b", "/work", look) == Refused(
        Reason.INVALID, "'a\\x00b': a path must be non-empty and hold no NUL byte"
    )


def test_pathmap_identity_holds_every_path() -> None:
    identity = PathMap.identity()
    for path in DIRS + HOSTS:
        assert identity.host_of(path) == normalize(path) == identity.sandbox_of(path)
    assert rebase("/a/b", "/a", "/") == "/b"
