"""The keyring filter's constants agree with this machine's kernel headers, where they are installed (linux-libc-dev:
/usr/include/linux and the machine's asm directory); a header that is not there skips its check, naming it."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from eukhe.core import seccomp

INCLUDE = Path("/usr/include")
ASM = INCLUDE / f"{platform.machine()}-linux-gnu" / "asm"
DEFINE = re.compile(r"^#define\s+(\w+)\s+(.+?)\s*(?:/\*.*)?$", re.MULTILINE)


def defines(path: Path) -> dict[str, str]:
    if not path.exists():
        pytest.skip(f"needs {path} (linux-libc-dev)")
    return dict(DEFINE.findall(path.read_text()))


def number(text: str, names: dict[str, str]) -> int:
    """A define's value: a number, a name of another define, or (A|B|...) / (A + B) of them."""
    parts = re.split(r"[|+]", text.strip("()U "))
    total = 0
    for raw in parts:
        part = raw.strip().strip("()").rstrip("U")
        value = int(part, 0) if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", part) else number(names[part], names)
        total = total | value if "|" in text else total + value
    return total


def test_seccomp_answers_and_offsets_are_the_kernels() -> None:
    names = defines(INCLUDE / "linux" / "seccomp.h")
    assert number(names["SECCOMP_RET_KILL_PROCESS"], names) == seccomp.SECCOMP_RET_KILL_PROCESS
    assert number(names["SECCOMP_RET_ERRNO"], names) == seccomp.SECCOMP_RET_ERRNO
    assert number(names["SECCOMP_RET_ALLOW"], names) == seccomp.SECCOMP_RET_ALLOW
    common = defines(INCLUDE / "linux" / "bpf_common.h")
    for name in ("BPF_LD", "BPF_JMP", "BPF_RET", "BPF_W", "BPF_ABS", "BPF_JEQ", "BPF_K"):
        assert number(common[name], common) == getattr(seccomp, name), name


def test_audit_arches_are_the_kernels() -> None:
    names = {**defines(INCLUDE / "linux" / "elf-em.h"), **defines(INCLUDE / "linux" / "audit.h")}
    for name in ("AUDIT_ARCH_X86_64", "AUDIT_ARCH_I386", "AUDIT_ARCH_AARCH64", "AUDIT_ARCH_ARM"):
        assert number(names[name], names) == getattr(seccomp, name), name


def test_keyring_call_numbers_are_this_machines() -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the x86_64, x32 and i386 headers are checked on x86_64")
    own = defines(ASM / "unistd_64.h")
    compat = defines(ASM / "unistd_32.h")
    x32 = {**defines(ASM / "unistd.h"), **defines(ASM / "unistd_x32.h")}
    calls = ("__NR_add_key", "__NR_request_key", "__NR_keyctl")
    assert tuple(number(own[name], own) for name in calls) == seccomp.X86_64.key_calls
    assert tuple(number(compat[name], compat) for name in calls) == seccomp.I386.key_calls
    assert tuple(number(x32[name], x32) for name in calls) == seccomp.X32.key_calls
