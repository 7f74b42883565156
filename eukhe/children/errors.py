"""The children's errors: an unknown child, a name already taken, a prompt child with no model to ask."""

from __future__ import annotations

from eukhe.errors import EukheError, UsageError
from eukhe.workspace import WorkspaceNameError


class UnknownChildError(EukheError, KeyError):
    """The parent has no child of this name."""

    code = "unknown_child"

    def __init__(self, name: str) -> None:
        super().__init__(f"no child named {name!r}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class ChildExistsError(UsageError):
    """A spawn named a child the parent already has (names are unique per parent; `delete` frees one)."""

    code = "child_exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"the parent already has a child named {name!r}")
        self.name = name


class ChildNameError(WorkspaceNameError):
    """A child's name that cannot name its session's workspace: up to 64 letters, digits and `_.-`."""

    def __init__(self, name: str) -> None:
        UsageError.__init__(self, f"a child's name is 1 to 64 letters, digits, '_', '.' or '-' (not first): {name!r}")
        self.name = name
        self.field = "name"


class ModelNotConfiguredError(UsageError):
    """A prompt spawn with no `model` in the user settings, or no API key in the variable it names; `field` names the
    setting."""

    code = "model_not_configured"

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field
