"""A stand-in for docker, podman, kubectl and ssh in the transport recipes' tests: it records the argv it gets (one
JSON line in $EUKHE_STANDIN_LOG), then runs what follows its own flags, as the real tool would in its sandbox. The
sandbox is emulated with bubblewrap: the workspace mount (`-v HOST:SANDBOX` for `docker run`, else
$EUKHE_STANDIN_MOUNT) appears at its sandbox path, the rest of the system read-only."""

from __future__ import annotations

import json
import os
import sys

OWN_FLAGS_WITH_VALUE = {"-w", "-e", "--env", "--name", "-u", "--user", "-c", "-n", "--namespace", "-p", "-o", "-i"}


def command_of(tool: str, argv: list[str]) -> tuple[list[str], str | None]:
    """The command the tool runs, and the `-v HOST:SANDBOX` volume of a `docker run`."""
    if tool == "kubectl":
        return argv[argv.index("--") + 1 :], None
    if tool == "ssh":
        rest = argv
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in {"-i", "-p", "-o", "-l"} else rest[1:]
        return ["sh", "-c", " ".join(rest[1:])], None  # rest[0] is the host
    verb, rest = argv[0], argv[1:]
    volume = None
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in {"-v", "--volume"}:
            volume = rest.pop(0)
        elif flag in {"-w", "-e", "--env", "--name", "-u", "--user"}:
            rest.pop(0)
    assert verb in {"exec", "run"}, argv
    return rest[1:], volume  # rest[0] is the container or the image


def main() -> None:
    tool, argv = sys.argv[1], sys.argv[2:]
    with open(os.environ["EUKHE_STANDIN_LOG"], "a") as log:
        log.write(json.dumps([tool, *argv]) + "\n")
    command, volume = command_of(tool, argv)
    host, sandbox = (volume or os.environ["EUKHE_STANDIN_MOUNT"]).split(":")
    sandboxed = ["bwrap", "--ro-bind", "/", "/"]
    if not os.path.exists(sandbox):  # a mount point bwrap cannot make on the read-only root: a tmpfs above it
        sandboxed += ["--tmpfs", os.path.dirname(sandbox)]
    sandboxed += ["--bind", host, sandbox, "--dev", "/dev", "--proc", "/proc"]
    sandboxed += ["--tmpfs", "/tmp", "--die-with-parent", *command]
    os.execvp("bwrap", sandboxed)


if __name__ == "__main__":
    main()
