"""The pattern rules of the walk (.gitignore, grep's override glob) and of `fs.glob`, on paths alone."""

from __future__ import annotations

import pytest

from eukhe.fs import FsError, Reason
from eukhe.fs.globbing import GlobPattern
from eukhe.fs.walk import Override, Rules, Verdict, expand_braces, grep_policy, ignored


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "verdict"),
    [
        ("sub", "sub", True, Verdict.EXCLUDE),
        ("sub", "sub", False, Verdict.EXCLUDE),
        ("sub", "sub/x.py", False, Verdict.NONE),  # the path itself, not a parent: the walk never enters sub
        ("sub", "a/sub", True, Verdict.EXCLUDE),  # no slash: any depth
        ("sub/", "sub", False, Verdict.NONE),  # a trailing slash: directories only
        ("sub/", "sub", True, Verdict.EXCLUDE),
        ("/rooted", "rooted", False, Verdict.EXCLUDE),
        ("/rooted", "a/rooted", False, Verdict.NONE),
        ("a/b", "a/b", False, Verdict.EXCLUDE),
        ("a/b", "x/a/b", False, Verdict.NONE),  # a slash anchors the pattern to its file's directory
        ("*.py", "a/b/c.py", False, Verdict.EXCLUDE),
        ("a/**", "a/b/c", False, Verdict.EXCLUDE),
        ("a/**", "a", True, Verdict.NONE),
        ("**/z", "a/b/z", False, Verdict.EXCLUDE),
        ("a/**/z", "a/z", False, Verdict.EXCLUDE),
        ("!keep", "keep", False, Verdict.INCLUDE),
        ("#comment", "#comment", False, Verdict.NONE),
        ("trail  ", "trail", False, Verdict.EXCLUDE),
        ("[ab].py", "b.py", False, Verdict.EXCLUDE),
        ("?.py", "ab.py", False, Verdict.NONE),
    ],
)
def test_gitignore_patterns_match_the_path_itself(pattern: str, path: str, is_dir: bool, verdict: Verdict) -> None:
    assert Rules.parse("", [pattern]).verdict(path, is_dir) is verdict


@pytest.mark.parametrize(
    ("pattern", "alternatives"),
    [
        ("{a,b}.py", ["a.py", "b.py"]),
        ("{a,b}{.c,.h}", ["a.c", "a.h", "b.c", "b.h"]),
        ("\\{a,b\\}", ["\\{a,b\\}"]),  # escaped: literal
        ("[{]a,b", ["[{]a,b"]),  # in a class: literal
        ("a,b", ["a,b"]),
        ("{a,{b}}", None),  # nested: refused, as ripgrep does
        ("{a,b", None),  # unclosed
    ],
)
def test_brace_groups_expand_as_ripgrep_reads_them(pattern: str, alternatives: list[str] | None) -> None:
    assert expand_braces(pattern) == alternatives


def test_a_gitignore_line_with_a_bad_group_is_skipped_and_a_glob_with_one_refused() -> None:
    rules = Rules.parse("", ["{a,{b}}", "c.py", "{d,e}.py"])
    assert [rules.verdict(name, False) for name in ("a", "c.py", "d.py", "e.py")] == [
        Verdict.NONE,
        Verdict.EXCLUDE,
        Verdict.EXCLUDE,
        Verdict.EXCLUDE,
    ]
    with pytest.raises(FsError) as caught:
        Override.parse("!{a,b")
    assert caught.value.reason is Reason.INVALID_PATTERN


def test_the_deepest_gitignore_and_the_last_pattern_decide() -> None:
    root = Rules.parse("", ["*.log", "!keep.log"])
    sub = Rules.parse("sub", ["!*.log", "x.log"])
    assert ignored([root], "a.log", False) is Verdict.EXCLUDE
    assert ignored([root], "keep.log", False) is Verdict.INCLUDE
    assert ignored([root, sub], "sub/a.log", False) is Verdict.INCLUDE
    assert ignored([root, sub], "sub/x.log", False) is Verdict.EXCLUDE
    assert ignored([root, sub], "sub/y.txt", False) is Verdict.NONE
    assert sub.verdict("other/x.log", False) is Verdict.EXCLUDE  # relative to its own directory


def test_grep_override_then_gitignore_then_hidden() -> None:
    stack = [Rules.parse("", ["*.log", "!.env"])]
    plain = grep_policy(None)
    assert not plain("a.log", "a.log", False, stack)
    assert plain(".env", ".env", False, stack)  # re-included by .gitignore: hidden or not
    assert not plain(".other", ".other", False, stack)
    logs = grep_policy(Override.parse("*.log"))
    assert logs("a.log", "a.log", False, stack)  # the override wins over .gitignore
    assert not logs("a.txt", "a.txt", False, stack)  # a positive glob skips other files
    assert logs("dir", "dir", True, stack)  # but enters directories
    not_logs = grep_policy(Override.parse("!*.txt"))
    assert not not_logs("a.txt", "a.txt", False, stack)
    assert not_logs("b.md", "b.md", False, stack)


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", "b.c.py"], ["a/b.py", ".a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "a/b.py", "a/b/c.py"], [".a.py", "a/.b/c.py", "a/b.txt"]),
        ("a/**", ["a/b", "a/b/c"], ["a", "b/a"]),
        ("a/**/b", ["a/b", "a/x/b", "a/x/y/b"], ["a", "b", "a/x/.h/b"]),
        ("**", ["a", "a/b"], [".a", "a/.b"]),
        (".*", [".a", ".gitignore"], ["a", "a/.b"]),
        (".github/**/*.yml", [".github/w/ci.yml", ".github/ci.yml"], ["github/ci.yml"]),
        ("?", ["a"], ["ab", "."]),
        ("[!a]*", ["b", "ba"], ["a", "ab"]),
        ("src/*/main.c", ["src/x/main.c"], ["src/main.c", "src/x/y/main.c"]),
        ("./a/./b", ["a/b"], ["b"]),
        ("a/**/**/b", ["a/b", "a/x/b"], ["b"]),
    ],
)
def test_glob_patterns_by_component(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    parsed = GlobPattern.parse(pattern)
    assert [path for path in matching if not parsed.matches(path)] == []
    assert [path for path in not_matching if parsed.matches(path)] == []


def test_glob_enters_a_directory_only_while_it_can_still_match() -> None:
    parsed = GlobPattern.parse("src/*.c")
    assert parsed.alive(parsed.step(parsed.start(), "src"))
    assert not parsed.alive(parsed.step(parsed.start(), "docs"))
    assert not parsed.alive(parsed.step(parsed.step(parsed.start(), "src"), "sub"))
    anywhere = GlobPattern.parse("**/*.c")
    assert anywhere.alive(anywhere.step(anywhere.start(), "deep"))
    assert not anywhere.alive(anywhere.step(anywhere.start(), ".git"))


@pytest.mark.parametrize("pattern", ["", "/etc/*", "a/../b", "..", "dir/", ".", "a\0b"])
def test_glob_patterns_that_are_refused(pattern: str) -> None:
    with pytest.raises(FsError) as caught:
        GlobPattern.parse(pattern)
    assert caught.value.reason is Reason.INVALID_PATTERN
