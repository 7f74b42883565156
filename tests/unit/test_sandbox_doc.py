"""docs/sandbox.md says what the sandbox does: its table of credential stores is the default `deny_read`, each
path with whose it is, its lists of caches and protected names are the ones a launch uses, and its table of the git
keys the guard unsets is the guard's; its section on the environment names the rule's stems and words, and its
table of known secret variables is the rule's."""

from __future__ import annotations

import re
from pathlib import Path

from eukhe.core import allowlist, gitguard, secret_env
from eukhe.core.sandbox import CACHE_DIRS, CREDENTIAL_STORES, PROTECTED_DIRS

DOC = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"


def test_the_sandbox_doc_lists_every_credential_store_with_whose_it_is() -> None:
    section = DOC.read_text().split("## The credential stores denied by default", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.M)
    assert rows == list(CREDENTIAL_STORES)


def test_the_sandbox_doc_names_every_cache_and_protected_directory() -> None:
    text = DOC.read_text()
    for cache in CACHE_DIRS:
        assert f"`~/{cache}`" in text, cache
    for name in PROTECTED_DIRS:
        assert f"`{name}/`" in text, name


def test_the_sandbox_doc_names_every_git_key_the_guard_unsets_and_no_other() -> None:
    section = DOC.read_text().split("### git config", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| a ") or line.startswith("| another ")]
    named = {key.lower() for row in rows for key in re.findall(r"`([^`]+)`", row.split("|")[2]) if key != "!"}
    guard = set(gitguard.PROGRAM_KEYS)
    guard |= {f"{section}.*.{name}" for section, names in gitguard.SUBSECTION_KEYS.items() for name in names}
    guard |= {f"{section}.*" for section in gitguard.ANY_NAME_SECTIONS}
    guard |= {"alias.*", "submodule.*.update"}  # the two whose value decides: a `!` runs a shell
    assert named == guard


def test_the_sandbox_doc_lists_every_known_secret_variable_and_the_rules_stems() -> None:
    section = DOC.read_text().split("## The environment: secrets left out", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, re.M)
    assert rows == list(secret_env.KNOWN_SECRETS)
    rule = section.split("The rule, on a variable's name", 1)[1].split("\n\n", 1)[0]
    for stem in (*secret_env.SECRET_STEMS, *secret_env.SECRET_WORDS):
        assert f"`{stem}`" in rule, stem


def test_the_sandbox_doc_lists_the_default_allowlist_with_what_each_is() -> None:
    section = DOC.read_text().split("## The network allowlist", 1)[1].split("\n## ", 1)[0]
    table = section.split("**The default.**", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", table, re.M)
    assert rows == list(allowlist.DEFAULT_ALLOWED)
