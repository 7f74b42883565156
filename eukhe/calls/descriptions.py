"""What a model reads of each tool: its description, written for a model (`eukhe mcp` lists them, and a prompt
child's loop offers the same tools with the same words)."""

from __future__ import annotations

from eukhe.core.bound import DEFAULT_LIMITS
from eukhe.core.pictures import MAX_IMAGE_BYTES, MAX_SHOWN
from eukhe.core.tty import QUIET_MS
from eukhe.records.settings import DEFAULT_BLOCKING_BUDGET_MS

FILES = (
    "A relative path starts from the session's working directory; an absolute path is taken as it is (~ is the "
    "home directory). "
)
FILE_BOUNDED = (
    f"The text is bounded: past {DEFAULT_LIMITS.max_lines} lines or {DEFAULT_LIMITS.max_bytes // 1024} KiB (the "
    "session's defaults; less when your client shows less of one result) you get the first part, then a notice "
    "with the exact counts of what was dropped and the path of a file holding all of it."
)
REFUSAL = (
    " A refusal is an error naming its reason (not_found, permission_denied, sandbox, ...) and the path; sandbox "
    "means the session's sandbox policy does not allow it (a credential, or a write outside the writable roots)."
)
CONFINED = (
    "It runs in the session's sandbox (unless the session was made with --sandbox off): it may write the working "
    "directory, /tmp (private to the session) and copies of the toolchain caches; .git/hooks, .eukhe/, .agents/ "
    "and .claude/ stay read-only, a git config entry that would run a program is undone, the user's credentials "
    "(~/.ssh, ~/.aws, ...) are hidden, and the network may be off. "
)
BLOCKS = (
    f"It blocks at most its budget_ms (the session's budget, {DEFAULT_BLOCKING_BUDGET_MS // 1000} s by default, "
    "caps it): a run that ends in time "
    "answers with its output and exit; one that does not goes on as a background job, and the answer gives its "
    "output so far and the job id (then call jobs_wait or jobs_cancel). "
)
BOUNDED = (
    f"Output is bounded: past {DEFAULT_LIMITS.max_lines} lines or {DEFAULT_LIMITS.max_bytes // 1024} KiB (the "
    "session's defaults; less when your client shows less of one result) you get the last part, a notice with "
    "the exact counts of what was dropped, and the path of a file holding the full output. Escape sequences are "
    "removed and progress bars collapse to their last state."
)

DESCRIPTIONS: dict[str, str] = {
    "bash": (
        "Run a shell command with bash in the session's working directory. " + CONFINED + BLOCKS + BOUNDED + " "
        "Cancelling the call ends the command's whole process group. Processes it leaves running (cmd &, nohup, a "
        "server that daemonizes) are not killed: they go on, confined as the command was, as a job of their own "
        "whose id the answer gives (jobs_wait, jobs_cancel; it ends with its last process, at a rewind to before it "
        "or at the session's end), and what they write to the output goes to that job. Its input is empty "
        "(/dev/null), unless "
        "tty is true: then it runs on a terminal (cols x rows, 120 x 40 by default), and you read what the "
        "screen shows and type with jobs_write (give a small budget_ms to start a REPL or a server), and what it "
        "leaves running ends with it, as a terminal's session does."
    ),
    "ipython": (
        "Run Python code as a cell on the session's persistent kernel: variables, imports and background tasks "
        "live on between calls; top-level await works. The answer has what the cell printed, the value of its "
        "last expression (Out:) or its traceback. Images the cell displays (a matplotlib figure from "
        "plt.show() or as the last value, a PIL image, an object with _repr_png_, _repr_jpeg_ or _repr_svg_, "
        f"given to display() or as the last value) come back as image content, at most {MAX_SHOWN} of "
        f"{MAX_IMAGE_BYTES // 1024 // 1024} MiB each (the others are saved and named). "
        + BLOCKS
        + BOUNDED
        + " Cancelling the call interrupts the cell."
    ),
    "jobs_list": (
        "List the session's jobs (every bash command, and every cell that outlived its budget), running or "
        "ended: id, kind, exit, how many bytes and lines of output, command."
    ),
    "jobs_wait": (
        "Wait for a job's end, at most timeout_ms (and the session's budget): the answer is its output and exit "
        "if it ended, else its output so far and it goes on. Cancelling the wait leaves the job running. " + BOUNDED
    ),
    "jobs_cancel": (
        "Cancel a job: a command's whole process group is killed, a cell is interrupted (its kernel killed if "
        "it does not stop). Answers once the job ended (or is still stopping), with its output."
    ),
    "read": (
        "Read a text file's lines, from line offset (1-based) for limit lines (default: the whole file). "
        + FILES
        + FILE_BOUNDED
        + " The answer ends with the range read and the file's line count, and where to read on when the text "
        "was cut. Bytes that are not UTF-8 show as U+FFFD." + REFUSAL
    ),
    "write": (
        "Create a file, or replace its whole content, atomically (a reader sees the old file or the new one); "
        "missing parent directories are made. " + FILES + "Prefer edit to change part of a file." + REFUSAL
    ),
    "edit": (
        "Change files with one patch: add, delete, update (with hunks of context, removed and added lines) or "
        "move any number of files. The patch applies completely or not at all: if any hunk is not found, "
        "nothing changes and the error (patch_failed) names the file and the hunk. Hunks match exactly, else "
        "ignoring trailing, then surrounding whitespace. A patch with no section is refused (it changes "
        "nothing); Add File onto an existing file is refused (use Update File, or Delete File first). "
        + FILES
        + "The answer lists what each section did."
        + REFUSAL
    ),
    "grep": (
        "Search files for lines matching a regular expression (no look-around or backreferences) under path, "
        "optionally only in files matching glob; .gitignore'd, hidden and binary files are skipped. Matches "
        "come as PATH:LINE:TEXT lines, sorted by path then line; the answer ends with how many matches in how "
        "many files. A regex that does not compile is refused (invalid_pattern). " + FILES + FILE_BOUNDED + REFUSAL
    ),
    "glob": (
        "List the files under path whose relative path matches a glob pattern, sorted, one a line (regular "
        "files only; .gitignore'd files and, unless the pattern names them, hidden ones are left out). "
        + FILES
        + FILE_BOUNDED
        + REFUSAL
    ),
    "spawn": (
        "Start a child (a subagent) in a session of its own, in the background: its Python code runs as one cell "
        "on a kernel of its own, or a model (the user's model setting) works on its prompt with the same tools "
        "as yours; this call answers once it started. The child works in this session's directory (workspace "
        "shared) or in a copy of it (workspace isolated), whose changes are handed back file by file when it "
        "ends. Its answer is what its code passes to rlm.answer(value), else its last expression's value; or "
        "what the model passes to its answer tool, else its last reply. A prompt child's message_parent texts "
        "show in subagents and collect while it runs; its report has its usage (tokens, model and tool calls). "
        "Then call collect to wait for its report, subagents to list the children."
    ),
    "collect": (
        "Wait for children's ends (the named ones, or all), at most timeout_ms (and the session's budget, "
        f"{DEFAULT_BLOCKING_BUDGET_MS // 1000} s by default), and give each one's report: its status "
        "(answered, failed, stalled, cancelled, or still running), its answer (JSON) or its error, and for an "
        "isolated child what was handed back (paths taken, conflicts). Cancelling the call stops the wait, "
        "never the children."
    ),
    "subagents": (
        "List this session's children, in spawn order: name, status, workspace, working directory, and for an "
        "isolated child that ended what was handed back."
    ),
    "remote_call": (
        "Call a function the session's kernel offers with @rlm.remote (define one in an ipython cell: "
        "`@rlm.remote` over a def with type hints). It runs beside the cells, never behind a busy one, within "
        "budget_ms (the session's budget caps it). The answer is the function's result as JSON (bounded like "
        "every output), or a typed error: not_running (no kernel), unreachable (the kernel stopped), unknown "
        "(no such function), timeout, failed (wrong arguments, an exception, or a result JSON cannot carry)."
    ),
    "jobs_write": (
        "Type into the terminal of a job started with bash tty=true (a REPL, a prompt, a full-screen tool): "
        'input is the keys, control characters included ("\\n" Enter, "\\u0003" Ctrl-C, "\\u0004" Ctrl-D); '
        '"" only reads. The answer is what the terminal shows since the previous answer about the job (a '
        "full-screen program such as less or top: its whole screen), once the program waits for input, its "
        f"output was quiet {QUIET_MS} ms, or budget_ms passed; if the job ended, its end and output. A job "
        "without a terminal refuses (job_has_no_terminal), an ended one says how it ended (job_ended)."
    ),
    "jobs_signal": (
        "Send a signal to a job's process group (a tty job's: its terminal's session and foreground group): "
        "INT (as Ctrl-C), TERM, HUP, QUIT, KILL, USR1, USR2 or WINCH; any other is refused (unknown_signal). "
        "It answers at once; jobs_wait or jobs_write then show what the job did."
    ),
}
"""Every tool's description, by name."""

CHILD_DESCRIPTIONS: dict[str, str] = {
    "message_parent": (
        "Tell your parent something while you work (progress, a finding, a question you go on without an answer "
        "to): it sees your messages so far in its list of children and in their reports."
    ),
    "answer": (
        "End your work with your answer (any JSON value): it is what your parent collects. Write longer results "
        "into files in your working directory and answer with their paths."
    ),
}
"""The tools only a prompt child has, by name."""
