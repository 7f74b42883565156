"""Laws of `eukhe.core.kernel_added`: what `--with` may name, how the recorded requirements change, when the install
command makes the added lock again (over the whole small domain), and how a lock's text is read."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.kernel_added import (
    AddedRecord,
    AddedStep,
    RequirementError,
    applies,
    canonical,
    merged,
    parse_requirement,
    pins,
    plan_added,
    read_lock,
    without,
)
from eukhe.kernel.bootstrap.venv import KERNEL_LOCK

GOOD = ["pandas", "Pandas", "numpy>=2", "numpy >= 2, <3", "rich[jupyter]==13.7.1", "zope.interface", "a_b-c.d~=1.2"]
BAD = [
    "",
    "-e .",
    "--index-url=https://evil.example/simple",
    "pkg @ https://example.com/pkg.whl",
    "./local/dir",
    "/abs/path.whl",
    "pkg; python_version<'3.12'",
    "pkg\n--extra-index-url https://evil.example",
    "pkg==1 --hash=sha256:00",
    "https://example.com/x.whl",
    "pkg[",
]


@pytest.mark.parametrize("text", GOOD)
def test_a_plain_requirement_is_taken_with_its_canonical_name(text: str) -> None:
    requirement = parse_requirement(text)
    assert requirement.text == text.strip()
    assert requirement.name == canonical(requirement.name) and requirement.name


@pytest.mark.parametrize("text", BAD)
def test_anything_a_requirements_line_could_do_beyond_naming_a_package_is_refused(text: str) -> None:
    with pytest.raises(RequirementError):
        parse_requirement(text)


@given(st.text(max_size=40))
def test_no_taken_requirement_holds_a_line_break_an_option_a_url_or_a_marker(text: str) -> None:
    try:
        requirement = parse_requirement(text)
    except RequirementError:
        return
    for forbidden in ("\n", "\r", ";", "@", "/", "--", " -"):
        assert forbidden not in requirement.text
    assert not requirement.text.startswith("-")


NAMES = st.lists(st.sampled_from(GOOD), max_size=5)


@given(NAMES, NAMES, NAMES)
def test_merging_keeps_one_requirement_per_name_the_last_given_and_none_removed(
    recorded: list[str], added: list[str], removed: list[str]
) -> None:
    result = merged(recorded, added, removed)
    names = [parse_requirement(text).name for text in result]
    assert len(names) == len(set(names))
    gone = {parse_requirement(text).name for text in removed}
    assert not set(names) & gone
    for text in [*recorded, *added]:
        name = parse_requirement(text).name
        if name not in gone:
            last = [other for other in [*recorded, *added] if parse_requirement(other).name == name][-1]
            assert last.strip() in result
    assert merged(result, (), ()) == result


WANTED = [(), ("pandas",), ("pandas", "numpy>=2")]
RECORDS = [None] + [
    AddedRecord(requirements, base, python)
    for requirements, base, python in itertools.product(WANTED[1:], ("b1", "b2"), ("p1", "p2"))
]


def test_the_install_command_makes_the_lock_again_exactly_when_something_it_was_made_from_changed() -> None:
    for wanted, recorded, base, python in itertools.product(WANTED, RECORDS, ("b1", "b2"), ("p1", "p2")):
        step = plan_added(wanted, recorded, base=base, python=python)
        if not wanted:
            assert step is (AddedStep.NONE if recorded is None else AddedStep.DROP)
        elif recorded is not None and (recorded.requirements, recorded.base, recorded.python) == (
            wanted,
            base,
            python,
        ):
            assert step is AddedStep.KEEP
        else:
            assert step is AddedStep.MAKE


def test_a_lock_goes_only_into_a_build_on_the_python_it_was_made_for() -> None:
    assert applies("given /usr/bin/python3.11", "given /usr/bin/python3.11")
    assert not applies("given /usr/bin/python3.11", "managed 3.11.18")


def test_the_kernel_lock_reads_as_pins_with_their_hashes() -> None:
    text = KERNEL_LOCK.read_text()
    options, entries = read_lock(text)
    assert {entry.name for entry in entries} >= {"msgspec", "tabulate"}
    assert all(any("--hash=sha256:" in line for line in entry.lines) for entry in entries)
    assert pins(text) == tuple(f"{entry.name}=={entry.version}" for entry in entries)
    assert read_lock(without(text, set()))[1] == entries  # nothing left out: the same pins, the same hashes
    assert without(text, {entry.name for entry in entries}) == "".join(option + "\n" for option in options)


def test_an_added_lock_keeps_its_find_links_and_loses_what_the_kernel_lock_pins() -> None:
    text = (
        "--find-links /w/wheels\n\n"
        "addpkg-demo==0.1.0 \\\n    --hash=sha256:aa\n"
        "# via something\n"
        "Tabulate==0.9.0 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n"
    )
    assert without(text, {"tabulate"}) == "--find-links /w/wheels\naddpkg-demo==0.1.0 \\\n    --hash=sha256:aa\n"
