"""The seccomp filter a confined launch loads (docs/sandbox.md): a classic-BPF program that
makes the kernel keyring's three calls (`add_key`, `request_key`, `keyctl`) fail with EPERM and allows every other
call, so a confined process cannot read the keyrings of the user who started eukhe (tokens, agent keys, Kerberos
tickets in the session keyring `@s`, and as root the user keyring `@u`).

Theory of operation. The kernel runs the program on every system call with a `struct seccomp_data` (`nr`, the call's
number, at offset 0; `arch`, the calling ABI's AUDIT_ARCH value, at offset 4). A call's number means something only
for its ABI, so the program first reads `arch`:

- an ABI of the machine (`Machine.abis`): the three numbers of that ABI answer `SECCOMP_RET_ERRNO | EPERM`, every
  other number `SECCOMP_RET_ALLOW`. x86_64 has three ABIs: its own, x32 (the same `arch`, numbers with
  `X32_SYSCALL_BIT` set) and i386 (`int 0x80`, AUDIT_ARCH_I386, numbers of its own); aarch64 has its own and
  32-bit ARM (AArch32 EABI processes, AUDIT_ARCH_ARM). Every ABI that can reach the calls is listed, so none is a
  way around the filter.
- any other `arch`: `SECCOMP_RET_KILL_PROCESS`. The kernel reports only the machine's ABIs, so this answer is not
  reached; were it ever, a number could not be read for that ABI, and killing is the answer that cannot leak a key
  (libseccomp's default for an architecture outside a filter, the one Docker's profile uses).

EPERM, not ENOSYS: as in Docker's default profile. The calls exist and are refused, which is what EPERM says;
ENOSYS would claim the kernel was built without keys, and a caller that reads it so takes other paths.

`keyring_filter(machine)` is the one entry: the program's bytes (an array of `struct sock_filter`, 8 bytes each, in
the machine's byte order), which bwrap reads from the fd of `--seccomp FD`; None for a machine not in `MACHINES`.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass

# ---- the kernel's constants ----------------------------------------------------------------------------------------

# include/uapi/linux/bpf_common.h: instruction classes, sizes, modes, operations and sources.
BPF_LD = 0x00
BPF_JMP = 0x05
BPF_RET = 0x06
BPF_W = 0x00
BPF_ABS = 0x20
BPF_JEQ = 0x10
BPF_K = 0x00

# include/uapi/linux/filter.h: BPF_MAXINSNS, the longest classic program the kernel takes.
BPF_MAXINSNS = 4096

# include/uapi/linux/seccomp.h: the filter's answers (the action in the high 16 bits, data in the low 16).
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_DATA = 0x0000FFFF

# include/uapi/linux/seccomp.h, struct seccomp_data: `int nr` at offset 0, `__u32 arch` at offset 4.
SECCOMP_DATA_NR = 0
SECCOMP_DATA_ARCH = 4

# include/uapi/asm-generic/errno-base.h
EPERM = 1

# include/uapi/linux/elf-em.h (EM_*) and include/uapi/linux/audit.h (AUDIT_ARCH_* = EM | flags).
EM_386 = 3
EM_ARM = 40
EM_X86_64 = 62
EM_AARCH64 = 183
AUDIT_ARCH_64BIT = 0x80000000  # __AUDIT_ARCH_64BIT
AUDIT_ARCH_LE = 0x40000000  # __AUDIT_ARCH_LE
AUDIT_ARCH_X86_64 = EM_X86_64 | AUDIT_ARCH_64BIT | AUDIT_ARCH_LE  # 0xC000003E
AUDIT_ARCH_I386 = EM_386 | AUDIT_ARCH_LE  # 0x40000003
AUDIT_ARCH_AARCH64 = EM_AARCH64 | AUDIT_ARCH_64BIT | AUDIT_ARCH_LE  # 0xC00000B7
AUDIT_ARCH_ARM = EM_ARM | AUDIT_ARCH_LE  # 0x40000028

# arch/x86/include/uapi/asm/unistd.h: an x32 call is its number with this bit set.
X32_SYSCALL_BIT = 0x40000000

# The three calls' numbers, per ABI:
# arch/x86/entry/syscalls/syscall_64.tbl (`common`: the x32 ABI's too, with X32_SYSCALL_BIT),
X86_64_KEY_CALLS = (248, 249, 250)  # add_key, request_key, keyctl
# arch/x86/entry/syscalls/syscall_32.tbl,
I386_KEY_CALLS = (286, 287, 288)
# include/uapi/asm-generic/unistd.h (aarch64),
AARCH64_KEY_CALLS = (217, 218, 219)
# arch/arm/tools/syscall.tbl (EABI; arm64's compat ABI: arch/arm64/include/asm/unistd32.h).
ARM_KEY_CALLS = (309, 310, 311)


# ---- the machines ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Abi:
    """One way into the kernel: the `arch` value its calls carry and the numbers of the three calls in it."""

    name: str
    arch: int
    key_calls: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Machine:
    """A machine (as `uname -m` names it): every ABI its kernel takes calls through, and its byte order."""

    name: str
    abis: tuple[Abi, ...]
    byte_order: str = "<"  # struct's code: both machines below are little-endian


X86_64 = Abi("x86_64", AUDIT_ARCH_X86_64, X86_64_KEY_CALLS)
X32 = Abi("x32", AUDIT_ARCH_X86_64, tuple(X32_SYSCALL_BIT | number for number in X86_64_KEY_CALLS))
I386 = Abi("i386", AUDIT_ARCH_I386, I386_KEY_CALLS)
AARCH64 = Abi("aarch64", AUDIT_ARCH_AARCH64, AARCH64_KEY_CALLS)
ARM = Abi("arm", AUDIT_ARCH_ARM, ARM_KEY_CALLS)

MACHINES = {
    "x86_64": Machine("x86_64", (X86_64, X32, I386)),
    "aarch64": Machine("aarch64", (AARCH64, ARM)),
}
"""The machines a filter is made for. Another machine gets none (`keyring_filter` answers None)."""

REFUSED = SECCOMP_RET_ERRNO | EPERM
"""The answer to a keyring call: it fails with EPERM."""


# ---- the program -----------------------------------------------------------------------------------------------


class Op(enum.Enum):
    """The instructions the program is made of (the classic-BPF opcode of each)."""

    LOAD = BPF_LD | BPF_W | BPF_ABS  # A = the 32-bit word at offset k of seccomp_data
    JUMP_IF_EQUAL = BPF_JMP | BPF_JEQ | BPF_K  # pc += 1 + (jt if A == k else jf)
    RETURN = BPF_RET | BPF_K  # the filter's answer is k


@dataclass(frozen=True, slots=True)
class Instruction:
    """One `struct sock_filter`: { __u16 code; __u8 jt; __u8 jf; __u32 k; }."""

    op: Op
    k: int
    jt: int = 0
    jf: int = 0


INSTRUCTION = "HBBI"
"""struct's layout of one `struct sock_filter` (without the byte order): 8 bytes."""


@dataclass(frozen=True, slots=True)
class _Jump:
    """A jump to labels, resolved to offsets once the program is laid out."""

    k: int
    if_equal: str
    otherwise: str


@dataclass(frozen=True, slots=True)
class _Label:
    name: str


def _layout(machine: Machine) -> list[Instruction | _Jump | _Label]:
    """The program with jumps to labels: per arch, a test of `arch`; inside it, one test per refused number."""
    code: list[Instruction | _Jump | _Label] = [Instruction(Op.LOAD, SECCOMP_DATA_ARCH)]
    arches = list(dict.fromkeys(abi.arch for abi in machine.abis))  # x86_64 and x32 share one arch
    for index, arch in enumerate(arches):
        # A holds `arch` here: a block below ends in a return, so only a failed test of `arch` reaches the next.
        code += [_Label(f"arch{index}"), _Jump(arch, f"numbers{index}", f"arch{index + 1}")]
        code += [_Label(f"numbers{index}"), Instruction(Op.LOAD, SECCOMP_DATA_NR)]
        numbers = [number for abi in machine.abis if abi.arch == arch for number in abi.key_calls]
        for position, number in enumerate(numbers):
            code.append(_Jump(number, "refuse", f"number{index}.{position + 1}"))
            code.append(_Label(f"number{index}.{position + 1}"))
        code.append(Instruction(Op.RETURN, SECCOMP_RET_ALLOW))
    code += [_Label(f"arch{len(arches)}"), Instruction(Op.RETURN, SECCOMP_RET_KILL_PROCESS)]
    code += [_Label("refuse"), Instruction(Op.RETURN, REFUSED)]
    return code


def _resolved(code: Sequence[Instruction | _Jump | _Label]) -> tuple[Instruction, ...]:
    """Labels replaced by forward offsets (classic BPF jumps only forward, by at most 255)."""
    at: dict[str, int] = {}
    position = 0
    for item in code:
        if isinstance(item, _Label):
            at[item.name] = position
        else:
            position += 1
    program: list[Instruction] = []
    for item in code:
        if isinstance(item, _Label):
            continue
        if isinstance(item, _Jump):
            here = len(program) + 1
            jt, jf = at[item.if_equal] - here, at[item.otherwise] - here
            assert 0 <= jt <= 0xFF, "a jump past the reach of classic BPF"
            assert 0 <= jf <= 0xFF, "a jump past the reach of classic BPF"
            program.append(Instruction(Op.JUMP_IF_EQUAL, item.k, jt, jf))
        else:
            program.append(item)
    return tuple(program)


def instructions(machine: Machine) -> tuple[Instruction, ...]:
    """The filter's instructions for `machine`."""
    return _resolved(_layout(machine))


def encode(program: Sequence[Instruction], byte_order: str = "<") -> bytes:
    """The program as the kernel reads it: one `struct sock_filter` per instruction, in `byte_order`."""
    layout = struct.Struct(byte_order + INSTRUCTION)
    return b"".join(layout.pack(item.op.value, item.jt, item.jf, item.k) for item in program)


def keyring_filter(machine: str) -> bytes | None:
    """The program's bytes for the machine named `machine` (`uname -m`), or None when it is not in MACHINES."""
    known = MACHINES.get(machine)
    if known is None:
        return None
    return encode(instructions(known), known.byte_order)
