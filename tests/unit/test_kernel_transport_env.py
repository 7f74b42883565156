"""The wrapped kernel's environment (S3 "Where the sandbox runs"): its own entries, the host variables
`env` names, and the host-path entries mapped into the sandbox or left out with a diagnostic."""

from __future__ import annotations

from eukhe.kernel.transport import OWNER_VARIABLE, kernel_environment
from eukhe.records.settings import KernelTransport, Mount

TRANSPORT = KernelTransport(
    argv_prefix=["bwrap"], path_map=[Mount(host="/home/u/proj", sandbox="/work")], env=["LANG", "MISSING"]
)


def test_a_host_path_under_a_mount_is_mapped_and_one_outside_every_mount_is_left_out_with_a_diagnostic() -> None:
    host = {
        "LANG": "C.UTF-8",
        "EUKHE_CODING_AGENT_DIR": "/home/u/proj/.agent",
        "EUKHE_BASH_SHELL": "/usr/local/bin/bash",
        "SECRET": "not named",
    }
    env, diagnostics = kernel_environment(TRANSPORT, host)
    assert env == {OWNER_VARIABLE: "stdin", "LANG": "C.UTF-8", "EUKHE_CODING_AGENT_DIR": "/work/.agent"}
    assert diagnostics == [
        "kernel_transport.env names MISSING, which the host does not set: left out",
        "EUKHE_BASH_SHELL=/usr/local/bin/bash is a host path outside every mount: left out of the kernel's env",
    ]


def test_a_named_variable_holding_an_unmapped_host_path_is_left_out_too() -> None:
    transport = KernelTransport(argv_prefix=["bwrap"], path_map=[], env=["EUKHE_CODING_AGENT_DIR"])
    env, diagnostics = kernel_environment(transport, {"EUKHE_CODING_AGENT_DIR": "/home/u/.agent"})
    assert "EUKHE_CODING_AGENT_DIR" not in env
    assert len(diagnostics) == 1 and "outside every mount" in diagnostics[0]
