"""The Local transport's launch (S3 "Where the sandbox runs" 1, 7): one place names the argv and environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from eukhe.kernel.launch import OWNER_PID_VARIABLE, kernel_launch


def test_the_local_kernel_runs_the_stub_with_the_hosts_environment_and_owner_pid() -> None:
    launch = kernel_launch()
    assert launch.argv == (sys.executable, "-m", "eukhe_kernel")
    assert launch.env[OWNER_PID_VARIABLE] == str(os.getpid())
    for key, value in os.environ.items():
        if key not in (OWNER_PID_VARIABLE, "PYTHONPATH"):
            assert launch.env[key] == value
    first = Path(launch.env["PYTHONPATH"].split(os.pathsep)[0])
    assert (first / "eukhe_kernel" / "__main__.py").is_file()
