"""Laws of the git guard's rules (eukhe.core.gitguard): every key on the lists is refused, in any case of its section
and name, whatever its subsection; keys of other sections are kept; aliases only when they run a shell. An undo plan
leaves no entry that runs code unless it was there before, and takes nothing else away; a config the audit cannot
read is never left for the user's git unless it was the user's own."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import gitguard as core

ISSUE_KEYS = [
    "core.hooksPath",
    "core.fsmonitor",
    "core.sshCommand",
    "core.editor",
    "core.pager",
    "core.askPass",
    "sequence.editor",
    "diff.external",
    "diff.jpg.textconv",
    "filter.lfs.smudge",
    "filter.x.clean",
    "filter.x.process",
    "merge.ours.driver",
    "credential.helper",
    "credential.https://example.org.helper",
    "gpg.program",
    "include.path",
    "includeIf.gitdir:~/work/.path",
    "pager.log",
    "url.https://evil.example/.insteadOf",
]
MORE_KEYS = [
    "extensions.worktreeConfig",  # makes git read config.worktree, which a job can make
    "protocol.allow",
    "protocol.ext.allow",  # lets a remote's ext:: address run a command
    "trailer.sign.cmd",
    "trailer.sign.command",
    "gpg.ssh.defaultKeyCommand",
    "hook.lint.command",
    "imap.tunnel",
    "instaweb.httpd",
    "guitool.x.cmd",
    "sendemail.work.smtpServer",
    "lfs.customtransfer.x.path",
    "lfs.extension.x.smudge",
    "remote.origin.uploadpack",
    "core.worktree",
]


def test_gitguard_refuses_the_keys_that_run_a_program_or_read_a_file_beyond_the_first_list_small_scope() -> None:
    for key in MORE_KEYS:
        assert core.runs_code(key, "x") is not None, key


def test_gitguard_refuses_every_listed_key_in_any_case_small_scope() -> None:
    for key in ISSUE_KEYS:
        for variant in (key, key.lower(), key.upper()):
            section, _, rest = variant.partition(".")
            _, dot, name = rest.rpartition(".")
            # git keeps a subsection's case: only the section and the name change case here
            original_sub = key.partition(".")[2].rpartition(".")[0]
            spelled = f"{section}.{original_sub}.{name}" if dot else variant
            assert core.runs_code(spelled, "x") is not None, spelled


def test_gitguard_every_program_key_and_subsection_key_is_refused_small_scope() -> None:
    for key in core.PROGRAM_KEYS:
        assert core.runs_code(key, "x") is not None
    for section, names in core.SUBSECTION_KEYS.items():
        for name in names:
            assert core.runs_code(f"{section}.Some.Sub.{name}", "x") is not None


@given(st.sampled_from(["alias.st", "alias.lg"]), st.text(max_size=20))
def test_gitguard_an_alias_is_refused_only_when_it_runs_a_shell(key: str, value: str) -> None:
    assert (core.runs_code(key, value) is not None) is value.lstrip().startswith("!")


SAFE_SECTIONS = ["user", "branch", "init", "pull", "push", "fetch", "color", "status", "log", "gc", "advice"]


@given(
    st.sampled_from(SAFE_SECTIONS),
    st.one_of(st.none(), st.text(alphabet="abc.-_/", min_size=1, max_size=8)),
    st.text(alphabet="abcdefghijklmnop", min_size=1, max_size=10),
    st.text(max_size=20),
)
def test_gitguard_keys_of_other_sections_are_kept(section: str, sub: str | None, name: str, value: str) -> None:
    key = f"{section}.{name}" if sub is None else f"{section}.{sub}.{name}"
    assert core.runs_code(key, value) is None


def test_gitguard_remote_addresses_are_kept_and_remote_programs_refused() -> None:
    assert core.runs_code("remote.origin.url", "https://example.org/x.git") is None
    assert core.runs_code("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*") is None
    assert core.runs_code("remote.origin.uploadpack", "touch /tmp/x") is not None
    assert core.runs_code("submodule.lib.update", "!sh x") is not None
    assert core.runs_code("submodule.lib.update", "rebase") is None


GITS_HOOK_NAMES = [
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit", "prepare-commit-msg",
    "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive", "update",
    "proc-receive", "post-receive", "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
    "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist", "p4-prepare-changelist",
    "p4-post-changelist", "p4-pre-submit", "post-index-change",
]  # fmt: skip
"""Every hook githooks(5) names."""


def test_gitguard_every_hook_git_runs_is_removed_and_its_samples_kept_small_scope() -> None:
    for name in GITS_HOOK_NAMES:
        assert core.hook_runs(name), name
        assert not core.hook_runs(name + ".sample"), name


@given(st.text(min_size=1).filter(lambda name: "/" not in name and not name.startswith(".")))
def test_gitguard_a_hook_name_runs_unless_it_is_a_sample(name: str) -> None:
    assert core.hook_runs(name) is not name.endswith(".sample")


ENTRIES: list[core.Entry] = [
    ("core.pager", "less"),
    ("core.pager", "evil"),
    ("core.pager", None),
    ("user.name", "me"),
    ("alias.st", "status"),
    ("alias.st", "!sh"),
]


def apply(now: list[core.Entry], plan: tuple[core.Undo, ...]) -> list[core.Entry]:
    """What `git config --unset-all KEY` and `--add KEY VALUE` for each kept value make of a config's entries."""
    keys = {undo.key for undo in plan}
    return [entry for entry in now if entry[0] not in keys] + [(u.key, v) for u in plan for v in u.keep]


def test_gitguard_an_undo_plan_leaves_only_what_runs_no_code_or_was_there_before_small_scope() -> None:
    """Every config of up to three entries over a few keys x every baseline: after the plan, each entry that runs
    code was there before; each entry that runs no code or was there before is still there (as many times); and a
    key is in the plan only when one of its entries is refused."""
    for size in range(4):
        for now in itertools.product(ENTRIES, repeat=size):
            for mask in range(1 << len(ENTRIES)):
                before = frozenset(entry for bit, entry in enumerate(ENTRIES) if mask >> bit & 1)
                plan = core.undo_plan(list(now), before)
                after = apply(list(now), plan)
                for key, value in after:
                    assert core.runs_code(key, value or "") is None or (key, value) in before
                for entry in set(now):
                    if core.runs_code(entry[0], entry[1] or "") is None or entry in before:
                        assert after.count(entry) == now.count(entry), (now, before, plan)
                refused = [k for k, v in now if core.runs_code(k, v or "") is not None and (k, v) not in before]
                assert [undo.key for undo in plan] == list(dict.fromkeys(refused))


def test_gitguard_a_config_the_audit_cannot_read_is_put_back_removed_or_left_as_the_users_small_scope() -> None:
    assert core.put_back(core.Before(core.Was.READ, frozenset(), b"[user]\n")) is core.PutBack.RESTORE
    assert core.put_back(core.ABSENT) is core.PutBack.REMOVE
    assert core.put_back(core.Before(core.Was.UNREADABLE)) is core.PutBack.LEAVE
