"""Laws of eukhe.core.fsmode ("Local access"): each law exhaustively over the finite domain and with Hypothesis."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.fsmode import (
    CWD_GONE_TEXT,
    CWD_MISSING_TEXT,
    CWD_NOT_DIR_TEXT,
    FSMODE_MALFORMED,
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    PRIVATE_SOCKET_MODE,
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
    encode_cwd,
    encode_peer,
    encode_socket_dir,
    fsmode_entry,
    judge_cwd,
    judge_peer,
    judge_socket_dir,
    refusal_message,
)

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


# --- the entry ----------------------------------------------------------------------------------------------------


def well_formed_requests() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every well-formed request at small scope, with the model's reply."""
    for fact in all_socket_dir_facts():
        request = {
            "op": "socket_dir",
            "found": fact.found.value,
            "owner_uid": fact.owner_uid,
            "mode": fact.mode,
            "daemon_uid": fact.daemon_uid,
            "created": fact.created,
        }
        yield request, encode_socket_dir(judge_socket_dir(fact))
    for peer, daemon in itertools.product(PEERS, UIDS):
        yield {"op": "peer", "peer_uid": peer, "daemon_uid": daemon}, encode_peer(judge_peer(peer, daemon))
    for cwd in CwdFact:
        yield {"op": "cwd", "found": cwd.value}, encode_cwd(judge_cwd(cwd))
    for made in Made:
        yield {"op": "mode", "made": made.value}, {"mode": creation_mode(made)}


def test_fsmode_ffi_answers_exhaustive() -> None:
    for request, reply in well_formed_requests():
        answer = fsmode_entry(request)
        assert answer == reply, request
        # The reply survives the JSON the shell reads it through.
        assert json.loads(json.dumps(answer)) == reply


@given(socket_dir_facts)
def test_fsmode_ffi_answers(fact: SocketDirFact) -> None:
    request = {
        "op": "socket_dir",
        "found": fact.found.value,
        "owner_uid": fact.owner_uid,
        "mode": fact.mode,
        "daemon_uid": fact.daemon_uid,
        "created": fact.created,
    }
    assert fsmode_entry(json.loads(json.dumps(request))) == encode_socket_dir(judge_socket_dir(fact))


@given(st.none() | uids, uids, st.sampled_from(CwdFact), st.sampled_from(Made))
def test_fsmode_ffi_answers_peer_cwd_mode(peer: int | None, daemon: int, cwd: CwdFact, made: Made) -> None:
    assert fsmode_entry({"op": "peer", "peer_uid": peer, "daemon_uid": daemon}) == encode_peer(judge_peer(peer, daemon))
    assert fsmode_entry({"op": "cwd", "found": cwd.value}) == encode_cwd(judge_cwd(cwd))
    assert fsmode_entry({"op": "mode", "made": made.value}) == {"mode": creation_mode(made)}


BAD_VALUES: tuple[object, ...] = (None, True, False, -1, 0o10000, 1.5, "0", "dir", [], {}, "nonsense")

MALFORMED_FIXED: tuple[object, ...] = (
    {},
    {"op": "nope"},
    {"op": None},
    {"op": 1},
    {"op": "cwd"},
    {"op": "cwd", "found": "dir", "extra": 1},
    {"op": "cwd", "found": "DIR"},
    {"op": "peer", "peer_uid": 0},
    {"op": "peer", "peer_uid": -1, "daemon_uid": 0},
    {"op": "peer", "peer_uid": True, "daemon_uid": 0},
    {"op": "peer", "peer_uid": 0, "daemon_uid": None},
    {"op": "mode", "made": "fifo"},
    {"op": "socket_dir", "found": "dir", "owner_uid": 0, "mode": 0o700, "daemon_uid": 0},
    {"op": "socket_dir", "found": "dir", "owner_uid": 0, "mode": 0o10000, "daemon_uid": 0, "created": False},
    {"op": "socket_dir", "found": "dir", "owner_uid": 0, "mode": -1, "daemon_uid": 0, "created": False},
    {"op": "socket_dir", "found": "dir", "owner_uid": 0, "mode": 0o700, "daemon_uid": 0, "created": 0},
    {"op": "socket_dir", "found": "link", "owner_uid": 0, "mode": 0o700, "daemon_uid": 0, "created": False},
    [],
    "socket_dir",
    None,
)


def well_formed_templates() -> list[dict[str, Any]]:
    return [
        {"op": "socket_dir", "found": "dir", "owner_uid": 0, "mode": 0o700, "daemon_uid": 0, "created": False},
        {"op": "peer", "peer_uid": 5, "daemon_uid": 0},
        {"op": "cwd", "found": "dir"},
        {"op": "mode", "made": "file"},
    ]


def test_fsmode_ffi_malformed_exhaustive() -> None:
    """Every fixed malformed request, and every single-field corruption of a well-formed one, gets the one refusal."""
    for request in MALFORMED_FIXED:
        assert fsmode_entry(request) == FSMODE_MALFORMED  # type: ignore[arg-type]
    for template in well_formed_templates():
        assert not isinstance(fsmode_entry(template), type(FSMODE_MALFORMED))
        for key, bad in itertools.product(template, BAD_VALUES):
            corrupted = {**template, key: bad}
            if _shape_ok(corrupted):
                continue  # e.g. an unreadable peer uid (None), or created=False: still well formed
            assert fsmode_entry(corrupted) == FSMODE_MALFORMED, corrupted
        for key in template:
            assert fsmode_entry({k: v for k, v in template.items() if k != key}) == FSMODE_MALFORMED
        assert fsmode_entry({**template, "more": 1}) == FSMODE_MALFORMED


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _shape_ok(request: object) -> bool:
    """An independent reading of the request grammar, for the Hypothesis law."""
    if not isinstance(request, dict):
        return False

    def uid(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    op = request.get("op")
    if op == "socket_dir":
        return (
            set(request) == {"op", "found", "owner_uid", "mode", "daemon_uid", "created"}
            and request["found"] in ("missing", "symlink", "not_dir", "dir")
            and uid(request["owner_uid"])
            and uid(request["daemon_uid"])
            and uid(request["mode"])
            and request["mode"] <= 0o7777
            and isinstance(request["created"], bool)
        )
    if op == "peer":
        return (
            set(request) == {"op", "peer_uid", "daemon_uid"}
            and (request["peer_uid"] is None or uid(request["peer_uid"]))
            and uid(request["daemon_uid"])
        )
    if op == "cwd":
        return set(request) == {"op", "found"} and request["found"] in ("none", "missing", "not_dir", "dir")
    if op == "mode":
        return set(request) == {"op", "made"} and request["made"] in ("file", "dir", "socket")
    return False


@given(
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"op": st.sampled_from(["socket_dir", "peer", "cwd", "mode", "x"])},
            optional={
                "found": json_values | st.sampled_from(["missing", "symlink", "not_dir", "dir", "none"]),
                "owner_uid": json_values,
                "mode": json_values,
                "daemon_uid": json_values | uids,
                "created": json_values,
                "peer_uid": json_values | uids,
                "made": json_values | st.sampled_from(["file", "dir", "socket"]),
            },
        ),
    )
)
def test_fsmode_ffi_malformed(request: object) -> None:
    answer = fsmode_entry(request)  # type: ignore[arg-type]
    if _shape_ok(request):
        assert isinstance(answer, dict)
    else:
        assert answer == FSMODE_MALFORMED
        assert answer.code == "fsmode_malformed"  # type: ignore[union-attr]


def test_fsmode_ffi_example() -> None:
    """Anchors on the bytes the shell sends and reads."""
    examples = [
        (
            '{"op":"socket_dir","found":"dir","owner_uid":1000,"mode":493,"daemon_uid":1000,"created":false}',
            {"verdict": "use"},
        ),
        (
            '{"op":"socket_dir","found":"dir","owner_uid":1000,"mode":511,"daemon_uid":1000,"created":false}',
            {"verdict": "refuse", "fault": "mode", "owner_uid": None, "mode": 511},
        ),
        (
            '{"op":"socket_dir","found":"missing","owner_uid":0,"mode":0,"daemon_uid":1000,"created":false}',
            {"verdict": "create", "mode": 448},
        ),
        (
            '{"op":"socket_dir","found":"dir","owner_uid":0,"mode":448,"daemon_uid":1000,"created":false}',
            {"verdict": "refuse", "fault": "owner", "owner_uid": 0, "mode": None},
        ),
        (
            '{"op":"socket_dir","found":"symlink","owner_uid":1000,"mode":511,"daemon_uid":1000,"created":false}',
            {"verdict": "refuse", "fault": "symlink", "owner_uid": None, "mode": None},
        ),
        ('{"op":"peer","peer_uid":4242,"daemon_uid":1000}', {"verdict": "refuse", "peer_uid": 4242}),
        ('{"op":"peer","peer_uid":null,"daemon_uid":1000}', {"verdict": "refuse", "peer_uid": None}),
        ('{"op":"peer","peer_uid":1000,"daemon_uid":1000}', {"verdict": "accept"}),
        ('{"op":"cwd","found":"missing"}', {"verdict": "refused", "text": "working directory is gone"}),
        ('{"op":"cwd","found":"dir"}', {"verdict": "opens"}),
        ('{"op":"mode","made":"socket"}', {"mode": 384}),
    ]
    for wire, reply in examples:
        assert json.dumps(fsmode_entry(json.loads(wire)), separators=(",", ":")) == json.dumps(
            reply, separators=(",", ":")
        )
    assert fsmode_entry(json.loads('{"op":"cwd","found":"elsewhere"}')) == FSMODE_MALFORMED


@pytest.mark.parametrize("fact", list(CwdFact))
def test_cwd_verdicts_are_total(fact: CwdFact) -> None:
    assert isinstance(judge_cwd(fact), CwdOpens | CwdRefused)
