"""Laws of `eukhe.core.cell_packages`: which workspace-venv directory a kernel adds before a cell (over the whole
small domain), and the line a cell's ModuleNotFoundError ends with (and no other error)."""

from __future__ import annotations

import itertools
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.cell_packages import (
    NOTHING_TOLD,
    CellPackagesFactError,
    Told,
    VenvFacts,
    VenvSetting,
    distribution_of,
    kernel_lib,
    missing_module_hint,
    shell_word,
    site_for_cell,
    version_of,
)

VENV = "/w/.venv"
LIBS = ("python3.11", "python3.12", "python3.13t")
STAMPS = (None, 1, 2)


def all_facts() -> list[VenvFacts]:
    """Every venv the domain holds: absent, present with any subset of LIBS, each stamp."""
    facts = [VenvFacts(VENV, exists=False)]
    for size in range(len(LIBS) + 1):
        for libs in itertools.combinations(LIBS, size):
            facts += [VenvFacts(VENV, exists=True, libs=libs, stamp=stamp) for stamp in STAMPS]
    return facts


def all_told() -> list[Told]:
    sites = (None, *(f"{VENV}/lib/{lib}/site-packages" for lib in LIBS))
    return [Told(site, stamp) for site in sites for stamp in STAMPS]


DOMAIN = [
    (setting, facts, lib, told)
    for setting in VenvSetting
    for facts in all_facts()
    for lib in LIBS
    for told in all_told()
]


def test_site_for_cell_over_the_whole_domain() -> None:
    """Off adds nothing and says nothing; only the kernel's own Python's site-packages is ever added, exactly when
    the kernel was not told it at this stamp; asking again after adding adds nothing; the first add is announced,
    a venv for other Pythons only is named with its versions."""
    for setting, facts, lib, told in DOMAIN:
        step = site_for_cell(setting, facts, lib, told)
        own = facts.site(lib)
        if setting is VenvSetting.OFF:
            assert (step.add, step.told, step.notice) == ((), told, None)
            continue
        assert set(step.add) <= {own}  # never another Python's directory
        due = lib in facts.libs and told != Told(own, facts.stamp)
        assert bool(step.add) is due
        if due:
            assert step.told == Told(own, facts.stamp)
            assert (step.notice is not None) is (told.site != own)
        again = site_for_cell(setting, facts, lib, step.told)
        assert again.add == ()
        if lib not in facts.libs and facts.libs:
            assert step.notice is not None
            assert all(version_of(other) in step.notice for other in facts.libs)
            assert version_of(lib) in step.notice
        elif not due:
            assert step.notice is None


def test_a_changed_site_packages_is_added_again_without_a_second_notice() -> None:
    facts = VenvFacts(VENV, exists=True, libs=("python3.11",), stamp=1)
    first = site_for_cell(VenvSetting.AUTO, facts, "python3.11", NOTHING_TOLD)
    assert first.add == (f"{VENV}/lib/python3.11/site-packages",) and first.notice is not None
    later = site_for_cell(VenvSetting.AUTO, VenvFacts(VENV, True, ("python3.11",), 2), "python3.11", first.told)
    assert later.add == first.add and later.notice is None


@pytest.mark.parametrize(
    ("field", "make"),
    [
        ("path", lambda: VenvFacts("", exists=False)),
        ("exists", lambda: VenvFacts(VENV, exists=1)),  # type: ignore[arg-type]
        ("libs", lambda: VenvFacts(VENV, exists=True, libs=("lib",))),
        ("libs", lambda: VenvFacts(VENV, exists=False, libs=("python3.11",))),
        ("stamp", lambda: VenvFacts(VENV, exists=True, stamp=True)),  # type: ignore[arg-type]
    ],
)
def test_facts_no_source_gives_are_refused(field: str, make: object) -> None:
    with pytest.raises(CellPackagesFactError) as raised:
        make()  # type: ignore[operator]
    assert raised.value.field == field


def test_the_kernels_lib_and_its_version() -> None:
    assert kernel_lib("3.11.7") == "python3.11"
    assert kernel_lib("3.13.0", free_threaded=True) == "python3.13t"
    assert kernel_lib("3.10.14", implementation="pypy") == "pypy3.10"
    assert [version_of(lib) for lib in ("python3.11", "python3.13t", "pypy3.10")] == ["3.11", "3.13t", "pypy 3.10"]


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}(\.[A-Za-z_][A-Za-z0-9_]{0,8}){0,2}", fullmatch=True)
FACTS = st.sampled_from(all_facts())
SETTINGS = st.sampled_from(list(VenvSetting))


@given(st.text(max_size=30), st.text(max_size=60), SETTINGS, FACTS)
def test_no_error_but_a_module_not_found_gets_a_hint(
    ename: str, evalue: str, setting: VenvSetting, facts: VenvFacts
) -> None:
    if ename == "ModuleNotFoundError":
        return
    assert missing_module_hint(ename, evalue, setting=setting, venv=facts, lib="python3.11") is None


@given(st.text(max_size=30).filter(lambda name: name != "ModuleNotFoundError"), NAMES, SETTINGS, FACTS)
def test_another_error_with_the_same_message_gets_no_hint(
    ename: str, module: str, setting: VenvSetting, facts: VenvFacts
) -> None:
    message = f"No module named '{module}'"
    assert missing_module_hint(ename, message, setting=setting, venv=facts, lib="python3.11") is None


@given(NAMES, SETTINGS, FACTS)
def test_a_missing_module_gets_one_line_that_says_how(module: str, setting: VenvSetting, facts: VenvFacts) -> None:
    hint = missing_module_hint(
        "ModuleNotFoundError", f"No module named '{module}'", setting=setting, venv=facts, lib="python3.11"
    )
    assert hint is not None
    assert "\n" not in hint and hint.startswith("[") and hint.endswith("]")
    name = distribution_of(module)
    if setting is VenvSetting.OFF:
        assert f"eukhe kernel install --with {name}" in hint and "off" in hint
        return
    assert f"uv pip install --python {VENV} {name}" in hint and "run the cell again" in hint
    if "python3.11" in facts.libs:
        assert "uv venv" not in hint  # it is there: install into it
    elif facts.libs:
        assert "3.11" in hint and all(version_of(other) in hint for other in facts.libs)
        assert f"eukhe kernel install --with {name}" in hint
    else:
        assert f"uv venv --python 3.11 {VENV}" in hint


@given(NAMES, SETTINGS, FACTS)
def test_no_hint_for_the_standard_library_or_a_module_that_is_not_a_package(
    module: str, setting: VenvSetting, facts: VenvFacts
) -> None:
    top = module.split(".", maxsplit=1)[0]
    stdlib_one = missing_module_hint(
        "ModuleNotFoundError",
        f"No module named '{module}'",
        setting=setting,
        venv=facts,
        lib="python3.11",
        stdlib={top},
    )
    assert stdlib_one is None
    not_a_package = f"No module named '{module}.x'; '{module}' is not a package"
    assert (
        missing_module_hint("ModuleNotFoundError", not_a_package, setting=setting, venv=facts, lib="python3.11") is None
    )


def test_a_module_is_installed_by_its_distributions_name() -> None:
    assert [distribution_of(name) for name in ("PIL.Image", "cv2", "yaml", "google.protobuf", "numpy.linalg")] == [
        "pillow",
        "opencv-python",
        "pyyaml",
        "protobuf",
        "numpy",
    ]


@given(st.text(min_size=0, max_size=40).filter(lambda text: "\x00" not in text))
def test_shell_word_is_one_word_a_shell_reads_back(text: str) -> None:
    assert shlex.split(shell_word(text)) == [text]
