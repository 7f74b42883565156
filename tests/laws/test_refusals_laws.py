"""Laws of the sandbox's refusals (eukhe.core.refusals): which error messages are read and what paths they name, and
that a line fires exactly when the policy is the cause: the layers refuse the path (`access`, the mounts), the host
alone would not, the network is off. Over free policies and paths, and exhaustively where the domain is small."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import refusals as core
from eukhe.core import sandbox
from eukhe.core.pathmap import is_within, normalize
from tests.laws.test_sandbox_laws import facts_strategy, paths

relative = paths.map(lambda path: path.lstrip("/"))
named = st.one_of(paths, relative)
seen_strategy = st.builds(core.Seen, paths, st.booleans(), st.booleans())

REAL_MESSAGES: list[tuple[str, list[core.Clue]]] = [
    # coreutils, quoted in the C locale and in a UTF-8 one
    (
        "touch: cannot touch '/home/u/x': Read-only file system",
        [core.Clue(core.Symptom.READ_ONLY, "/home/u/x")],
    ),
    (
        "mkdir: cannot create directory \u2018/opt/zz\u2019: Read-only file system",
        [core.Clue(core.Symptom.READ_ONLY, "/opt/zz")],
    ),
    ("cat: /home/u/.ssh/id_rsa: No such file or directory", [core.Clue(core.Symptom.MISSING, "/home/u/.ssh/id_rsa")]),
    (
        "mv: cannot move '.git' to 'g2': Device or resource busy",
        [core.Clue(core.Symptom.BUSY, ".git"), core.Clue(core.Symptom.BUSY, "g2")],
    ),
    # bash's redirection
    ("bash: line 1: /etc/foo: Read-only file system", [core.Clue(core.Symptom.READ_ONLY, "/etc/foo")]),
    # git
    (
        "error: could not write config file .git/config: Device or resource busy",
        [core.Clue(core.Symptom.BUSY, ".git/config")],
    ),
    ("fatal: could not set 'remote.origin.url' to 'http://x'", []),
    # Python, Node, Go
    ("OSError: [Errno 30] Read-only file system: '/usr/x'", [core.Clue(core.Symptom.READ_ONLY, "/usr/x")]),
    (
        'FileNotFoundError: [Errno 2] No such file or directory: "it\'s"',
        [core.Clue(core.Symptom.MISSING, "it's")],
    ),
    ("Error: EROFS: read-only file system, open '/usr/n'", [core.Clue(core.Symptom.READ_ONLY, "/usr/n")]),
    ("open /usr/g: read-only file system", [core.Clue(core.Symptom.READ_ONLY, "/usr/g")]),
    # Rust's tools (uv, cargo): the path in backquotes, then the OS error
    (
        "  cause: failed to create directory `/home/u/.cache/uv`: Read-only file system (os error 30)",
        [core.Clue(core.Symptom.READ_ONLY, "/home/u/.cache/uv")],
    ),
    # the network
    ("curl: (6) Could not resolve host: pypi.org", [core.Clue(core.Symptom.OFFLINE)]),
    ("curl: (7) Failed to connect to 1.1.1.1 port 80 after 0 ms: Couldn't connect", [core.Clue(core.Symptom.OFFLINE)]),
    ("curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server", []),
    ("curl: (7) Failed to connect to localhost port 9 after 0 ms: Couldn't connect to server", []),
    (
        "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>",
        [core.Clue(core.Symptom.OFFLINE)],
    ),
    ("OSError: [Errno 101] Network is unreachable", [core.Clue(core.Symptom.OFFLINE)]),
    ("npm error request to https://r/x failed, reason: getaddrinfo EAI_AGAIN r", [core.Clue(core.Symptom.OFFLINE)]),
    ("ERROR: No matching distribution found for six", []),
    # failures of their own
    ("cat: f: Permission denied", []),
    ("bad.c:1:20: error: \u2018x\u2019 undeclared (first use in this function)", []),
    ("error: pathspec 'nobranch' did not match any file(s) known to git", []),
]


def test_refusals_clues_read_real_messages_small_scope() -> None:
    """Each message as the tools print it gives its symptom and the paths its line names (a word that is not a path
    is a clue too: the layers then find nothing to refuse there); a message the policy never causes gives none."""
    for line, expected in REAL_MESSAGES:
        got = [clue for clue in core.clues(line) if clue.path != "EROFS"]  # Node's code, as a relative name
        assert got == expected, line


free_line = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=60)
a_line = st.one_of(free_line, st.sampled_from([line for line, _ in REAL_MESSAGES]))


@given(st.lists(a_line, max_size=12))
def test_refusals_clues_only_where_a_message_is(lines: list[str]) -> None:
    """Each clue is of a line that holds its message (and the path it names); lines without one give none."""
    found = core.clues("\n".join(lines))
    for clue in found:
        assert any(
            pattern.search(line) and (clue.path is None or clue.path in line)
            for line in lines
            for symptom, pattern in core._MESSAGES
            if symptom is clue.symptom
        ), clue
    if not any(pattern.search(line) for line in lines for _, pattern in core._MESSAGES):
        assert found == ()
    assert len(found) <= core.MAX_CLUES


@given(st.integers(min_value=0, max_value=3 * core.SCAN_LINES), st.integers(min_value=1, max_value=2 * core.MAX_CLUES))
def test_refusals_clues_are_bounded_to_the_end_of_the_output(after: int, messages: int) -> None:
    """Only the end is read: a message followed by more than `SCAN_LINES` lines is not; at most `MAX_CLUES` are."""
    head = "".join(f"touch: cannot touch '/usr/{n}': Read-only file system\n" for n in range(messages))
    found = core.clues(head + "x\n" * after)
    if after >= core.SCAN_LINES:
        assert found == ()
    else:
        assert 0 < len(found) <= core.MAX_CLUES
        assert all(clue.path is not None and clue.path.startswith("/usr/") for clue in found)
    long_line = "x" * core.SCAN_CHARS
    assert core.clues(head + long_line) == ()


WRITE_RULES = {"outside_writable_roots", "read_only", "protected", "deny_read"}
"""The file tools' refusals of a write that a confined process meets as a read-only file system (a cache is
copy-on-write: its writes succeed)."""


def refused_write(facts: sandbox.Facts, path: str) -> bool:
    verdict = sandbox.access(facts, path, sandbox.Want.WRITE)
    return isinstance(verdict, sandbox.Denied) and verdict.rule in WRITE_RULES


@given(facts_strategy, named, st.booleans())
def test_refusals_read_only_fires_exactly_where_the_layers_refuse_the_write(
    facts: sandbox.Facts, path: str, host_read_only: bool
) -> None:
    """A write that met a read-only file system is the sandbox's doing exactly when the layers refuse to write the
    path (as the file tools would) and the host's own file system is writable; the rule is the file tools' rule."""
    host = core.host_path(facts, path)
    seen = {host: core.Seen(host, True, host_read_only)}
    got = core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, path)], seen)
    fires = facts.mode is not sandbox.Mode.OFF and not host_read_only and refused_write(facts, host)
    assert (got is not None) is fires
    if got is not None:
        verdict = sandbox.access(facts, host, sandbox.Want.WRITE)
        assert isinstance(verdict, sandbox.Denied)
        assert got.rule == core.RULES_OF_ACCESS[verdict.rule]
        assert got.path == path


@given(facts_strategy, named, seen_strategy)
def test_refusals_read_only_follows_the_real_path_too(facts: sandbox.Facts, path: str, look: core.Seen) -> None:
    """Through a symlink, the write met what the link points to: the real path the host resolved decides as well."""
    host = core.host_path(facts, path)
    got = core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, path)], {host: look})
    fires = (
        facts.mode is not sandbox.Mode.OFF
        and not look.read_only_fs
        and (refused_write(facts, look.real) or refused_write(facts, host))
    )
    assert (got is not None) is fires


@given(facts_strategy, named)
def test_refusals_busy_fires_only_at_a_mount_point_of_the_sandbox(facts: sandbox.Facts, path: str) -> None:
    """`Device or resource busy` is the sandbox's doing only at a path it mounted: a pinned git directory, a
    protected path, a mask; never a path below one, nor the private /tmp."""
    host = core.host_path(facts, path)
    got = core.decide(facts, [core.Clue(core.Symptom.BUSY, path)], {})
    mounted = {layer.path: layer.kind for layer in sandbox.layers(facts) if layer.path != sandbox.SANDBOX_TMP}
    # (of two layers at one path, the later lies on top: the dict keeps the later)
    fires = facts.mode is not sandbox.Mode.OFF and mounted.get(host) in core.MOUNT_RULES
    assert (got is not None) is fires
    if got is not None:
        assert got.rule is core.MOUNT_RULES[mounted[host]]
        assert got.root == host


@given(facts_strategy, named, st.booleans())
def test_refusals_missing_fires_only_under_a_mask_or_for_the_hosts_tmp(
    facts: sandbox.Facts, path: str, on_host: bool
) -> None:
    """A missing path is the sandbox's doing under a masked one (whatever the host has there: saying so would tell
    what the mask hides), or in the private /tmp when the host's /tmp has it (or masks it); never anywhere else."""
    absolute = normalize(path if path.startswith("/") else facts.cwd + "/" + path)
    host = core.host_path(facts, path)
    seen = {absolute: core.Seen(absolute, on_host)}
    got = core.decide(facts, [core.Clue(core.Symptom.MISSING, path)], seen)
    if facts.mode is sandbox.Mode.OFF:
        assert got is None
        return
    layer = sandbox.deciding(sandbox.layers(facts), absolute)
    if layer.path == sandbox.SANDBOX_TMP and layer.kind is sandbox.Kind.DENY:
        hidden = [root for root, _ in facts.denied if is_within(absolute, root)]
        if hidden:  # the host's path is under a mask too: whether it is there stays hidden
            assert got == core.Refusal(core.Rule.DENY_READ, path, max(hidden, key=len))
        else:
            assert got == (core.Refusal(core.Rule.PRIVATE_TMP, path, absolute) if on_host else None)
        return
    masked = sandbox.deciding(sandbox.layers(facts), host).kind is sandbox.Kind.DENY
    assert (got is not None) is masked
    if got is not None:
        assert got.rule is core.Rule.DENY_READ
        assert got.root is not None and is_within(host, got.root)


def test_refusals_network_fires_only_with_the_network_off_small_scope() -> None:
    """No resolution or route is the sandbox's doing only with the network off (`network_off`) or an allowlist
    (`network_allowlist`), never with it on."""
    for mode, network in itertools.product(sandbox.Mode, sandbox.Network):
        facts = sandbox.Facts(mode, network, cwd="/w", tmp="/t/tmp")
        got = core.decide(facts, [core.Clue(core.Symptom.OFFLINE)], {})
        assert (got is not None) is (mode is not sandbox.Mode.OFF and network is not sandbox.Network.ON)
        if got is not None:
            assert got.rule == (
                core.Rule.NETWORK_OFF if network is sandbox.Network.OFF else core.Rule.NETWORK_ALLOWLIST
            )


def test_refusals_network_allowlist_names_the_refused_host() -> None:
    assert core.network_refusal([]) is None
    got = core.network_refusal(["evil.example:443", "other:80"])
    assert got is not None
    assert got.rule is core.Rule.NETWORK_ALLOWLIST
    assert "evil.example:443" in got.line()
    assert "sandbox.allow_domains" in got.line()


@given(facts_strategy, st.lists(st.tuples(st.sampled_from(list(core.Symptom)), named), max_size=6))
def test_refusals_the_first_clue_the_policy_explains_decides(
    facts: sandbox.Facts, pairs: list[tuple[core.Symptom, str]]
) -> None:
    """Of several clues, the first (in the output's order) that fires alone is the one; none fires if none does."""
    found = [core.Clue(s, None if s is core.Symptom.OFFLINE else p) for s, p in pairs]
    alone = [core.decide(facts, [clue], {}) for clue in found]
    assert core.decide(facts, found, {}) == next((got for got in alone if got is not None), None)


def test_refusals_the_first_clue_decides_small_scope() -> None:
    facts = sandbox.Facts(
        sandbox.Mode.WORKSPACE_WRITE, sandbox.Network.OFF, cwd="/w", tmp="/t/tmp", denied=(("/h/.ssh", True),)
    )
    key = core.Clue(core.Symptom.MISSING, "/h/.ssh/k")
    offline = core.Clue(core.Symptom.OFFLINE)
    outside = core.Clue(core.Symptom.READ_ONLY, "/usr/x")
    own = core.Clue(core.Symptom.MISSING, "nothere")
    rules = {
        (key, offline, outside): core.Rule.DENY_READ,
        (own, offline, key): core.Rule.NETWORK_OFF,
        (own, outside, offline): core.Rule.OUTSIDE_WRITABLE_ROOTS,
    }
    for found, rule in rules.items():
        got = core.decide(facts, found, {})
        assert got is not None and got.rule is rule


def test_refusals_a_symlinks_target_decides_first_small_scope() -> None:
    """The write met what a link points to: its real path decides before the path the message named."""
    facts = sandbox.Facts(
        sandbox.Mode.WORKSPACE_WRITE, sandbox.Network.ON, cwd="/w", tmp="/t/tmp", denied=(("/h/.ssh", True),)
    )
    through = {"/w/link": core.Seen("/usr/x", True), "/h/.ssh/link": core.Seen("/usr/y", True)}
    got = core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, "link")], through)
    assert got == core.Refusal(core.Rule.OUTSIDE_WRITABLE_ROOTS, "link", "/usr/x")
    got = core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, "/h/.ssh/link")], through)
    assert got == core.Refusal(core.Rule.OUTSIDE_WRITABLE_ROOTS, "/h/.ssh/link", "/usr/y")


def test_refusals_writes_the_sandbox_allows_are_never_refusals_small_scope() -> None:
    """A write into the working directory, a writable root, the private /tmp or a copy-on-write cache succeeds in
    the sandbox: a read-only file system there is the host's own doing."""
    facts = sandbox.Facts(
        sandbox.Mode.WORKSPACE_WRITE,
        sandbox.Network.ON,
        cwd="/w",
        tmp="/t/tmp",
        writable=("/r",),
        caches=(sandbox.Cache("/h/.cache"),),
    )
    for path in ("/w/x", "x", "/r/x", "/tmp/x", "/h/.cache/pip/x"):
        assert core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, path)], {}) is None, path
    assert core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, "/h/x")], {}) is not None


def test_refusals_eukhe_own_directories_are_named_as_such_small_scope() -> None:
    """A mask of eukhe's own is not the user's `deny_read`: its line says so, and offers no setting to change."""
    facts = sandbox.Facts(
        sandbox.Mode.WORKSPACE_WRITE, sandbox.Network.ON, cwd="/w", tmp="/t/tmp", denied=(("/agent", True),)
    )
    for symptom in (core.Symptom.MISSING, core.Symptom.READ_ONLY):
        got = core.decide(facts, [core.Clue(symptom, "/agent/x")], {}, frozenset({"/agent"}))
        assert got == core.Refusal(core.Rule.EUKHE_DIRS, "/agent/x", "/agent")
        assert "deny_read" not in got.line()
        user = core.decide(facts, [core.Clue(symptom, "/agent/x")], {})
        assert user is not None and user.rule is core.Rule.DENY_READ


def test_refusals_a_path_in_the_private_tmp_is_the_sessions_own_small_scope() -> None:
    """/tmp inside is the session's directory: a write there is never refused, a deeper mount still decides."""
    facts = sandbox.Facts(
        sandbox.Mode.WORKSPACE_WRITE,
        sandbox.Network.ON,
        cwd="/tmp/w",
        tmp="/t/tmp",
        denied=(("/tmp/agent", True),),
    )
    assert core.host_path(facts, "/tmp/x") == "/t/tmp/x"
    assert core.host_path(facts, "x") == "/tmp/w/x"
    assert core.host_path(facts, "/tmp/agent/x") == "/t/tmp/agent/x"  # a mask under the host's /tmp: not mounted
    for path in ("/tmp/x", "x", "/tmp/agent/x"):
        assert core.decide(facts, [core.Clue(core.Symptom.READ_ONLY, path)], {}) is None
    assert core.probes(facts, [core.Clue(core.Symptom.MISSING, "/tmp/x")]) == ("/t/tmp/x", "/tmp/x")
    there = {"/tmp/x": core.Seen("/tmp/x", True), "/tmp/agent/x": core.Seen("/tmp/agent/x", True)}
    for look in ({}, there):  # missing in the private /tmp: the host's has it, or a mask hides whether it does
        got = core.decide(facts, [core.Clue(core.Symptom.MISSING, "/tmp/agent/x")], look, frozenset({"/tmp/agent"}))
        assert got == core.Refusal(core.Rule.EUKHE_DIRS, "/tmp/agent/x", "/tmp/agent")
    assert core.decide(facts, [core.Clue(core.Symptom.MISSING, "/tmp/x")], {}) is None
    got = core.decide(facts, [core.Clue(core.Symptom.MISSING, "/tmp/x")], there)
    assert got == core.Refusal(core.Rule.PRIVATE_TMP, "/tmp/x", "/tmp/x")


ROOTS = ["/w/.git/config", "/w/.git/config.worktree", "/w/.git/hooks", "/w/.git/commondir", "/w/.claude", "/w/.eukhe"]


def test_refusals_each_line_names_its_rule_and_the_ways_on_small_scope() -> None:
    """Every rule's line is one line that says it was the sandbox, names the rule, what to do instead, and the
    user's way on: a setting or a flag (or outside eukhe, for what no setting opens)."""
    refusals = [core.Refusal(rule, "/p/x", "/p") for rule in core.Rule if rule is not core.Rule.PROTECTED]
    refusals += [core.Refusal(core.Rule.PROTECTED, root + "/x", root) for root in ROOTS]
    for refusal in refusals:
        line = refusal.line()
        assert "\n" not in line
        assert line.startswith(f"sandbox refused ({refusal.rule}): ")
        assert "instead" in line or "do without it" in line
        assert "the user" in line or "only a session" in line
        assert "--sandbox" in line or "--network" in line
    settings = {
        core.Rule.OUTSIDE_WRITABLE_ROOTS: "sandbox.writable_roots",
        core.Rule.DENY_READ: "sandbox.deny_read",
        core.Rule.NETWORK_OFF: "--network on",
        core.Rule.READ_ONLY: "--sandbox workspace_write",
    }
    for rule, setting in settings.items():
        assert setting in core.Refusal(rule, "/p/x", "/p").line()
    assert "git -c user.name=" in core.Refusal(core.Rule.PROTECTED, "/w/.git/config", "/w/.git/config").line()
    assert "git -c" not in core.Refusal(core.Rule.PROTECTED, "/w/.claude/x", "/w/.claude").line()
