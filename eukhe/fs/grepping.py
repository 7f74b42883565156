"""`fs.grep`: lines that match a regex, with ripgrep when it is on PATH and a Python engine with the same answers.

Both engines give the same answer (tests/real/test_fs_grep.py runs both on one tree and compares):
- Files: under a directory, the ones `eukhe.fs.walk` admits (its docstring has the rules: .gitignore from the root
  down, hidden skipped, symlinks not followed, the optional `glob` as ripgrep's override). A file given as the path
  is searched whatever its name (no glob, no .gitignore, no hidden rule), as ripgrep does.
- Binary files: a file with a NUL byte anywhere is skipped, even when it matched before the NUL.
- Lines: split at `\n`; the regex is searched in each line without its `\n` (a `\r` stays). Bytes that are not UTF-8
  match as themselves in Python (surrogate escapes) and never match `.` in ripgrep: an edge where answers differ.
- Order: by path (component by component, names compared as bytes), then line number. Paths are relative to the
  search root (a directory), or the file's name when the path is a file.
- Regexes: the common subset of Rust's `regex` and Python's `re`. A pattern only one engine accepts (look-around
  and backreferences are Python-only, `\\p{...}` is Rust-only) is `invalid_pattern` with ripgrep and may work with
  the Python engine; the answers of the two agree on patterns both accept.

In a confined session (`auto`) the Python engine runs: ripgrep opens files and directories by their paths, which a
confined process could swap for symlinks while it walks; the Python engine opens each from its directory's
descriptor, following no symlink (`eukhe.fs.walk`), and never enters a denied path. It runs for one file too: it
stops at the first NUL, where ripgrep named a file reads it to its end (a huge sparse file, for minutes).

ripgrep runs as `rg --no-config --json --sort path --no-mmap --encoding none --no-require-git --no-ignore-parent
--no-ignore-dot --no-ignore-global --no-ignore-exclude`, which pins the rules above whatever its config says.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from eukhe.beneath import open_dir
from eukhe.core.pathmap import Kind, is_within
from eukhe.core.pathquote import quote_path
from eukhe.core.sandbox import Mode
from eukhe.fs.context import FsContext, Locator, bounded_fields
from eukhe.fs.errors import FsError, Reason
from eukhe.fs.opening import refused
from eukhe.fs.walk import Override, grep_policy, walk
from eukhe.records.fs import GrepAnswer, GrepArgs

Engine = Literal["auto", "rg", "python"]

RG_FLAGS = (
    "--no-config",
    "--json",
    "--sort",
    "path",
    "--no-mmap",
    "--encoding",
    "none",
    "--no-require-git",
    "--no-ignore-parent",
    "--no-ignore-dot",
    "--no-ignore-global",
    "--no-ignore-exclude",
)
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Match:
    """One matching line: its file (relative, as bytes), its 1-based number, and its bytes without the newline."""

    path: bytes
    line: int
    text: bytes

    def render(self) -> bytes:
        """`PATH:LINE:TEXT\\n`, the text without its line ending; a path with a control character (a newline) or a
        leading `"` quoted (`eukhe.core.pathquote`), so that every match is one line."""
        text = self.text[:-1] if self.text.endswith(b"\r") else self.text
        path = quote_path(os.fsdecode(self.path)).encode("utf-8", errors="surrogateescape")
        return b"%s:%d:%s\n" % (path, self.line, text)


def ripgrep() -> str | None:
    """The ripgrep on PATH, or None."""
    return shutil.which("rg")


# --- the Python engine --------------------------------------------------------------------------------------------


FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _search_file(name: str, dir_fd: int, shown: bytes, regex: re.Pattern[str]) -> list[Match]:
    """The matching lines of one file (its name in the open directory `dir_fd`, opened following no symlink), or
    none when it holds a NUL byte, is not a regular file (anymore), or cannot be read."""
    found: list[Match] = []
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return []
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return []
    number = 1
    rest = b""
    with os.fdopen(fd, "rb", buffering=0) as file:
        while True:
            try:
                chunk = file.read(CHUNK)
            except OSError:
                return []
            if b"\0" in chunk:
                return []
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if regex.search(line.decode("utf-8", errors="surrogateescape")) is not None:
                    found.append(Match(shown, number, line))
                number += 1
    if rest and regex.search(rest.decode("utf-8", errors="surrogateescape")) is not None:
        found.append(Match(shown, number, rest))
    return found


def python_matches(
    directory: str, target: str | None, pattern: str, glob: str | None, hidden: tuple[str, ...] = ()
) -> Generator[Match, None, None]:
    """Matches under the host directory (or of the one file `target` in it), by the rules in the module docstring;
    nothing under a `hidden` host path is read."""
    try:
        regex = re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise FsError(Reason.INVALID_PATTERN, None, f"the regex {pattern!r} does not compile: {error}") from error
    override = None if glob is None else Override.parse(glob)
    top = open_dir(directory)
    try:
        if target is not None:
            yield from _search_file(target, top, os.fsencode(target), regex)
            return
        for found in walk(directory, grep_policy(override), hidden):
            yield from _search_file(found.name, found.dir_fd, os.fsencode(found.relative), regex)
    finally:
        os.close(top)


# --- ripgrep ------------------------------------------------------------------------------------------------------


def _rg_bytes(value: dict[str, Any]) -> bytes:
    """A ripgrep JSON 'arbitrary data' value: {"text": ...} or {"bytes": base64}."""
    if "text" in value:
        return str(value["text"]).encode("utf-8")
    return base64.b64decode(value["bytes"])


def rg_matches(
    rg: str, directory: str, target: str | None, pattern: str, glob: str | None
) -> Generator[Match, None, None]:
    """Matches from `rg --json` run in the host directory, by the same rules (files with a NUL byte dropped)."""
    argv = [rg, *RG_FLAGS, "--regexp", pattern]
    if glob is not None and target is None:
        argv += ["--glob", glob]
    argv += ["--", "./" + (target if target is not None else "")]
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(
                argv, cwd=directory, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors
            )
        except OSError as error:
            raise FsError(Reason.IO_ERROR, None, f"cannot run ripgrep ({rg}): {error.strerror or error}") from error
        assert process.stdout is not None
        summary = False
        pending: list[Match] = []
        try:
            for raw in process.stdout:
                try:
                    message = msgspec.json.decode(raw)
                except msgspec.DecodeError as error:
                    raise FsError(Reason.IO_ERROR, None, f"ripgrep printed a line that is not JSON: {error}") from error
                kind, data = message.get("type"), message.get("data", {})
                if kind == "begin":
                    pending = []
                elif kind == "match":
                    path = _rg_bytes(data["path"]).removeprefix(b"./")
                    text = _rg_bytes(data["lines"])
                    pending.append(Match(path, int(data["line_number"]), text[:-1] if text.endswith(b"\n") else text))
                elif kind == "end":
                    if data.get("binary_offset") is None:
                        yield from pending
                    pending = []
                elif kind == "summary":
                    summary = True
        finally:
            process.stdout.close()
            if process.poll() is None:
                process.kill()
            process.wait()
        if process.returncode == 2 and not summary:
            errors.seek(0)
            said = errors.read().decode("utf-8", errors="replace").strip()
            raise FsError(Reason.INVALID_PATTERN, None, f"the regex {pattern!r} does not compile: {said}")


# --- the tool -----------------------------------------------------------------------------------------------------


def denied(host: str, hidden: tuple[str, ...]) -> bool:
    """Whether a result of a walk lies under a denied path of the sandbox."""
    return any(is_within(host, path) for path in hidden)


def grep(context: FsContext, args: GrepArgs, engine: Engine = "auto") -> GrepAnswer:
    """Lines matching `pattern` under `path` (a directory or one file), in files `glob` selects.

    `engine`: "rg" (ripgrep, which must be on PATH), "python", or "auto" (ripgrep when it is on PATH).
    """
    if not isinstance(args.pattern, str) or (args.glob is not None and not isinstance(args.glob, str)):
        raise FsError(Reason.BAD_REQUEST, None, "pattern and glob must be strings")
    for text in (args.pattern, args.glob or ""):
        if "\0" in text:
            raise FsError(Reason.INVALID_PATTERN, None, "a pattern cannot hold a NUL byte")
        try:
            os.fsencode(text)
        except UnicodeEncodeError as error:
            raise FsError(Reason.INVALID_PATTERN, None, f"a pattern must be encodable: {error.reason}") from error
    place = Locator(context).place(args.path, "search")
    if place.kind is Kind.MISSING:
        raise FsError(Reason.NOT_FOUND, place.asked, f"cannot search {place.asked}: no such file or directory")
    if place.kind is Kind.OTHER:
        raise FsError(Reason.NOT_A_FILE, place.asked, f"cannot search {place.asked}: not a regular file")
    if place.kind is Kind.DIR:
        directory, target = place.host, None
    else:
        directory, target = os.path.split(place.host)
    hidden = context.hidden_below(directory)
    # The Python engine where ripgrep would follow the tree by name under a racing job (a confined session), and for
    # one file (which ripgrep, named a file, reads to its end past a NUL: a huge sparse file for minutes).
    confined = context.sandbox is not None and context.sandbox.mode is not Mode.OFF
    rg = ripgrep() if engine == "rg" or (engine == "auto" and not confined and target is None) else None
    if engine == "rg" and rg is None:
        raise FsError(Reason.IO_ERROR, None, "ripgrep (rg) is not on PATH")
    output = context.bounded("fs-grep")
    matches = files = 0
    last_path: bytes | None = None
    found = (
        rg_matches(rg, directory, target, args.pattern, args.glob)
        if rg is not None
        else python_matches(directory, target, args.pattern, args.glob, hidden)
    )
    try:
        for match in found:
            if hidden and denied(os.path.join(directory, os.fsdecode(match.path)), hidden):
                continue
            output.write(match.render())
            matches += 1
            if match.path != last_path:
                files += 1
                last_path = match.path
    except OSError as error:
        raise refused(error, place.asked, "search") from error
    finally:
        found.close()
        result = output.close()
    return GrepAnswer(absolute=place.shown, matches=matches, files=files, **bounded_fields(result))
