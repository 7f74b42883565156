"""`rlm`: what a cell can ask of the host (in every cell's namespace; `import rlm` works too).

- `rlm.fs`: the five file tools (`read`, `write`, `edit`, `grep`, `glob`), served by the host in the session's working
  directory, answers bounded by the session's output limits; a refusal raises `rlm.FsError`.
- `rlm.spawn`, `rlm.list_subagents`, `rlm.collect`, `rlm.delete`: children, each a session with its own kernel, in
  this directory or an isolated copy of it handed back at its end; `rlm.answer` gives a child's answer.
- `rlm.skills()`: the Agent Skills offered for the session's working directory (docs/skills.md).
- `@rlm.remote` (or `@rlm.remote(name=...)`): offer a function to the host as tool `remote/<name>`, with the JSON
  Schema of its keyword arguments (docs/remote.md).

Standard library only: this package runs in any sandbox's Python (docs/kernel-protocol.md); `rlm.remote` imports
msgspec when it is used, and says so when the kernel's Python has none.
"""

from __future__ import annotations

from eukhe_kernel.rlm import fs
from eukhe_kernel.rlm.answers import Answer, FsError
from eukhe_kernel.rlm.children import answer, collect, delete, list_subagents, spawn
from eukhe_kernel.rlm.remote import remote
from eukhe_kernel.rlm.skills import skills

__all__ = ["Answer", "FsError", "answer", "collect", "delete", "fs", "list_subagents", "remote", "skills", "spawn"]
