"""`fs.edit`: one multi-file patch, applied completely or not at all (grammar in docs/fs.md).

Steps: parse the patch (`eukhe.core.patch.parse`); check every header and `Move to` path like any request path
(relative to the cwd, through the path map, on the host disk: a refusal there keeps its own reason, e.g. `outside`);
read the current state of each; let the core plan the whole patch in memory; carry the plan out with
`eukhe.fs.commit.commit`. Any failure before or during the commit is `patch_failed` naming the path and the reason,
and leaves every file as it was.
"""

from __future__ import annotations

import os
from typing import Literal

from eukhe.core import patch as core
from eukhe.core.pathmap import Kind
from eukhe.fs.commit import CommitError, StepHook, commit
from eukhe.fs.context import FsContext, Locator, Place
from eukhe.fs.errors import FsError, Reason, os_error
from eukhe.fs.reading import open_regular
from eukhe.records.fs import EditAnswer, EditArgs, EditChange

_ACTIONS: dict[core.Action, Literal["added", "updated", "deleted", "moved"]] = {
    core.Action.ADDED: "added",
    core.Action.UPDATED: "updated",
    core.Action.DELETED: "deleted",
    core.Action.MOVED: "moved",
}


def _state(place: Place, modes: dict[str, int]) -> core.FileState:
    """What the patch finds at a checked place; a regular file's text (bytes that are not UTF-8 kept as escapes)."""
    if place.kind is Kind.MISSING:
        return core.Absent()
    if place.kind is Kind.DIR:
        return core.Directory()
    if place.kind is Kind.OTHER:
        return core.Special()
    fd = open_regular(place, "read")
    try:
        modes[place.host] = os.fstat(fd).st_mode
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read()
    except OSError as error:
        raise os_error(error, place.asked, "read") from error
    finally:
        os.close(fd)
    return core.Text(data.decode("utf-8", errors="surrogateescape"))


def edit(context: FsContext, args: EditArgs, before_step: StepHook | None = None) -> EditAnswer:
    """Apply one multi-file patch. `before_step` is a test seam (see `eukhe.fs.commit.commit`)."""
    if not isinstance(args.patch, str):
        raise FsError(Reason.BAD_REQUEST, None, f"patch must be a string, got {type(args.patch).__name__}")
    try:
        patch = core.parse(args.patch)
    except core.PatchSyntaxError as error:
        raise FsError(Reason.PATCH_FAILED, None, f"{error.problem}: {error}") from error
    locator = Locator(context)
    places = {path: locator.place(path, "edit") for path in patch.paths()}
    shown = {place.host: place.shown for place in places.values()}
    modes: dict[str, int] = {}
    states: dict[str, core.FileState] = {}
    for place in places.values():
        if place.host not in states:
            states[place.host] = _state(place, modes)
    result = core.plan(patch.map_paths(lambda path: places[path].host), states, show=shown.__getitem__)
    if isinstance(result, core.PatchFailure):
        where = shown[result.path]
        raise FsError(Reason.PATCH_FAILED, where, f"section {result.section} ({where}): {result.reason}")
    try:
        commit(result, modes, before_step)
    except CommitError as error:
        where = shown[error.path]
        message = f"cannot apply the patch at {where}: {error}; "
        if not error.left:
            message += "nothing was changed"
        else:
            kept = [os.path.join(os.path.dirname(shown[target]), os.path.basename(o)) for target, o in error.left]
            message += "undoing it failed too: the originals are kept at " + ", ".join(kept)
        raise FsError(Reason.PATCH_FAILED, where, message) from error
    return EditAnswer(
        changes=tuple(
            EditChange(
                action=_ACTIONS[change.action],
                path=shown[change.path],
                destination=None if change.destination is None else shown[change.destination],
            )
            for change in result.changes
        )
    )
