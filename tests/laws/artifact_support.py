"""The closed artifact as the cap's laws and the shell's tests read it: the output's head, one marker line with
the exact counts, the output's tail (eukhe.core.artifact)."""

from __future__ import annotations

import re

from eukhe.core import artifact as core

MARKER = re.compile(
    rb"^\n?\[eukhe: artifact_max_bytes left out (?P<dropped>\d+) bytes \((?P<newlines>\d+) newlines\) here, "
    rb"of (?P<total>\d+); above: the first (?P<head>\d+) bytes, below: the last (?P<tail>\d+)\]\n$"
)


def check_closed(output: bytes, cap: int, closed: bytes) -> None:
    """`closed` is what an artifact under `cap` keeps of `output`: all of it, or head, exact marker, tail."""
    kept = core.kept(core.shape_of(cap), len(output))
    if not kept.partial:
        assert closed == output
        return
    assert len(closed) <= cap
    head, tail = closed[: kept.head], closed[len(closed) - kept.tail :]
    assert head == output[: kept.head] and tail == output[len(output) - kept.tail :]
    found = MARKER.match(closed[kept.head : len(closed) - kept.tail])
    assert found is not None, closed[kept.head : len(closed) - kept.tail]
    assert found.group(0).startswith(b"\n") == (not output[: kept.head].endswith(b"\n"))
    middle = output[kept.head : len(output) - kept.tail]
    assert int(found["dropped"]) == len(middle) == kept.dropped
    assert int(found["newlines"]) == middle.count(b"\n")
    assert (int(found["total"]), int(found["head"]), int(found["tail"])) == (len(output), kept.head, kept.tail)
