"""The pid 1 of a sandbox whose network is an allowlist (docs/sandbox.md "The network allowlist"); stdlib only.

bwrap runs it as the sandbox's pid 1 (`--as-pid-1`), in place of its own init, with the interpreter the host runs
(`python -I -S -c PROGRAM PORT SOCKET -- COMMAND...`): it does what bwrap's init does (starts the command first, so
that it is pid 2; reaps every orphan; exits with the command's status once it ends, which ends the namespace), and
one thing more: it listens on 127.0.0.1:PORT of the sandbox's own loopback and hands every connection it accepts,
as a descriptor, to eukhe's proxy on the host over the Unix socket SOCKET (SCM_RIGHTS). It reads and writes none of
the connection's bytes: the proxy reads the request from the descriptor itself. Being a thread of pid 1, it is no
process of the job's (`eukhe.core.jobleft` never counts pid 1).

A signal the job sends it is not heard: pid 1 of a namespace takes only signals it handles, and it handles none
(SIGINT's handler, Python's own, is taken away first).
"""

import os
import signal
import socket
import sys
import threading

RESET = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python changes for itself: the command gets them at their default."""


def hand_over(listener: socket.socket, path: str) -> None:
    """Accept connections and send each one's descriptor to the proxy; one that cannot be sent is closed."""
    control = None
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        with conn:
            for _ in range(2):  # a proxy that restarted is reached again once
                try:
                    if control is None:
                        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        control.connect(path)
                    socket.send_fds(control, [b"c"], [conn.fileno()])
                    break
                except OSError:
                    if control is not None:
                        control.close()
                    control = None


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    port, path, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        sys.stderr.write("eukhe netinit: usage: PORT SOCKET -- COMMAND...\n")
        return 2
    listener = None
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)  # from now on a connection waits in the backlog until the thread takes it
    except OSError as error:
        sys.stderr.write(f"eukhe: the sandbox's proxy port could not be opened: {error}\n")
        listener = None
    try:  # the command first, before any thread: it is pid 2, as under bwrap's own init (threads take pids too)
        child = os.posix_spawnp(command[0], command, os.environ, setsigdef=RESET)
    except OSError as error:
        sys.stderr.write(f"bwrap: execvp {command[0]}: {error.strerror}\n")
        return 1
    if listener is not None:
        threading.Thread(target=hand_over, args=(listener, path), daemon=True).start()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
