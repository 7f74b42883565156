"""Children: sessions a parent starts from a cell (`rlm.spawn`) or the API, each with its own kernel and
jobs, working in the parent's directory or in an isolated copy handed back path by path at its end. See
docs/children.md.
"""

from eukhe.children.errors import ChildExistsError, UnknownChildError
from eukhe.children.family import AgentSession, SessionChildren
from eukhe.children.host import ChildHost, InProcessHost
from eukhe.children.roster import CHILD_DOC, Children

__all__ = [
    "CHILD_DOC",
    "AgentSession",
    "ChildExistsError",
    "ChildHost",
    "Children",
    "InProcessHost",
    "SessionChildren",
    "UnknownChildError",
]
