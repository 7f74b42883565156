"""Laws of the sandbox policy (eukhe.core.sandbox): the scope rule, the layers' order, and that the file tools'
verdict is what the mount plan does, over free policies and paths, and exhaustively where the domain is small."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import sandbox as core
from eukhe.core.pathmap import is_within, normalize, split

MODES = list(core.Mode)
NETWORKS = list(core.Network)
NAMES = ["a", "b", ".git", "hooks", "config", "commondir", ".eukhe", ".agents", ".claude", "tmp", "c"]
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


def test_sandbox_tighten_never_loosens_small_scope() -> None:
    """Every user mode x network x every project mode, network (or none): the result is at least as strict as the
    user's, and is the user's whole policy whenever anything was refused."""
    for mode, network in itertools.product(MODES, NETWORKS):
        user = core.Policy(mode, network)
        for p_mode, p_network in itertools.product([None, *MODES], [None, *NETWORKS]):
            got = core.tighten(user, core.ProjectPolicy(p_mode, p_network))
            assert core.STRICTNESS[got.policy.mode] >= core.STRICTNESS[mode]
            assert core.NETWORK_STRICTNESS[got.policy.network] >= core.NETWORK_STRICTNESS[network]
            if got.refused:
                assert got.policy == user
            loosens = (p_mode is not None and core.STRICTNESS[p_mode] < core.STRICTNESS[mode]) or (
                p_network is not None and core.NETWORK_STRICTNESS[p_network] < core.NETWORK_STRICTNESS[network]
            )
            assert bool(got.refused) == loosens


@given(st.lists(st.sampled_from(["~/.ssh", "~/.aws", "~/x", "/etc"]), max_size=4), st.booleans())
def test_sandbox_tighten_deny_read_only_grows(extra: list[str], roots: bool) -> None:
    user = core.Policy()
    project = core.ProjectPolicy(deny_read=(*user.deny_read, *extra), writable_roots=("/x",) if roots else None)
    got = core.tighten(user, project)
    assert set(user.deny_read) <= set(got.policy.deny_read)
    assert any(r.key == "sandbox.writable_roots" for r in got.refused) is roots
    dropped = core.tighten(user, core.ProjectPolicy(deny_read=user.deny_read[1:]))
    assert [r.key for r in dropped.refused] == ["sandbox.deny_read"]
    assert dropped.policy == user


@given(
    st.lists(st.sampled_from(["A", "B", "C"]), max_size=3, unique=True),
    st.none() | st.lists(st.sampled_from(["A", "B", "C", "D"]), max_size=4, unique=True),
)
def test_sandbox_tighten_env_passthrough_only_narrows(user_names: list[str], project_names: list[str] | None) -> None:
    """A project may leave names out of the user's `env_passthrough`, never add one: an added name is refused by
    key, and then the user's policy holds whole."""
    user = core.Policy(env_passthrough=tuple(user_names))
    got = core.tighten(
        user, core.ProjectPolicy(env_passthrough=None if project_names is None else tuple(project_names))
    )
    assert set(got.policy.env_passthrough) <= set(user_names)
    added = project_names is not None and not set(project_names) <= set(user_names)
    assert [r.key for r in got.refused] == (["sandbox.env_passthrough"] if added else [])
    if added:
        assert got.policy == user
    elif project_names is not None:
        assert got.policy.env_passthrough == tuple(project_names)
    else:
        assert got.policy == user


facts_strategy = st.builds(
    core.Facts,
    mode=st.sampled_from(MODES),
    network=st.sampled_from(NETWORKS),
    cwd=paths,
    tmp=st.just("/t/tmp"),
    writable=st.lists(paths, max_size=2).map(tuple),
    denied=st.lists(st.tuples(paths, st.booleans()), max_size=3).map(tuple),
    readable=st.lists(paths, max_size=2).map(tuple),
    protected=st.lists(st.tuples(paths, st.booleans()), max_size=2).map(tuple),
    own=st.lists(paths, max_size=1).map(tuple),
    caches=st.lists(st.builds(core.Cache, paths, st.one_of(st.none(), st.just("/p/cache"))), max_size=2).map(tuple),
    pinned=st.lists(paths, max_size=2).map(tuple),
    home=st.one_of(st.none(), paths, paths.map(lambda path: "/tmp" + path)),
)


@given(facts_strategy)
def test_sandbox_layers_shallow_first_and_deciding_is_the_deepest(facts: core.Facts) -> None:
    layers = core.layers(facts)
    assert layers[0] == core.Layer("/", core.Kind.READ)
    assert [layer for layer in layers if layer.path == "/tmp"] == [HIDDEN]  # the private /tmp, whatever is denied
    depths = [len([p for p in layer.path.split("/") if p]) for layer in layers]
    assert depths == sorted(depths)
    for index in range(1, len(layers)):  # no layer is redundant: each changes what holds it already does
        above = core.deciding(layers[:index], layers[index].path)
        assert core.EFFECT[above.kind] != core.EFFECT[layers[index].kind]


@given(facts_strategy, paths, st.sampled_from(list(core.Want)))
def test_sandbox_access_is_the_mount_plan(facts: core.Facts, path: str, want: core.Want) -> None:
    """The file tools' verdict matches what a confined process meets at that path: a denied layer denies both,
    a read elsewhere is allowed, a write only in a writable layer outside the protected names."""
    verdict = core.access(facts, path, want)
    if facts.mode is core.Mode.OFF:
        assert verdict == core.ALLOWED
        return
    layer = core.deciding(core.layers(facts), path)
    if layer.kind is core.Kind.DENY:
        assert isinstance(verdict, core.Denied)
        assert verdict.rule == ("private_tmp" if layer.path == "/tmp" else "deny_read")
    elif want is core.Want.READ:
        assert verdict == core.ALLOWED
    elif facts.mode is core.Mode.READ_ONLY or layer.kind not in (core.Kind.WRITE, core.Kind.PIN):
        assert isinstance(verdict, core.Denied)
        assert (verdict.rule == "cache") is (layer.kind is core.Kind.CACHE and facts.mode is not core.Mode.READ_ONLY)
    else:
        protected = any(
            tuple(parts[i : i + len(names)]) == names
            for parts in [[p for p in path[len(layer.path) :].split("/") if p]]
            for names in core.PROTECTED_NAMES
            for i in range(len(parts))
        )
        assert (verdict == core.ALLOWED) is not protected


@given(facts_strategy, st.one_of(st.just(""), paths))
def test_sandbox_read_only_reads_the_working_directory_as_workspace_write_does(facts: core.Facts, below: str) -> None:
    """read_only takes writes away, never reads: at and below the working directory (also one under the host's /tmp,
    or in one of eukhe's denied directories, as an isolated child's copy is), a read is allowed or refused alike."""
    base = dataclasses.replace(facts, writable=())
    path = normalize(base.cwd + below)
    read_only = core.access(dataclasses.replace(base, mode=core.Mode.READ_ONLY), path, core.Want.READ)
    workspace_write = core.access(dataclasses.replace(base, mode=core.Mode.WORKSPACE_WRITE), path, core.Want.READ)
    assert read_only == workspace_write


def triples(argv: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """Every run of three words in an argv (a flag and its two paths)."""
    return [(argv[i], argv[i + 1], argv[i + 2]) for i in range(len(argv) - 2)]


def test_sandbox_read_only_shows_a_working_directory_under_tmp_or_a_denied_one() -> None:
    for cwd, denied in (("/tmp/work", ()), ("/agent/workspaces/child/copy", (("/agent", True),))):
        facts = core.Facts(core.Mode.READ_ONLY, core.Network.ON, cwd=cwd, tmp="/t/tmp", denied=denied)
        assert core.access(facts, cwd + "/f", core.Want.READ) == core.ALLOWED
        assert isinstance(core.access(facts, cwd + "/f", core.Want.WRITE), core.Denied)
        argv = core.bwrap_argv(facts, ["true"])
        assert ("--ro-bind", cwd, cwd) in triples(argv)
        assert argv.index(cwd) > max(i for i, word in enumerate(argv) if word in ("--tmpfs", "--bind"))


def test_sandbox_own_directories_are_writable_in_every_confined_mode_small_scope() -> None:
    """eukhe's own directories a launch writes (the kernel's snapshot directory) are writable under read_only too,
    and are the only host paths that are; `off` mounts nothing."""
    for mode in (core.Mode.WORKSPACE_WRITE, core.Mode.READ_ONLY):
        facts = core.Facts(mode, core.Network.ON, cwd="/w", tmp="/t/tmp", denied=(("/agent", True),), own=("/agent/k",))
        roots = core.writable_roots(facts)
        assert "/agent/k" in roots
        assert (roots == ("/agent/k",)) is (mode is core.Mode.READ_ONLY)
        assert core.deciding(core.layers(facts), "/agent/k/snapshot").kind is core.Kind.WRITE
        argv = core.bwrap_argv(facts, ["true"])
        assert ("--bind", "/agent/k", "/agent/k") in triples(argv)
    off = core.Facts(core.Mode.OFF, core.Network.ON, cwd="/w", tmp="/t/tmp", own=("/agent/k",))
    assert core.writable_roots(off) == ()


@given(facts_strategy)
def test_sandbox_bwrap_argv_mounts_every_layer_once_and_masks_read_only_last(facts: core.Facts) -> None:
    argv = core.bwrap_argv(facts, ["true"], info_fd=7)
    assert argv[-2:] == ("--", "true")
    assert argv[:3] == ("--ro-bind", "/", "/")
    assert ("--unshare-net" in argv) is (facts.network is not core.Network.ON)
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session", "--info-fd"):
        assert flag in argv
    tmpfs = [argv[i + 1] for i, word in enumerate(argv) if word == "--tmpfs"]
    remounts = [argv[i + 1] for i, word in enumerate(argv) if word == "--remount-ro"]
    assert tmpfs == remounts
    last_mount = max(i for i, word in enumerate(argv) if word in ("--bind", "--ro-bind", "--tmpfs"))
    assert all(i > last_mount for i, word in enumerate(argv) if word == "--remount-ro")
    for layer in core.layers(facts):
        if layer.path not in ("/", "/tmp", facts.tmp) and not (
            layer.kind is core.Kind.WRITE and is_within(layer.path, "/t")
        ):
            assert layer.path in argv
    for layer in core.layers(facts):  # each cache copy-on-write: an overlay over the host's, or its private copy
        if layer.path in ("/tmp", facts.tmp):
            continue  # the sandbox's /tmp is the private one, whatever layer names that path
        if layer.kind is core.Kind.CACHE and layer.source is None:
            assert ("--overlay-src", layer.path, "--tmp-overlay", layer.path) in quads(argv)
        elif layer.kind is core.Kind.CACHE:
            assert ("--bind", layer.source, layer.path) in triples(argv)
        elif layer.kind is core.Kind.PIN:
            assert ("--bind", layer.path, layer.path) in triples(argv)


def quads(argv: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    return [(argv[i], argv[i + 1], argv[i + 2], argv[i + 3]) for i in range(len(argv) - 3)]


@given(facts_strategy)
def test_sandbox_a_pin_holds_only_where_a_confined_process_may_write(facts: core.Facts) -> None:
    """A pin keeps a git directory in place; it never opens what the plan keeps closed (a pin under a read-only,
    protected or masked layer is no mount at all), and caches exist only under workspace_write."""
    all_layers = core.layers(facts)
    for index, layer in enumerate(all_layers):
        if layer.kind is core.Kind.PIN:
            assert core.deciding(all_layers[:index], layer.path).kind in (core.Kind.WRITE, core.Kind.PIN)
        if layer.kind is core.Kind.CACHE:
            assert facts.mode is core.Mode.WORKSPACE_WRITE


HIDDEN = core.Layer("/tmp", core.Kind.DENY)


@given(
    facts_strategy,
    st.one_of(st.just(""), paths),
    st.lists(st.tuples(paths, st.booleans()), max_size=2),
    st.none() | st.tuples(st.integers(min_value=0, max_value=4), st.booleans()),
)
def test_sandbox_a_home_only_the_hosts_tmp_hides_is_readable_and_nothing_else_changes(
    facts: core.Facts, below: str, stores: list[tuple[str, bool]], up: tuple[int, bool] | None
) -> None:
    """Where a home lies in the host's /tmp and nothing but that /tmp holds it, it reads as the root does: readable,
    not writable, its deeper layers (caches, denied stores, a working directory in it) deciding for themselves. A
    path outside it, or a home anything else holds (a writable root, a denied path at it or above it, /tmp itself
    denied: a denial beats a grant), has the verdict it would have with no home at all. (`stores` are denied
    below the home, `up` denies the home or a directory above it, up to /tmp: free facts seldom hold either.)"""
    if facts.home is None or facts.mode is core.Mode.OFF:
        return
    home = facts.home
    extra = [(normalize(home + store), is_dir) for store, is_dir in stores]
    if up is not None:
        names = split(home)
        extra.append(("/" + "/".join(names[: max(len(names) - up[0], 1)]), up[1]))
    facts = dataclasses.replace(facts, denied=(*facts.denied, *extra))
    without = dataclasses.replace(facts, home=None)
    path = normalize(home + below)
    plain = core.layers(without)
    masks = [denied for denied, _ in facts.denied] + list(facts.sockets)
    denied_at = any(is_within(home, mask) for mask in masks)  # no layer in `plain`: the /tmp mask covers it
    shown = core.home_shown(home) and core.deciding(plain, home) == HIDDEN and not denied_at
    for want in core.Want:
        for probe in (
            path,
            *(normalize(home + store + below) for store, _ in stores),
            "/tmp/elsewhere" + below,
            "/a" + below,
        ):
            verdict, bare = core.access(facts, probe, want), core.access(without, probe, want)
            if shown and is_within(probe, home) and core.deciding(plain, probe) == HIDDEN:
                expected: core.Allowed | core.Denied = core.ALLOWED
                holding = sorted((mask for mask in masks if is_within(probe, mask)), key=len)
                if holding:  # a denied store in the home: the outermost one masks it
                    expected = core.Denied("deny_read", holding[0])
                elif want is core.Want.WRITE:
                    rule = "read_only" if facts.mode is core.Mode.READ_ONLY else "outside_writable_roots"
                    expected = core.Denied(rule, "/" if rule == "read_only" else probe)
                assert verdict == expected, (probe, want)
            else:
                assert verdict == bare, (probe, want)
    if shown:
        assert core.Layer(home, core.Kind.READ) in core.layers(facts)
    else:
        assert core.layers(facts) == plain


def test_sandbox_a_denial_at_or_above_a_home_under_tmp_keeps_it_masked_small_scope() -> None:
    """A home in the host's /tmp is shown unless a denial holds it (at the home, above it, or /tmp itself, as a
    directory or not): a denial beats that grant as any other; one below it masks only what it holds."""
    home = "/tmp/ci/home"
    for denied, is_dir in itertools.product([None, home, "/tmp/ci", "/tmp", home + "/.ssh"], [True, False]):
        facts = core.Facts(
            core.Mode.WORKSPACE_WRITE,
            core.Network.ON,
            cwd="/w",
            tmp="/t/tmp",
            denied=() if denied is None else ((denied, is_dir),),
            home=home,
        )
        all_layers = core.layers(facts)
        shown = denied in (None, home + "/.ssh")
        assert [layer for layer in all_layers if layer.path == "/tmp"] == [HIDDEN]
        assert (core.access(facts, home + "/.gitconfig", core.Want.READ) == core.ALLOWED) is shown
        assert isinstance(core.access(facts, home + "/.ssh/id", core.Want.READ), core.Denied) is (denied is not None)
        assert (("--ro-bind", home, home) in triples(core.bwrap_argv(facts, ["true"]))) is shown
        assert [layer.path for layer in core.tmp_mount_points(all_layers)] == ([home] if shown else [])


@given(facts_strategy)
def test_sandbox_tmp_mount_points_are_the_layers_the_private_tmp_holds(facts: core.Facts) -> None:
    """A layer needs a mount point made in the private /tmp exactly when the private /tmp is what it is mounted
    on: the host's /tmp mask is its holder."""
    all_layers = core.layers(facts)
    points = core.tmp_mount_points(all_layers)
    for index, layer in enumerate(all_layers):
        inside = layer.path != "/tmp" and is_within(layer.path, "/tmp")
        on_private = inside and core.deciding(all_layers[:index], layer.path) == HIDDEN
        assert (layer in points) is on_private


def test_sandbox_a_socket_in_a_home_under_tmp_is_masked_unless_a_root_or_a_denial_covers_it_small_scope() -> None:
    bound = ["/tmp/h/agent.sock", "/tmp/h/w/app.sock", "/tmp/h/.ssh/s", "/tmp/x.sock", "/run/d.sock"]
    masked = core.sockets_to_mask(bound, ["/tmp/h/w"], ["/tmp/h/.ssh"], "/tmp/h")
    assert masked == ("/tmp/h/agent.sock", "/run/d.sock")
    assert core.sockets_to_mask(bound, [], [], "/tmp") == ("/run/d.sock",)  # a home at /tmp itself stays hidden
    assert core.sockets_to_mask(bound, [], []) == ("/run/d.sock",)


def test_sandbox_composition_refuses_only_network_off_with_a_user_transport_small_scope() -> None:
    """The network off or an allowlist cannot hold for a kernel a user's transport runs (eukhe does not cut it)."""
    for mode, network, transport in itertools.product(MODES, NETWORKS, [False, True]):
        refused = core.composition(core.Policy(mode, network), transport) is not None
        assert refused is (transport and mode is not core.Mode.OFF and network is not core.Network.ON)


def test_sandbox_chosen_sets_only_what_is_chosen_small_scope() -> None:
    base = core.Policy(core.Mode.READ_ONLY, core.Network.OFF, ("/w",), ("/d",), ("V",))
    for mode, network in itertools.product([None, *MODES], [None, *NETWORKS]):
        got = core.chosen(base, mode, network)
        assert got == core.Policy(mode or base.mode, network or base.network, ("/w",), ("/d",), ("V",))


@given(st.lists(paths, max_size=5), st.lists(paths, max_size=2), st.lists(paths, max_size=2))
def test_sandbox_sockets_to_mask_are_those_nothing_else_covers(
    bound: list[str], roots: list[str], denied: list[str]
) -> None:
    masked = core.sockets_to_mask(bound, roots, denied)
    for path in bound:
        covered = any(is_within(path, root) for root in ("/tmp", *roots, *denied))
        assert (path in masked) is not covered


NAMES_IN_GITDIR = ["config", "config.worktree", "hooks", "commondir", "HEAD", "objects"]


@given(
    st.lists(paths, max_size=2),
    st.lists(
        st.builds(
            core.GitDirFound,
            paths,
            st.frozensets(st.sampled_from(NAMES_IN_GITDIR)),
            st.lists(st.tuples(paths, st.frozensets(st.sampled_from(["commondir", "gitdir", "HEAD"]))), max_size=2).map(
                tuple
            ),
        ),
        max_size=3,
    ),
)
def test_sandbox_git_mounts_protect_every_config_and_hook_path_and_pin_each_git_directory(
    gitfiles: list[str], found: list[core.GitDirFound]
) -> None:
    mounts = core.git_mounts(gitfiles, found)
    expected = set(gitfiles)
    expected |= {
        f"{gitdir.path}/{name}" for gitdir in found for name in core.GITDIR_PROTECTED if name in gitdir.present
    }
    expected |= {
        f"{worktree}/{name}"
        for gitdir in found
        for worktree, present in gitdir.worktrees
        for name in core.WORKTREE_PROTECTED
        if name in present
    }
    assert {path for path, _ in mounts.protected} == expected
    assert set(mounts.pinned) == {gitdir.path for gitdir in found} | {w for g in found for w, _ in g.worktrees}
    assert set(mounts.to_make) == {f"{gitdir.path}/hooks" for gitdir in found if "hooks" not in gitdir.present}


def test_sandbox_dirs_to_make_are_the_missing_protected_dirs_small_scope() -> None:
    roots = ["/w", "/x"]
    every = [f"{root}/{name}" for root in roots for name in core.PROTECTED_DIRS]
    for mask in range(1 << len(every)):
        present = frozenset(path for bit, path in enumerate(every) if mask >> bit & 1)
        assert set(core.dirs_to_make(roots, present)) == set(every) - present
