"""The kernel's namespace snapshot (spec S3 "Where the sandbox runs" 6): when the host stops an idle kernel (idle
culling), the kernel pickles its variables to the snapshot file; the session's next kernel reads them back at its
start, so a culled kernel's variables are still there at the next cell.

What is kept: each global whose name does not start with `_` and is not one of the stub's own names (`rlm`, `bash`,
...): a module by its name (the next kernel imports it again: `import numpy as np` stays), any other value pickled on
its own, so one that does not pickle (an open file, a lock) or does not load (an instance of a class a cell defined)
is skipped and named, not the whole snapshot lost. Functions and classes are not kept (a cell defined them: run it
again); they are named too. The file is the kernel's own: the host never reads it, and the next kernel removes it
once read. Only the standard library.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import types
from typing import Any

SNAPSHOT_VARIABLE = "EUKHE_KERNEL_SNAPSHOT"
"""The kernel's path of its session's snapshot file; unset: the kernel takes no snapshot."""

FORMAT = "eukhe-namespace@1"

MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
"""Pickled bytes a snapshot holds at most; what would pass it is skipped (a snapshot must not fill the disk)."""

STUB_NAMES = frozenset({"display", "bash", "bash_background", "rlm"})
"""The stub's own names in a cell's namespace: every kernel has them already."""

_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def save(namespace: dict[str, Any], path: str) -> tuple[list[str], list[str]]:
    """Write the snapshot of `namespace` to `path` (atomically, mode 0600); the names saved and the names skipped."""
    values: dict[str, bytes] = {}
    modules: dict[str, str] = {}
    skipped: list[str] = []
    total = 0
    for name, value in sorted(namespace.items()):
        if name.startswith("_") or name in STUB_NAMES:
            continue
        if isinstance(value, types.ModuleType):
            modules[name] = value.__name__
            continue
        if isinstance(value, _CODE):
            skipped.append(name)
            continue
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # anything a value's __reduce__ raises: that value is skipped
            skipped.append(name)
            continue
        if total + len(data) > MAX_SNAPSHOT_BYTES:
            skipped.append(name)
            continue
        values[name] = data
        total += len(data)
    payload = pickle.dumps({"format": FORMAT, "modules": modules, "values": values}, protocol=pickle.HIGHEST_PROTOCOL)
    partial = path + ".partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(partial, path)
    return sorted([*modules, *values]), skipped


def restore(namespace: dict[str, Any], path: str) -> tuple[list[str], list[str]] | None:
    """Load the snapshot at `path` into `namespace` and remove the file; the names restored and the names that did
    not load. None when there is no snapshot."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    with contextlib.suppress(OSError):  # read once: a later kernel starts from its own predecessor, not this one
        os.unlink(path)
    try:
        payload = pickle.loads(data)
    except Exception:
        return [], ["(the whole snapshot: it does not load)"]
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or not isinstance(payload.get("values"), dict):
        return [], ["(the whole snapshot: not a snapshot of this format)"]
    restored: list[str] = []
    failed: list[str] = []
    for name, module in dict(payload.get("modules") or {}).items():
        try:
            namespace[name] = importlib.import_module(module)
        except Exception:  # not importable here (a module a cell made, a package the new kernel lacks)
            failed.append(name)
            continue
        restored.append(name)
    for name, value in payload["values"].items():
        try:
            namespace[name] = pickle.loads(value)
        except Exception:  # a class or module the value needs is not there in the new kernel
            failed.append(name)
            continue
        restored.append(name)
    return restored, failed
