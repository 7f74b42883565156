"""Laws of the keyring filter (eukhe.core.seccomp, docs/sandbox.md), run by a classic-BPF
interpreter (seccomp_support) over the program's bytes: for each machine, exactly the three keyring calls of each of
its ABIs are refused with EPERM, every other call of those ABIs is allowed, and a call from any other ABI kills the
process. Checked exhaustively over numbers 0..1023 of every ABI (x32's with its bit set) and with Hypothesis over
every 32-bit number and arch. The numbers here are written from the kernel's tables, not read from the module."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import seccomp
from tests.laws.seccomp_support import check, run

ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
REFUSE = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS
X32 = 0x40000000  # __X32_SYSCALL_BIT

REFUSED = {
    "x86_64": {
        # AUDIT_ARCH_X86_64: add_key, request_key, keyctl (syscall_64.tbl), and the same through x32.
        0xC000003E: {248, 249, 250, X32 | 248, X32 | 249, X32 | 250},
        0x40000003: {286, 287, 288},  # AUDIT_ARCH_I386 (syscall_32.tbl): int 0x80
    },
    "aarch64": {
        0xC00000B7: {217, 218, 219},  # AUDIT_ARCH_AARCH64 (asm-generic/unistd.h)
        0x40000028: {309, 310, 311},  # AUDIT_ARCH_ARM (arm's syscall.tbl, EABI): AArch32 processes
    },
}
"""Per machine, per arch value the kernel can report on it, the numbers refused."""

OTHER_ARCHES = [
    0xC00000B7,  # aarch64 on x86_64 (and x86_64 on aarch64, below)
    0xC000003E,
    0x40000003,
    0x40000028,
    0xC00000F3,  # riscv64
    0xC0000015,  # ppc64le
    0x80000016,  # s390x
    0x0000003E,  # EM_X86_64 without its flags
    0x4000003E,  # ... with LE only
    0x8000003E,  # ... with 64BIT only
    0,
    0xFFFFFFFF,
]
"""Arch values to try as foreign ones (each counts as foreign only on a machine whose table lacks it)."""

SMALL_NUMBERS = [*range(1024), *(X32 | n for n in range(1024)), 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xBFFFFFFF]
"""Every number 0..1023 of each ABI, x32's too, and the edges of the 32-bit word."""


def program(machine: str) -> bytes:
    made = seccomp.keyring_filter(machine)
    assert made is not None
    return made


@pytest.mark.parametrize("machine", sorted(REFUSED))
def test_keyring_filter_refuses_exactly_the_three_calls_small_scope(machine: str) -> None:
    code = program(machine)
    for arch, refused in REFUSED[machine].items():
        for number in SMALL_NUMBERS:
            expected = REFUSE if number in refused else ALLOW
            assert run(code, number, arch) == expected, (machine, hex(arch), hex(number))


@pytest.mark.parametrize("machine", sorted(REFUSED))
def test_keyring_filter_kills_a_call_from_a_foreign_arch_small_scope(machine: str) -> None:
    code = program(machine)
    foreign = [arch for arch in OTHER_ARCHES if arch not in REFUSED[machine]]
    for arch, number in itertools.product(foreign, SMALL_NUMBERS):
        assert run(code, number, arch) == KILL, (machine, hex(arch), hex(number))


@given(st.sampled_from(sorted(REFUSED)), st.integers(0, 0xFFFFFFFF), st.integers(0, 0xFFFFFFFF))
def test_keyring_filter_answers_every_call(machine: str, arch: int, number: int) -> None:
    """Any arch, any number: refused exactly for the three calls of an ABI of the machine, allowed for every other
    call of those ABIs, killed from any other arch."""
    code = program(machine)
    refused = REFUSED[machine].get(arch)
    expected = KILL if refused is None else REFUSE if number in refused else ALLOW
    assert run(code, number, arch) == expected


@given(st.sampled_from(sorted(REFUSED)), st.sampled_from(sorted({a for t in REFUSED.values() for a in t})))
def test_keyring_filter_refuses_each_of_its_abis_calls(machine: str, arch: int) -> None:
    code = program(machine)
    for number in REFUSED[machine].get(arch, ()):
        assert run(code, number, arch) == REFUSE


@pytest.mark.parametrize("machine", sorted(REFUSED))
def test_keyring_filter_is_a_program_the_kernel_takes(machine: str) -> None:
    """Every jump lands inside, the last instruction returns, at most BPF_MAXINSNS instructions of 8 bytes."""
    check(program(machine))


@pytest.mark.parametrize("machine", ["ppc64le", "riscv64", "s390x", "i686", "armv7l", "arm64", "", "X86_64"])
def test_keyring_filter_is_none_for_a_machine_without_a_table(machine: str) -> None:
    assert seccomp.keyring_filter(machine) is None


def test_keyring_filter_tables_name_every_abi_of_each_machine() -> None:
    """The module's tables agree with the kernel's, read independently above (a number or an ABI left out of the
    module also fails the exhaustive law; this names it)."""
    for name, machine in seccomp.MACHINES.items():
        got: dict[int, set[int]] = {}
        for abi in machine.abis:
            got.setdefault(abi.arch, set()).update(abi.key_calls)
        assert got == REFUSED[name]
