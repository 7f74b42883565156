"""A session's cells import from its working directory's `.venv` too (the setting `workspace_venv`): the shell of
`eukhe.core.cell_packages`.

Before each cell the session reads what `<cwd>/.venv` holds now (directory names and one modification time, no
file's content: one `stat` when the kernel's site-packages is there) and the core says which directory the kernel
adds to its `sys.path` and what the answer says; a cell's `ModuleNotFoundError` ends with the core's hint. The
kernel's variables stay: nothing restarts it. Only a Local kernel (confined or not) is told, at the host's path,
which is the path it sees too; a wrapped kernel runs on the user's own environment.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from eukhe.core.cell_packages import (
    NOTHING_TOLD,
    WORKSPACE_VENV,
    VenvFacts,
    VenvSetting,
    is_lib,
    missing_module_hint,
    site_for_cell,
)


def venv_facts(path: str, lib: str) -> VenvFacts:
    """What `path` (a `.venv`) holds for a kernel whose Python's venv directory is `lib`: its own site-packages
    alone when it is there (the others do not matter then), else every other Python's it has."""
    own = os.path.join(path, "lib", lib, "site-packages")
    try:
        found = os.stat(own)
    except OSError:
        pass
    else:
        if stat.S_ISDIR(found.st_mode):
            return VenvFacts(path, exists=True, libs=(lib,), stamp=found.st_mtime_ns)
    if not os.path.isdir(path):
        return VenvFacts(path, exists=False)
    try:
        names = os.listdir(os.path.join(path, "lib"))
    except OSError:
        names = []
    libs = sorted(
        name for name in names if is_lib(name) and os.path.isdir(os.path.join(path, "lib", name, "site-packages"))
    )
    return VenvFacts(path, exists=True, libs=tuple(libs))


class WorkspaceVenv:
    """The `.venv` of a session's working directory, as its cells see it: what each kernel was told, and the
    notices the session already gave (each is said once a session)."""

    def __init__(self, cwd: str | os.PathLike[str], setting: VenvSetting) -> None:
        self.path = str(Path(cwd) / WORKSPACE_VENV)
        self.setting = setting
        self._kernel = 0
        self._told = NOTHING_TOLD
        self._said: set[str] = set()

    def before_cell(self, kernel: int, lib: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """For the next cell on kernel number `kernel`: the directories it adds to `sys.path`, the answer's notices."""
        if kernel != self._kernel:  # a new kernel was told nothing yet
            self._kernel, self._told = kernel, NOTHING_TOLD
        step = site_for_cell(self.setting, self._facts(lib), lib, self._told)
        self._told = step.told
        if step.notice is None or step.notice in self._said:
            return step.add, ()
        self._said.add(step.notice)
        return step.add, (step.notice,)

    def hint(self, ename: str, evalue: str, lib: str) -> str | None:
        """The line a cell's error ends with (a missing module: where to install it), or None."""
        if ename != "ModuleNotFoundError":
            return None  # read nothing for any other error
        return missing_module_hint(
            ename,
            evalue,
            setting=self.setting,
            venv=self._facts(lib),
            lib=lib,
            stdlib=sys.stdlib_module_names,
        )

    def _facts(self, lib: str) -> VenvFacts:
        """The venv's facts now; none are read when the setting is off."""
        return VenvFacts(self.path, exists=False) if self.setting is VenvSetting.OFF else venv_facts(self.path, lib)
