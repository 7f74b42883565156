"""A classic-BPF interpreter for the keyring filter's laws: it runs a program's bytes as the kernel's seccomp would,
for the instructions the filter uses (load an absolute word, jump if equal to a constant, return a constant), and
refuses anything else: an unknown opcode, a load outside `seccomp_data`, a jump out of the program, a run off its
end. Written from the kernel's definitions (include/uapi/linux/filter.h, bpf_common.h, seccomp.h), not from
`eukhe.core.seccomp`."""

from __future__ import annotations

import struct

LOAD_WORD_ABSOLUTE = 0x20  # BPF_LD | BPF_W | BPF_ABS
JUMP_IF_EQUAL_CONSTANT = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
RETURN_CONSTANT = 0x06  # BPF_RET | BPF_K
SECCOMP_DATA_SIZE = 64  # struct seccomp_data: int nr, __u32 arch, __u64 instruction_pointer, __u64 args[6]
MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS


class BadProgramError(AssertionError):
    """A program the kernel would refuse, or one this interpreter does not know."""


def decode(program: bytes) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) per `struct sock_filter`, little-endian (both machines the filter knows are)."""
    if not program or len(program) % 8 or len(program) // 8 > MAX_INSTRUCTIONS:
        raise BadProgramError(f"a program of {len(program)} bytes")
    return [struct.unpack_from("<HBBI", program, offset) for offset in range(0, len(program), 8)]


def run(program: bytes, nr: int, arch: int) -> int:
    """The filter's answer to a call numbered `nr` (as the 32-bit word the kernel stores) from ABI `arch`."""
    data = struct.pack("<II", nr & 0xFFFFFFFF, arch) + bytes(SECCOMP_DATA_SIZE - 8)
    code = decode(program)
    accumulator = 0
    pc = 0
    while True:
        if not 0 <= pc < len(code):
            raise BadProgramError(f"pc {pc} is outside a program of {len(code)} instructions")
        op, jt, jf, k = code[pc]
        if op == LOAD_WORD_ABSOLUTE:
            if k % 4 or k + 4 > SECCOMP_DATA_SIZE:
                raise BadProgramError(f"a load at offset {k}")
            (accumulator,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif op == JUMP_IF_EQUAL_CONSTANT:
            pc += 1 + (jt if accumulator == k else jf)
        elif op == RETURN_CONSTANT:
            return k
        else:
            raise BadProgramError(f"opcode {op:#x} at {pc}")


def check(program: bytes) -> None:
    """What the kernel checks before it takes a classic program (net/core/filter.c, `bpf_check_classic`), for
    these opcodes: every jump lands inside the program, and the last instruction returns."""
    code = decode(program)
    for pc, (op, jt, jf, _k) in enumerate(code):
        if op not in (LOAD_WORD_ABSOLUTE, JUMP_IF_EQUAL_CONSTANT, RETURN_CONSTANT):
            raise BadProgramError(f"opcode {op:#x} at {pc}")
        if op == JUMP_IF_EQUAL_CONSTANT and pc + 1 + max(jt, jf) >= len(code):
            raise BadProgramError(f"the jump at {pc} leaves the program")
    if code[-1][0] != RETURN_CONSTANT:
        raise BadProgramError("the last instruction does not return")
