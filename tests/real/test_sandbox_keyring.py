"""The keyring filter under real bwrap (docs/sandbox.md): a key in the test's own session
keyring, put there with the real `add_key`, is read by a command bwrap runs without the filter, and refused (EPERM)
to the same command with it, through the 64-bit calls and, on x86_64, through i386's `int 0x80` and x32's numbers;
ordinary work runs under the filter; the bwrap probe loads it."""

from __future__ import annotations

import ast
import asyncio
import ctypes
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from eukhe.api import Session
from eukhe.core.limits import after_prelude
from eukhe.records.jobs import Settled
from eukhe.records.sandbox import SandboxPolicy
from eukhe.sandbox import bwrap, seccomp
from eukhe.sandbox.confine import Confinement
from tests.real.tools import need_tools, tool

pytestmark = pytest.mark.real

KEYCTL_JOIN_SESSION_KEYRING = 1  # include/uapi/linux/keyctl.h
KEYCTL_INVALIDATE = 21
KEY_SPEC_SESSION_KEYRING = -3
SYSCALLS = {"x86_64": {"add_key": 248, "keyctl": 250}, "aarch64": {"add_key": 217, "keyctl": 219}}
"""The numbers this test calls by (syscall_64.tbl, asm-generic/unistd.h)."""

READER = r"""
import ctypes, errno, json, mmap, os, platform, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
ADD_KEY, REQUEST_KEY, KEYCTL = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[platform.machine()]
DESCRIBE, SEARCH, READ, JOIN, GET_ID = 6, 10, 11, 1, 0  # KEYCTL_*
SESSION, USER = -3, -4  # KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING
description = sys.argv[1].encode()
seen = {}

def call(name, *args):
    ctypes.set_errno(0)
    result = libc.syscall(*args)
    seen[name] = result if result >= 0 else errno.errorcode[ctypes.get_errno()]
    return result

buffer = ctypes.create_string_buffer(4096)
call("describe_session", KEYCTL, DESCRIBE, ctypes.c_long(SESSION), buffer, 4096)
call("describe_user", KEYCTL, DESCRIBE, ctypes.c_long(USER), buffer, 4096)
found = call("search", KEYCTL, SEARCH, ctypes.c_long(SESSION), b"user", description, 0)
if found > 0:
    size = call("read", KEYCTL, READ, ctypes.c_long(found), buffer, 4096)
    seen["payload"] = buffer.raw[:size].decode() if size >= 0 else None
call("request_key", REQUEST_KEY, b"user", description, None, 0)
call("add_key", ADD_KEY, b"user", b"planted", b"x", 1, ctypes.c_long(SESSION))
call("join", KEYCTL, JOIN, None)

if platform.machine() == "x86_64":
    # keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) through the other two ABIs, from machine code:
    # i386's `int 0x80` (eax 288) and x32's `syscall` (rax 0x40000000 | 250). Raw results: -errno on failure.
    def run(code):
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        return ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    i386 = (b"\x53\xb8" + struct.pack("<I", 288) + b"\xbb" + struct.pack("<I", GET_ID) + b"\xb9"
            + struct.pack("<i", SESSION) + b"\x31\xd2\xcd\x80\x5b\xc3")  # push rbx ... int 0x80; pop rbx; ret
    x32 = (b"\xb8" + struct.pack("<I", 0x40000000 | 250) + b"\xbf" + struct.pack("<I", GET_ID) + b"\xbe"
           + struct.pack("<i", SESSION) + b"\x31\xd2\x0f\x05\xc3")  # ... syscall; ret
    for name, code in (("i386", i386), ("x32", x32)):
        # In a child: a kernel without the ABI may answer with a signal (no int 0x80 without IA32 emulation).
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(writer, str(run(code)).encode())
            os._exit(0)
        os.close(writer)
        said = os.read(reader, 64)
        status = os.waitpid(pid, 0)[1]
        result = int(said) if said else None
        if result is None:
            seen[name] = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"status {status}"
        else:
            seen[name] = result if result >= 0 else errno.errorcode.get(-result, result)
print(json.dumps(seen))
"""


def libc_syscall(*args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(*args))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


def need_filter() -> None:
    """Skip unless bwrap is on PATH and this machine has a keyring filter."""
    need_tools("bwrap")
    if seccomp.program() is None or platform.machine() not in SYSCALLS:
        pytest.skip(f"no keyring filter for {platform.machine()}")


@pytest.fixture
def key() -> Iterator[tuple[str, str]]:
    """A key (description, payload) in a session keyring of this process's own, put there with the real calls."""
    need_filter()
    numbers = SYSCALLS[platform.machine()]
    try:
        libc_syscall(numbers["keyctl"], KEYCTL_JOIN_SESSION_KEYRING, None)
    except OSError as error:
        pytest.skip(f"this process cannot make a session keyring: {error}")
    description, payload = f"eukhe-test-{secrets.token_hex(4)}", secrets.token_hex(16)
    data = payload.encode()
    key_id = libc_syscall(
        numbers["add_key"], b"user", description.encode(), data, len(data), ctypes.c_long(KEY_SPEC_SESSION_KEYRING)
    )
    try:
        yield description, payload
    finally:
        libc_syscall(numbers["keyctl"], KEYCTL_INVALIDATE, ctypes.c_long(key_id))


def bwrap_options() -> list[str]:
    """The probe's namespaces and mounts (every launch's), without the `-- true`."""
    return list(bwrap.PROBE_FLAGS[: bwrap.PROBE_FLAGS.index("--")])


def run_confined(options: Sequence[str], command: Sequence[str], *, filtered: bool) -> subprocess.CompletedProcess[str]:
    """`command` under bwrap with `options`, with the keyring filter (as a launch wires it) or without."""
    fragment, fd = seccomp.seccomp_args() if filtered else ((), None)
    try:
        return subprocess.run(
            [bwrap.available().path, *options, *fragment, "--", *command],
            pass_fds=() if fd is None else (fd,),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        if fd is not None:
            os.close(fd)


def read_keys(options: Sequence[str], description: str, *, filtered: bool) -> dict[str, object]:
    done = run_confined(options, [sys.executable, "-c", READER, description], filtered=filtered)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert isinstance(seen, dict)
    return seen


def test_without_the_filter_a_confined_command_reads_the_session_key(key: tuple[str, str]) -> None:
    """What the filter closes: the same command, unfiltered, reads the key and the keyrings."""
    description, payload = key
    seen = read_keys(bwrap_options(), description, filtered=False)
    assert seen["payload"] == payload
    assert isinstance(seen["describe_session"], int) and isinstance(seen["describe_user"], int)
    if platform.machine() == "x86_64" and not isinstance(seen["i386"], int):
        pytest.skip(f"this kernel takes no int 0x80 calls ({seen['i386']}): only the 64-bit calls were read")
    if platform.machine() == "x86_64":
        assert seen["i386"] > 0  # type: ignore[operator]  # int 0x80 reaches keyctl too


def test_the_filter_refuses_every_keyring_call_with_eperm(key: tuple[str, str]) -> None:
    description, _ = key
    seen = read_keys(bwrap_options(), description, filtered=True)
    assert "payload" not in seen, seen
    for name in ("describe_session", "describe_user", "search", "request_key", "add_key", "join"):
        assert seen[name] == "EPERM", (name, seen)
    if platform.machine() == "x86_64":
        without = read_keys(bwrap_options(), description, filtered=False)["i386"]
        # Not a way around: int 0x80's numbers are refused (unless this kernel takes no int 0x80 at all).
        assert seen["i386"] == ("EPERM" if isinstance(without, int) else without), seen
        assert seen["x32"] == "EPERM", seen  # ENOSYS without the filter where the kernel has no x32


def test_the_filter_holds_under_a_sessions_own_bwrap_plan(key: tuple[str, str], tmp_path: Path) -> None:
    """A session's full plan (`Confinement.wrap`) with the fragment before its `--`, as the launch code wires it."""
    description, payload = key
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    confinement = Confinement(SandboxPolicy(), cwd=cwd, session_dir=tmp_path / "session")
    try:
        argv = confinement.wrap([sys.executable, "-c", READER, description])
    finally:
        confinement.close()  # its groups and its tmpfs: the plan is all this test needs
    program = after_prelude(argv)  # the limits' prelude (joining the groups) is not bwrap's: left out here
    split = argv.index("--", program)
    options = argv[program + 1 : split]
    assert read_keys(options, description, filtered=False)["payload"] == payload
    seen = read_keys(options, description, filtered=True)
    assert seen["search"] == "EPERM" and "payload" not in seen, seen


def test_ordinary_work_runs_under_the_filter() -> None:
    need_filter()
    for command in (["sh", "-c", "echo shell; ls / >/dev/null"], [sys.executable, "-c", "import ssl; print(2 * 21)"]):
        done = run_confined(bwrap_options(), command, filtered=True)
        assert done.returncode == 0, done.stderr
    assert run_confined(bwrap_options(), ["sh", "-c", "echo shell"], filtered=True).stdout == "shell\n"
    git = tool("git")
    if git is None:
        pytest.skip("needs git (installed by .ci/run) for the last check")
    done = run_confined(bwrap_options(), [git, "--version"], filtered=True)
    assert done.returncode == 0 and done.stdout.startswith("git version"), done


def test_bwrap_closes_the_filters_fd_before_the_command() -> None:
    """The fd reaches bwrap only: the command it runs holds no descriptor beyond 0, 1 and 2."""
    need_filter()
    script = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    done = run_confined(bwrap_options(), [sys.executable, "-c", script], filtered=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[:3] == [0, 1, 2] and len(json.loads(done.stdout)) == 4  # + listdir's own


def test_the_probe_loads_the_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter the kernel refuses fails the probe: the probe runs bwrap with it, as every launch will."""
    need_filter()
    path = bwrap.available().path
    assert isinstance(bwrap.probe(path), bwrap.Bubblewrap)
    monkeypatch.setattr(seccomp, "program", lambda: b"\xff\xff\x00\x00\x00\x00\x00\x00")  # an opcode BPF lacks
    monkeypatch.setattr(bwrap, "_probed", {})
    with pytest.raises(bwrap.SandboxUnavailableError, match="seccomp") as refused:
        bwrap.probe(path)
    assert "CONFIG_SECCOMP_FILTER" in str(refused.value)


def test_a_sessions_bash_job_and_cell_run_under_the_filter(key: tuple[str, str]) -> None:
    """The launch code wires the filter: a confined session's bash job, and a process its kernel starts, are
    refused the key that the test process itself holds."""
    description, payload = key
    work = Path(tempfile.mkdtemp(prefix="eukhe-keyring-", dir="/var/tmp"))  # the sandbox hides the host's /tmp
    (work / "reader.py").write_text(READER)

    async def scenario() -> tuple[dict[str, object], dict[str, object]]:
        session = await Session.create(work, root=work / ".sessions")
        try:
            ran = await session.execute_bash_and_wait(f"{sys.executable} reader.py {description}", budget_ms=60_000)
            assert isinstance(ran, Settled) and ran.exit_code == 0, ran
            code = (
                "import subprocess, sys\n"
                f"subprocess.run([sys.executable, 'reader.py', {description!r}], capture_output=True, text=True,"
                " check=True).stdout"
            )
            celled = await session.ipython(code, budget_ms=60_000)
            assert isinstance(celled, Settled) and celled.error is None, celled
            assert celled.result is not None
            return json.loads(ran.output.text), json.loads(ast.literal_eval(celled.result))
        finally:
            await session.close()

    try:
        for seen in asyncio.run(scenario()):
            assert "payload" not in seen and payload not in json.dumps(seen), seen
            assert seen["search"] == "EPERM" and seen["describe_session"] == "EPERM", seen
    finally:
        shutil.rmtree(work, ignore_errors=True)
