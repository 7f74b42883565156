"""Jobs (spec S2 "Jobs"): work that runs long, with one bounded output, one end and a kill through its owner.

The decisions are the pure model's (`eukhe.core.job`); this package is the shell: `Job`, `JobTable`, the one blocking
wait `wait_until`, the clocks, and user bash (`eukhe.jobs.bash`). The public API is docs/jobs-api.md.
"""

from __future__ import annotations

from eukhe.clock import Cancellable, Clock, MonotonicClock, VirtualClock
from eukhe.core.job import DeadlinePassed, End, EndedInTime, Exited, Killed
from eukhe.jobs.job import CellEnding, Job, JobOwner, JobSpec
from eukhe.jobs.table import JobListener, JobTable, JobTableClosedError, Rewound
from eukhe.jobs.wait import CallCancelledError, settle_or_detach, wait_until

__all__ = [
    "CallCancelledError",
    "Cancellable",
    "CellEnding",
    "Clock",
    "DeadlinePassed",
    "End",
    "EndedInTime",
    "Exited",
    "Job",
    "JobListener",
    "JobOwner",
    "JobSpec",
    "JobTable",
    "JobTableClosedError",
    "Killed",
    "MonotonicClock",
    "Rewound",
    "VirtualClock",
    "settle_or_detach",
    "wait_until",
]
