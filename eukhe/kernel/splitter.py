"""The host's reading of kernel stdout (S3 "The protocol" 1-3): the one line splitter, then the gate, per frame."""

from __future__ import annotations

from eukhe.core.gate import DEFAULT_LIMITS, STREAM_EVENTS, Event, GateLimits, GateState, ProtocolFault, Verdict, admit
from eukhe.core.lines import LineSplitter


class FrameReader:
    """The host's reading of kernel stdout: the splitter, then the gate on every piece, in order (sans I/O).

    After a `ProtocolFault` the stream is no longer trusted for the protocol: the fault is the last verdict that
    can act, and later frames are read only to salvage the output of the cells in flight (stdout, stderr and
    display events) until the kernel is gone; everything else is dropped.
    """

    def __init__(self, served: frozenset[str], limits: GateLimits = DEFAULT_LIMITS) -> None:
        self.served = served
        self.limits = limits
        self.splitter = LineSplitter(limits.line, limits.head)
        self.state = GateState()
        self.faulted = False

    def feed(self, data: bytes) -> list[Verdict]:
        """The verdicts on the frames `data` completes, in order (after a fault: output events only)."""
        verdicts: list[Verdict] = []
        for piece in self.splitter.feed(data):
            state, verdict = admit(self.state, piece, self.served, self.limits)
            if self.faulted:
                if isinstance(verdict, Event) and verdict.event in STREAM_EVENTS:
                    verdicts.append(verdict)
                continue
            self.state = state
            verdicts.append(verdict)
            if isinstance(verdict, ProtocolFault):
                self.faulted = True
        return verdicts
