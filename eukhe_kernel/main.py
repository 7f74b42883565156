"""The kernel stub's entry (`python -m eukhe_kernel`, and a wrapped kernel's boot program): a `Kernel` with the
cell API in its namespace, run until shutdown.

The stub's modules import one way: `protocol`, `frames`, `calls`, `pictures` <- `runtime` <- `api` <- `rlm` <- this
module.
"""

from __future__ import annotations

import sys

from eukhe_kernel import api, rlm
from eukhe_kernel.runtime import Kernel

CELL_NAMES = {"display": api.display, "bash": api.bash, "bash_background": api.bash_background, "rlm": rlm}
"""What every cell's namespace holds from the start."""


def main() -> None:
    """Run the kernel stub on this process's stdin and stdout."""
    sys.modules["rlm"] = rlm  # `import rlm` in a cell finds the stub's module
    Kernel(dict(CELL_NAMES)).run()
