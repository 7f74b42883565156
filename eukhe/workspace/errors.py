"""The workspace's errors (spec S3 "A subagent's workspace" 2, 5): each carries the data a caller reports."""

from __future__ import annotations

from eukhe.errors import EukheError, UsageError
from eukhe.records.workspace import HandbackFailure


class WorkspaceError(EukheError):
    """A child workspace could not be made, read or handed back."""

    code = "workspace_error"


class WorkspaceNameError(WorkspaceError, UsageError):
    """A session or child name that is not one plain path component."""

    code = "workspace_name_error"

    def __init__(self, name: str) -> None:
        super().__init__(f"not a workspace name (one path component, not . or ..): {name!r}")
        self.name = name


class WorkspaceTooLargeError(WorkspaceError):
    """The parent's directory holds more files than an isolated copy takes: spawn with workspace="shared"."""

    code = "workspace_too_large"

    def __init__(self, directory: str, files: int, limit: int) -> None:
        super().__init__(
            f"{directory} holds more than {limit} files ({files} listed so far) to copy for an isolated workspace;"
            ' spawn the child with workspace="shared" instead'
        )
        self.directory = directory
        self.files = files
        self.limit = limit


class WorkspaceExistsError(WorkspaceError):
    """A child's workspace is already there (a resumed child keeps its copy and base)."""

    code = "workspace_exists"

    def __init__(self, directory: str) -> None:
        super().__init__(f"a child workspace already exists at {directory}")
        self.directory = directory


class ListingError(WorkspaceError):
    """The files of a directory could not be listed (git failed, or the walk hit an error)."""

    code = "workspace_listing_failed"

    def __init__(self, directory: str, reason: str) -> None:
        super().__init__(f"cannot list the files of {directory}: {reason}")
        self.directory = directory
        self.reason = reason


class CopyError(WorkspaceError):
    """The copy at spawn failed at `path`; the spawn fails and leaves no record (a retry starts over)."""

    code = "workspace_copy_failed"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot copy {path} into the child workspace: {reason}")
        self.path = path
        self.reason = reason


class HandbackError(WorkspaceError):
    """The hand-back stopped at `path` for `reason`; the child's copy stays, and a rerun starts from the top."""

    code = "handback_failed"

    def __init__(self, path: str, reason: str, copy: str) -> None:
        super().__init__(f"hand-back failed at {path}: {reason} (the child's copy stays at {copy})")
        self.path = path
        self.reason = reason
        self.copy = copy

    def failure(self) -> HandbackFailure:
        """The failure as a child's report and roster row carry it."""
        return HandbackFailure(path=self.path, reason=self.reason, copy=self.copy)
