"""Laws of eukhe.core.fsmode ("Local access"): each law exhaustively over the finite domain and with Hypothesis."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.fsmode import (
    CWD_GONE_TEXT,
    CWD_MISSING_TEXT,
    CWD_NOT_DIR_TEXT,
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    PRIVATE_SOCKET_MODE,
    AccessFactError,
    Create,
    CwdFact,
    CwdOpens,
    CwdRefused,
    Fault,
    Found,
    Made,
    PeerAccepted,
    PeerRefused,
    SocketDirFact,
    SocketDirRefused,
    Use,
    creation_mode,
    judge_cwd,
    judge_peer,
    judge_socket_dir,
    refusal_message,
)
from tests.laws.fact_support import refused_field

UIDS = (0, 1, 1000)
MODES = range(0o1000)  # every permission bit pattern; the special bits are covered below for owned dirs
ALL_MODES = range(0o10000)


def all_socket_dir_facts() -> Iterator[SocketDirFact]:
    """The whole domain at small scope: every kind, owner, mode, daemon uid and look."""
    for found, owner, mode, daemon, created in itertools.product(Found, UIDS, MODES, UIDS, (False, True)):
        yield SocketDirFact(found, owner, mode, daemon, created)
    for mode, daemon, created in itertools.product(ALL_MODES, UIDS, (False, True)):
        yield SocketDirFact(Found.DIR, daemon, mode, daemon, created)


uids = st.integers(min_value=0, max_value=2**32 - 1)
socket_dir_facts = st.builds(
    SocketDirFact,
    found=st.sampled_from(Found),
    owner_uid=uids,
    mode=st.integers(min_value=0, max_value=0o7777),
    daemon_uid=uids,
    created=st.booleans(),
)
umasks = st.integers(min_value=0, max_value=0o777)


# --- socket dir ---------------------------------------------------------------------------------------------------


def check_socket_dir_owned(fact: SocketDirFact) -> None:
    if isinstance(judge_socket_dir(fact), Use):
        assert fact.found is Found.DIR
        assert fact.owner_uid == fact.daemon_uid
        assert fact.mode & 0o022 == 0


def test_socket_dir_owned_exhaustive() -> None:
    for fact in all_socket_dir_facts():
        check_socket_dir_owned(fact)


@given(socket_dir_facts)
def test_socket_dir_owned(fact: SocketDirFact) -> None:
    check_socket_dir_owned(fact)


def look_after(verdict: Create, daemon_uid: int, umask: int) -> SocketDirFact:
    """What the shell sees after carrying out Create: a real dir of its own, its mode cut by the umask."""
    return SocketDirFact(Found.DIR, daemon_uid, verdict.mode & ~umask, daemon_uid, created=True)


def check_socket_dir_progress(fact: SocketDirFact, umask: int) -> None:
    """Every look has a verdict; Create only on a first look at a missing dir; the check ends by the second look."""
    verdict = judge_socket_dir(fact)
    assert isinstance(verdict, Create | Use | SocketDirRefused)
    if isinstance(verdict, Create):
        assert fact.found is Found.MISSING
        assert not fact.created
        second = judge_socket_dir(look_after(verdict, fact.daemon_uid, umask))
        assert not isinstance(second, Create)
        vanished = judge_socket_dir(SocketDirFact(Found.MISSING, 0, 0, fact.daemon_uid, created=True))
        assert vanished == SocketDirRefused(Fault.VANISHED)
    if fact.created:
        assert not isinstance(verdict, Create)


def test_socket_dir_progress_exhaustive() -> None:
    for fact in all_socket_dir_facts():
        check_socket_dir_progress(fact, 0o022)
    for umask in range(0o1000):
        check_socket_dir_progress(SocketDirFact(Found.MISSING, 0, 0, 1000, False), umask)


@given(socket_dir_facts, umasks)
def test_socket_dir_progress(fact: SocketDirFact, umask: int) -> None:
    check_socket_dir_progress(fact, umask)


def test_socket_dir_created_exhaustive() -> None:
    for owner, mode, daemon in itertools.product(UIDS, MODES, UIDS):
        assert judge_socket_dir(SocketDirFact(Found.MISSING, owner, mode, daemon)) == Create(0o700)


@given(uids, st.integers(0, 0o7777), uids)
def test_socket_dir_created(owner: int, mode: int, daemon: int) -> None:
    verdict = judge_socket_dir(SocketDirFact(Found.MISSING, owner, mode, daemon))
    assert verdict == Create(PRIVATE_DIR_MODE)
    assert verdict.mode == 0o700


def test_socket_dir_created_used_exhaustive() -> None:
    for daemon, umask in itertools.product(UIDS, range(0o1000)):
        verdict = judge_socket_dir(SocketDirFact(Found.MISSING, 0, 0, daemon))
        assert isinstance(verdict, Create)
        assert judge_socket_dir(look_after(verdict, daemon, umask)) == Use()


@given(uids, umasks)
def test_socket_dir_created_used(daemon: int, umask: int) -> None:
    verdict = judge_socket_dir(SocketDirFact(Found.MISSING, 0, 0, daemon))
    assert isinstance(verdict, Create)
    assert judge_socket_dir(look_after(verdict, daemon, umask)) == Use()


def test_socket_dir_refusals_name_the_fault_exhaustive() -> None:
    """The fault is exactly the first broken rule, and the message names the directory, the fault and the fix."""
    for fact in all_socket_dir_facts():
        verdict = judge_socket_dir(fact)
        expected: object
        if fact.found is Found.MISSING:
            expected = SocketDirRefused(Fault.VANISHED) if fact.created else Create()
        elif fact.found is Found.SYMLINK:
            expected = SocketDirRefused(Fault.SYMLINK)
        elif fact.found is Found.NOT_DIR:
            expected = SocketDirRefused(Fault.NOT_DIR)
        elif fact.owner_uid != fact.daemon_uid:
            expected = SocketDirRefused(Fault.OWNER, owner_uid=fact.owner_uid)
        elif fact.mode & 0o022:
            expected = SocketDirRefused(Fault.MODE, mode=fact.mode)
        else:
            expected = Use()
        assert verdict == expected, fact
        if isinstance(verdict, SocketDirRefused):
            text = refusal_message(verdict, "/run/x")
            assert "/run/x" in text
            assert "--daemon-socket" in text
            if verdict.fault in (Fault.SYMLINK, Fault.NOT_DIR):
                assert "remove the path" in text
            if verdict.fault is Fault.MODE:
                assert "chmod go-w /run/x" in text
                assert f"{fact.mode:04o}" in text
            if verdict.fault is Fault.OWNER:
                assert f"uid {fact.owner_uid}" in text


# --- peers --------------------------------------------------------------------------------------------------------

PEERS: tuple[int | None, ...] = (None, *UIDS)


def test_peer_same_uid_exhaustive() -> None:
    for peer, daemon in itertools.product(PEERS, UIDS):
        if isinstance(judge_peer(peer, daemon), PeerAccepted):
            assert peer == daemon


@given(st.none() | uids, uids)
def test_peer_same_uid(peer: int | None, daemon: int) -> None:
    verdict = judge_peer(peer, daemon)
    if isinstance(verdict, PeerAccepted):
        assert peer == daemon
    else:
        assert verdict == PeerRefused(peer)


def test_peer_own_accepted_exhaustive() -> None:
    for daemon in UIDS:
        assert judge_peer(daemon, daemon) == PeerAccepted()
        assert judge_peer(None, daemon) == PeerRefused(None)


@given(uids)
def test_peer_own_accepted(daemon: int) -> None:
    assert judge_peer(daemon, daemon) == PeerAccepted()
    assert judge_peer(None, daemon) == PeerRefused(None)


# --- creation modes -----------------------------------------------------------------------------------------------


def check_private_on_create(made: Made, umask: int) -> None:
    mode = creation_mode(made) & ~umask
    assert mode & 0o077 == 0, "group and others get nothing, whatever the umask"
    assert creation_mode(made) & 0o077 == 0
    assert creation_mode(made) & 0o600 == 0o600, "the owner reads and writes"
    if made is Made.DIR:
        assert creation_mode(made) == 0o700


def test_private_on_create_exhaustive() -> None:
    for made, umask in itertools.product(Made, range(0o1000)):
        check_private_on_create(made, umask)
    # The shell's constants are the core's modes.
    assert (creation_mode(Made.FILE), creation_mode(Made.DIR), creation_mode(Made.SOCKET)) == (
        PRIVATE_FILE_MODE,
        PRIVATE_DIR_MODE,
        PRIVATE_SOCKET_MODE,
    )
    assert (PRIVATE_FILE_MODE, PRIVATE_DIR_MODE, PRIVATE_SOCKET_MODE) == (0o600, 0o700, 0o600)


@given(st.sampled_from(Made), umasks)
def test_private_on_create(made: Made, umask: int) -> None:
    check_private_on_create(made, umask)


# --- working dir --------------------------------------------------------------------------------------------------


def test_cwd_is_explicit_exhaustive() -> None:
    """Only a directory that exists opens; every other fact is refused (nothing substitutes `/` or a default)."""
    for fact in CwdFact:
        assert isinstance(judge_cwd(fact), CwdOpens) == (fact is CwdFact.DIR)


@given(st.sampled_from(CwdFact))
def test_cwd_is_explicit(fact: CwdFact) -> None:
    verdict = judge_cwd(fact)
    assert isinstance(verdict, CwdOpens) == (fact is CwdFact.DIR)


def test_cwd_none_refused() -> None:
    assert judge_cwd(CwdFact.NONE) == CwdRefused("a session needs a working directory") == CwdRefused(CWD_MISSING_TEXT)


def test_cwd_gone_refused() -> None:
    assert judge_cwd(CwdFact.MISSING) == CwdRefused("working directory is gone") == CwdRefused(CWD_GONE_TEXT)


def test_cwd_file_refused() -> None:
    assert judge_cwd(CwdFact.NOT_DIR) == CwdRefused("working directory is not a directory")
    assert CWD_NOT_DIR_TEXT == "working directory is not a directory"


def test_cwd_dir_opens() -> None:
    assert judge_cwd(CwdFact.DIR) == CwdOpens()


# --- the entry: fsmode_ffi ----------------------------------------------------------------------------------------
# The shell (eukhe.daemon.local_access, eukhe.private_fs) builds a SocketDirFact and asks judge_socket_dir, and asks
# judge_peer, judge_cwd and creation_mode; well-formed facts get the model's verdict, any other one exactly one
# AccessFactError naming its first wrong field.


def model_socket_dir(found: Found, owner: int, mode: int, daemon: int, created: bool) -> object:
    """The socket-dir rule written out on its own ("Local access" 1)."""
    if found is Found.MISSING:
        return SocketDirRefused(Fault.VANISHED) if created else Create(0o700)
    if found is not Found.DIR:
        return SocketDirRefused(Fault.SYMLINK if found is Found.SYMLINK else Fault.NOT_DIR)
    if owner != daemon:
        return SocketDirRefused(Fault.OWNER, owner_uid=owner)
    return SocketDirRefused(Fault.MODE, mode=mode) if mode & 0o022 else Use()


CWD_MODEL = {
    CwdFact.NONE: CwdRefused(CWD_MISSING_TEXT),
    CwdFact.MISSING: CwdRefused(CWD_GONE_TEXT),
    CwdFact.NOT_DIR: CwdRefused(CWD_NOT_DIR_TEXT),
    CwdFact.DIR: CwdOpens(),
}
MODE_MODEL = {Made.FILE: 0o600, Made.DIR: 0o700, Made.SOCKET: 0o600}


def check_socket_dir_answers(found: Found, owner: int, mode: int, daemon: int, created: bool) -> None:
    fact = SocketDirFact(found, owner, mode, daemon, created)  # well formed: built unrefused
    assert judge_socket_dir(fact) == model_socket_dir(found, owner, mode, daemon, created), fact


def check_peer_answers(peer: int | None, daemon: int) -> None:
    assert judge_peer(peer, daemon) == (PeerAccepted() if peer == daemon else PeerRefused(peer))


def test_fsmode_ffi_answers_exhaustive() -> None:
    for fact in all_socket_dir_facts():
        check_socket_dir_answers(fact.found, fact.owner_uid, fact.mode, fact.daemon_uid, fact.created)
    for peer, daemon in itertools.product(PEERS, UIDS):
        check_peer_answers(peer, daemon)
    for cwd in CwdFact:
        assert judge_cwd(cwd) == CWD_MODEL[cwd]
    for made in Made:
        assert creation_mode(made) == MODE_MODEL[made]


@given(st.sampled_from(Found), uids, st.integers(0, 0o7777), uids, st.booleans())
def test_fsmode_ffi_answers(found: Found, owner: int, mode: int, daemon: int, created: bool) -> None:
    check_socket_dir_answers(found, owner, mode, daemon, created)


@given(st.none() | uids, uids, st.sampled_from(CwdFact), st.sampled_from(Made))
def test_fsmode_ffi_answers_peer_cwd_mode(peer: int | None, daemon: int, cwd: CwdFact, made: Made) -> None:
    check_peer_answers(peer, daemon)
    check_peer_answers(daemon, daemon)
    assert judge_cwd(cwd) == CWD_MODEL[cwd]
    assert creation_mode(made) == MODE_MODEL[made]


def refusal_of(make: Callable[[], object]) -> str | None:
    """The field an `AccessFactError` names when `make` runs, or None when nothing refuses."""
    return refused_field(AccessFactError, make)


def is_uid(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


FIELD_OK: dict[str, Callable[[object], bool]] = {
    "found": lambda v: isinstance(v, Found),
    "owner_uid": is_uid,
    "mode": lambda v: is_uid(v) and v <= 0o7777,  # type: ignore[operator]
    "daemon_uid": is_uid,
    "created": lambda v: isinstance(v, bool),
    "peer_uid": lambda v: v is None or is_uid(v),
    "cwd": lambda v: isinstance(v, CwdFact),
    "made": lambda v: isinstance(v, Made),
}
"""An independent reading of each field's grammar."""

SOCKET_DIR_FIELDS = ("found", "owner_uid", "mode", "daemon_uid", "created")
GOOD_SOCKET_DIR: dict[str, Any] = {"found": Found.DIR, "owner_uid": 0, "mode": 0o700, "daemon_uid": 0, "created": False}
GOOD_PEER: dict[str, Any] = {"peer_uid": 5, "daemon_uid": 0}


def ask(kind: str, fields: dict[str, Any]) -> Callable[[], object]:
    """The shell's call for one kind of fact, with these fields."""
    if kind == "socket_dir":
        return lambda: judge_socket_dir(SocketDirFact(**fields))
    if kind == "peer":
        return lambda: judge_peer(fields["peer_uid"], fields["daemon_uid"])
    if kind == "cwd":
        return lambda: judge_cwd(fields["cwd"])
    return lambda: creation_mode(fields["made"])


def expected_refusal(fields: dict[str, Any]) -> str | None:
    """The first field (in the record's order) the grammar rejects."""
    return next((name for name, value in fields.items() if not FIELD_OK[name](value)), None)


TEMPLATES: list[tuple[str, dict[str, Any]]] = [
    ("socket_dir", GOOD_SOCKET_DIR),
    ("peer", GOOD_PEER),
    ("cwd", {"cwd": CwdFact.DIR}),
    ("made", {"made": Made.FILE}),
]
BAD_VALUES: tuple[object, ...] = (None, True, False, -1, 0o10000, 1.5, "0", "dir", [], {}, "nonsense", Found.DIR)


def test_fsmode_ffi_malformed_exhaustive() -> None:
    """Every single-field corruption of a well-formed fact, and every pair, gets the one refusal of its first field."""
    for kind, template in TEMPLATES:
        assert refusal_of(ask(kind, template)) is None
        for key, bad in itertools.product(template, BAD_VALUES):
            corrupted = {**template, key: bad}
            assert refusal_of(ask(kind, corrupted)) == expected_refusal(corrupted), (kind, corrupted)
        for (one, two), bad in itertools.product(itertools.combinations(template, 2), BAD_VALUES):
            corrupted = {**template, one: bad, two: bad}
            assert refusal_of(ask(kind, corrupted)) == expected_refusal(corrupted), (kind, corrupted)
    assert refusal_of(lambda: judge_socket_dir(GOOD_SOCKET_DIR)) == "socket_dir"  # type: ignore[arg-type]
    assert refusal_of(lambda: judge_cwd("dir")) == "cwd"  # type: ignore[arg-type]
    assert refusal_of(lambda: creation_mode("socket")) == "made"  # type: ignore[arg-type]


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
field_values = {
    "found": values | st.sampled_from(Found) | st.sampled_from(CwdFact),
    "owner_uid": values | uids,
    "mode": values | st.integers(0, 0o20000),
    "daemon_uid": values | uids,
    "created": values,
    "peer_uid": values | uids,
    "cwd": values | st.sampled_from(CwdFact) | st.sampled_from(Found),
    "made": values | st.sampled_from(Made),
}


@given(st.sampled_from(TEMPLATES), st.data())
def test_fsmode_ffi_malformed(template: tuple[str, dict[str, Any]], data: st.DataObject) -> None:
    kind, fields = template
    drawn = {name: data.draw(field_values[name], label=name) for name in fields}
    refused = refusal_of(ask(kind, drawn))
    assert refused == expected_refusal(drawn)


def test_fsmode_ffi_example() -> None:
    """Anchors on the facts the shell reads and the verdicts it gets."""
    assert judge_socket_dir(SocketDirFact(Found.DIR, 1000, 0o755, 1000)) == Use()
    assert judge_socket_dir(SocketDirFact(Found.DIR, 1000, 0o777, 1000)) == SocketDirRefused(Fault.MODE, mode=0o777)
    assert judge_socket_dir(SocketDirFact(Found.MISSING, 0, 0, 1000)) == Create(0o700)
    assert judge_socket_dir(SocketDirFact(Found.DIR, 0, 0o700, 1000)) == SocketDirRefused(Fault.OWNER, owner_uid=0)
    assert judge_socket_dir(SocketDirFact(Found.SYMLINK, 1000, 0o777, 1000)) == SocketDirRefused(Fault.SYMLINK)
    assert judge_peer(4242, 1000) == PeerRefused(4242)
    assert judge_peer(None, 1000) == PeerRefused(None)
    assert judge_peer(1000, 1000) == PeerAccepted()
    assert judge_cwd(CwdFact.MISSING) == CwdRefused("working directory is gone")
    assert creation_mode(Made.SOCKET) == 0o600
    assert refusal_of(lambda: SocketDirFact(Found.DIR, 1000, 0o10000, 1000)) == "mode"
    assert refusal_of(lambda: judge_peer(-1, 1000)) == "peer_uid"


@pytest.mark.parametrize("fact", list(CwdFact))
def test_cwd_verdicts_are_total(fact: CwdFact) -> None:
    assert isinstance(judge_cwd(fact), CwdOpens | CwdRefused)
