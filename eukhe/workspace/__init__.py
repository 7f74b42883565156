"""A subagent's isolated workspace (spec S3 "A subagent's workspace"): the copy at spawn and the hand-back.

    layout = WorkspaceLayout.at(root, parent_session, child)     # root: <agent dir>/workspaces
    copied = create_workspace(parent_dir, layout)                 # base/ and copy/; the child works in copy/
    ...                                                           # the child runs, then is stopped
    report = hand_back(layout)                                    # its changes, path by path, into parent_dir

The decisions live in `eukhe.core.merge`; this package reads facts and carries them out. See docs/workspace.md.
"""

from eukhe.records.workspace import (
    HandbackConflict,
    HandbackFailure,
    HandbackOutcome,
    HandbackReport,
    WorkspaceCopy,
)
from eukhe.workspace.durable import CrashHook
from eukhe.workspace.errors import (
    CopyError,
    HandbackError,
    ListingError,
    WorkspaceError,
    WorkspaceExistsError,
    WorkspaceNameError,
    WorkspaceTooLargeError,
)
from eukhe.workspace.handback import hand_back, handback_done, load_report, remove_retired
from eukhe.workspace.layout import WorkspaceLayout
from eukhe.workspace.listing import MAX_WORKSPACE_FILES, list_workspace
from eukhe.workspace.spawn import create_workspace

__all__ = [
    "MAX_WORKSPACE_FILES",
    "CopyError",
    "CrashHook",
    "HandbackConflict",
    "HandbackError",
    "HandbackFailure",
    "HandbackOutcome",
    "HandbackReport",
    "ListingError",
    "WorkspaceCopy",
    "WorkspaceError",
    "WorkspaceExistsError",
    "WorkspaceLayout",
    "WorkspaceNameError",
    "WorkspaceTooLargeError",
    "create_workspace",
    "hand_back",
    "handback_done",
    "list_workspace",
    "load_report",
    "remove_retired",
]
