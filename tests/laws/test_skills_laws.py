"""Laws of eukhe.core.skills (Agent Skills): each field's rule, the precedence, the catalog's limit and the
frontmatter split; exhaustively where the domain is small, with Hypothesis elsewhere."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.skills import (
    CATALOG_HEAD,
    COMPATIBILITY_MAX,
    DESCRIPTION_MAX,
    NAME_MAX,
    NO_FRONTMATTER,
    ROOTS,
    Fields,
    Scope,
    Severity,
    SkillFact,
    Status,
    Unparsable,
    catalog_text,
    cut_line,
    decide,
    installed_on_host,
    kernel_skills,
    split_frontmatter,
    validate,
)


def fact(front: object, dir_name: str = "a-skill", root: int = 2, python: bool = False) -> SkillFact:
    return SkillFact(root, dir_name, f"/r{root}/{dir_name}/SKILL.md", front, python)


def good(**extra: Any) -> dict[str, Any]:
    return {"name": "a-skill", "description": "Does a thing.", **extra}


def errors_of(front: object, dir_name: str = "a-skill") -> list[str | None]:
    fields, diagnostics = validate(fact(front, dir_name))
    errors = [d.field for d in diagnostics if d.severity is Severity.ERROR]
    assert (fields is None) == bool(errors)  # valid exactly when no error
    return errors


def reference_name_ok(name: str) -> bool:
    """The name rule said another way: 1-64 of a-z, 0-9, '-', no hyphen at either end, none doubled."""
    return (
        1 <= len(name) <= NAME_MAX
        and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in name)
        and not name.startswith("-")
        and not name.endswith("-")
        and "--" not in name
    )


SMALL_ALPHABET = "az09-A_é "


def test_skills_name_rule_exhaustive() -> None:
    for length in range(6):
        for letters in itertools.product(SMALL_ALPHABET, repeat=length):
            name = "".join(letters)
            ok = reference_name_ok(name)
            assert (errors_of({"name": name, "description": "d"}, dir_name=name or "x") == []) == (ok and name != "")
            if ok:  # the name must also equal the directory's name
                assert errors_of({"name": name, "description": "d"}, dir_name=name + "x") == ["name"]


@given(st.text(alphabet="abz09-_X", max_size=80))
def test_skills_name_rule(name: str) -> None:
    assert (errors_of({"name": name, "description": "d"}, dir_name=name) == []) == reference_name_ok(name)


@given(st.one_of(st.integers(), st.none(), st.booleans(), st.lists(st.text(max_size=3), max_size=2)))
def test_skills_name_rule_refuses_what_is_not_a_string(name: object) -> None:
    assert errors_of({"name": name, "description": "d"}) == ["name"]


@pytest.mark.parametrize("length", [0, 1, 2, DESCRIPTION_MAX - 1, DESCRIPTION_MAX, DESCRIPTION_MAX + 1, 5000])
def test_skills_description_rule_at_its_bounds(length: int) -> None:
    expected = [] if 1 <= length <= DESCRIPTION_MAX else ["description"]
    assert errors_of(good(description="d" * length)) == expected


@given(st.one_of(st.text(max_size=1100), st.integers(), st.none(), st.lists(st.text(max_size=2), max_size=2)))
def test_skills_description_rule(description: object) -> None:
    ok = isinstance(description, str) and 1 <= len(description) <= DESCRIPTION_MAX
    assert errors_of(good(description=description)) == ([] if ok else ["description"])


def test_skills_description_rule_requires_it() -> None:
    assert errors_of({"name": "a-skill"}) == ["description"]
    assert errors_of({"description": "d"}) == ["name"]


@given(st.one_of(st.text(max_size=600), st.integers(), st.none()))
def test_skills_compatibility_rule(compatibility: object) -> None:
    ok = isinstance(compatibility, str) and len(compatibility) <= COMPATIBILITY_MAX
    assert errors_of(good(compatibility=compatibility)) == ([] if ok else ["compatibility"])


@pytest.mark.parametrize("length", [0, COMPATIBILITY_MAX, COMPATIBILITY_MAX + 1])
def test_skills_compatibility_rule_at_its_bounds(length: int) -> None:
    assert errors_of(good(compatibility="c" * length)) == ([] if length <= COMPATIBILITY_MAX else ["compatibility"])


SCALARS = st.one_of(st.text(max_size=4), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())


@given(st.one_of(st.dictionaries(SCALARS, SCALARS, max_size=4), SCALARS, st.lists(SCALARS, max_size=2)))
def test_skills_metadata_rule(metadata: object) -> None:
    ok = isinstance(metadata, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    assert errors_of(good(metadata=metadata)) == ([] if ok else ["metadata"])
    if ok:
        fields, _ = validate(fact(good(metadata=metadata)))
        assert fields is not None and dict(fields.metadata) == metadata


@given(SCALARS)
def test_skills_license_rule(license_: object) -> None:
    assert errors_of(good(license=license_)) == ([] if isinstance(license_, str) else ["license"])


@given(st.one_of(SCALARS, st.lists(SCALARS, max_size=3)))
def test_skills_allowed_tools_rule(tools: object) -> None:
    ok = isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    assert errors_of(good(**{"allowed-tools": tools})) == ([] if ok else ["allowed-tools"])
    if ok:
        fields, _ = validate(fact(good(**{"allowed-tools": tools})))
        assert fields is not None
        assert fields.allowed_tools == (" ".join(tools) if isinstance(tools, list) else tools)


BROKEN: dict[str, object] = {
    "name": "Not_A_Name",
    "description": "",
    "license": 3,
    "compatibility": "c" * (COMPATIBILITY_MAX + 1),
    "metadata": {"version": 1.0},
    "allowed-tools": {"a": 1},
}


def test_skills_diagnostic_names_the_file_and_the_field_exhaustive() -> None:
    """Every set of broken fields (all 64 of them): the errors name exactly those fields, each with the file."""
    for count in range(len(BROKEN) + 1):
        for broken in itertools.combinations(BROKEN, count):
            front = good(**{field: BROKEN[field] for field in broken})
            one = fact(front)
            fields, diagnostics = validate(one)
            errors = [d for d in diagnostics if d.severity is Severity.ERROR]
            assert sorted(str(d.field) for d in errors) == sorted(broken)
            assert all(d.file == one.skill_file and d.message for d in diagnostics)
            assert (fields is None) == bool(broken)


@given(st.dictionaries(st.text(min_size=1, max_size=8), SCALARS, max_size=4))
def test_skills_unknown_field_warns_and_keeps_the_skill(extra: dict[str, object]) -> None:
    unknown = {k: v for k, v in extra.items() if k not in good() and k not in BROKEN}
    fields, diagnostics = validate(fact(good(**unknown)))
    assert fields is not None
    assert sorted(str(d.field) for d in diagnostics) == sorted(unknown)
    assert all(d.severity is Severity.WARNING for d in diagnostics)


@pytest.mark.parametrize(
    "front", [NO_FRONTMATTER, Unparsable("bad yaml"), None, "text", ["name"], 3], ids=lambda f: repr(f)[:20]
)
def test_skills_frontmatter_must_be_a_mapping(front: object) -> None:
    assert errors_of(front) == [None]


# --- precedence ------------------------------------------------------------------------------------------------------

NAMES = ("alpha", "beta", "gamma")


@st.composite
def facts(draw: st.DrawFn) -> list[SkillFact]:
    """Skills found: each name at most once per root (a root is one directory), some invalid."""
    cells = draw(st.sets(st.tuples(st.sampled_from(range(len(ROOTS))), st.sampled_from(NAMES)), max_size=10))
    found = []
    for root, name in sorted(cells):
        valid = draw(st.booleans())
        front = {"name": name, "description": f"{name} at {root}"} if valid else {"name": name}
        found.append(fact(front, name, root, draw(st.booleans())))
    return draw(st.permutations(found))


def check_precedence(found: list[SkillFact]) -> None:
    verdicts = decide(found)
    assert sorted(id(v.fact) for v in verdicts) == sorted(id(f) for f in found)  # each fact listed once
    for name in NAMES:
        rows = [v for v in verdicts if v.fact.dir_name == name]
        valid = [v for v in rows if v.status is not Status.INVALID]
        winners = [v for v in rows if v.status is Status.OFFERED]
        assert len(winners) == (1 if valid else 0)  # one skill offered per name, when any is valid
        if not winners:
            continue
        winner = winners[0]
        assert winner.fact.root == min(v.fact.root for v in valid)  # the first root wins among valid skills
        if any(v.fact.scope is Scope.USER for v in valid):
            assert winner.fact.scope is Scope.USER  # the user's skill wins over the project's
        for row in valid:
            if row is not winner:
                assert row.status is Status.SHADOWED and row.shadowed_by == winner.fact.skill_file
        assert rows[0] is winner or rows[0].fact.root < winner.fact.root  # listed by precedence
    for verdict in verdicts:
        assert (verdict.status is Status.INVALID) == (verdict.fields is None)
        assert (verdict.shadowed_by is None) == (verdict.status is not Status.SHADOWED)


@given(facts())
def test_skills_precedence(found: list[SkillFact]) -> None:
    check_precedence(found)


def test_skills_precedence_exhaustive() -> None:
    """One name, every subset of the roots, every validity of each."""
    for count in range(len(ROOTS) + 1):
        for roots in itertools.combinations(range(len(ROOTS)), count):
            for validity in itertools.product((False, True), repeat=count):
                found = [
                    fact({"name": "alpha", "description": "d"} if ok else {"name": "alpha"}, "alpha", root)
                    for root, ok in zip(roots, validity, strict=True)
                ]
                check_precedence(found)
                check_precedence(found[::-1])


def test_skills_precedence_user_over_project() -> None:
    user = fact(good(), root=1)
    project = fact(good(), root=2)
    verdicts = decide([project, user])
    assert [(v.fact.scope, v.status) for v in verdicts] == [
        (Scope.USER, Status.OFFERED),
        (Scope.PROJECT, Status.SHADOWED),
    ]
    assert verdicts[1].shadowed_by == user.skill_file


# --- the catalog ----------------------------------------------------------------------------------------------------

SKILL_FIELDS = st.builds(
    Fields,
    name=st.from_regex(r"[a-z]{1,12}", fullmatch=True),
    description=st.text(min_size=1, max_size=DESCRIPTION_MAX),
)


@given(st.lists(SKILL_FIELDS, max_size=30), st.integers(min_value=0, max_value=4096))
def test_skills_catalog_within_limit(skills: list[Fields], limit: int) -> None:
    text = catalog_text(skills, limit)
    assert len(text.encode("utf-8", "surrogatepass")) <= limit
    if skills and size(f"{CATALOG_HEAD}\n{cut_line(len(skills))}") <= limit:
        assert text  # something is said whenever the head and the cut line fit
    if not skills or not text:
        return
    lines = text.split("\n")
    full = catalog_text(skills, 10**9).split("\n")
    if lines == full:
        return
    shown = len(lines) - 2  # the head line, the skills kept, the cut line
    assert lines[:-1] == full[: shown + 1]  # the first skills, whole
    assert lines[-1] == cut_line(len(skills) - shown)  # says how many were left out
    one_more = [*full[: shown + 2], cut_line(len(skills) - shown - 1)]
    assert size("\n".join(one_more)) > limit  # as many kept as fit


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def test_skills_catalog_within_limit_cuts_with_a_count() -> None:
    skills = [Fields(name=f"s{i}", description="d" * 300) for i in range(20)]
    text = catalog_text(skills)
    assert len(text.encode()) <= 2048
    assert text.endswith(cut_line(20 - (len(text.split("\n")) - 2)))
    assert "s0: " in text and "s19" not in text
    assert catalog_text([]) == ""


# --- the frontmatter --------------------------------------------------------------------------------------------------

LINE = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    ),
    max_size=10,
)


@given(st.lists(LINE.filter(lambda line: line.strip() != "---"), max_size=5), st.text(max_size=40))
def test_skills_frontmatter_split(yaml_lines: list[str], body: str) -> None:
    yaml_text = "".join(line + "\n" for line in yaml_lines)
    assert split_frontmatter(f"---\n{yaml_text}---\n{body}") == (yaml_text, body.lstrip("\r\n"))
    assert split_frontmatter(f"x\n---\n{yaml_text}---\n") is None
    assert split_frontmatter(f"---\n{yaml_text}") is None


# --- what a kernel is told --------------------------------------------------------------------------------------------


@st.composite
def offered_skills(draw: st.DrawFn) -> tuple[list[tuple[Fields, SkillFact, str, str]], dict[str, str]]:
    """Offered skills (some Python, some with a src/ layout) and a mount map holding some of their directories."""
    rows = []
    mounts: dict[str, str] = {}
    for index, name in enumerate(draw(st.lists(st.sampled_from(NAMES), unique=True))):
        root = draw(st.sampled_from(range(len(ROOTS))))
        one = fact({"name": name, "description": "d"}, name, root, python=draw(st.booleans()))
        host_dir = f"/r{root}/{name}"
        host_import = host_dir + "/src" if draw(st.booleans()) else host_dir
        if draw(st.booleans()):
            mounts[host_dir] = f"/sandbox/{index}"
            mounts[host_import] = f"/sandbox/{index}" + host_import[len(host_dir) :]
        fields, _ = validate(one)
        assert fields is not None
        rows.append((fields, one, host_dir, host_import))
    return rows, mounts


@given(offered_skills(), st.sets(st.sampled_from(NAMES)))
def test_skills_kernel_path_each_python_skill_on_the_path_or_left_out(
    drawn: tuple[list[tuple[Fields, SkillFact, str, str]], dict[str, str]], installed_names: set[str]
) -> None:
    rows, mounts = drawn
    told = kernel_skills(rows, mounts.get, installed=installed_names)
    assert [skill.name for skill in told.skills] == [fields.name for fields, *_ in rows]  # each, in order
    expected_path = []
    expected_left = []
    for (fields, one, host_dir, host_import), skill in zip(rows, told.skills, strict=True):
        assert skill.path == mounts.get(host_dir)  # as the kernel sees it
        assert skill.python == one.python
        if not one.python or (one.scope is Scope.USER and fields.name in installed_names):
            assert skill.import_path is None  # nothing on the path: not a package, or a user's installed in the venv
        elif host_import in mounts:
            assert skill.import_path == mounts[host_import]
            expected_path.append(mounts[host_import])
        else:
            assert skill.import_path is None
            expected_left.append(fields.name)
    assert list(told.python_path) == expected_path  # in front, in precedence order
    assert len(told.left_out) == len(expected_left)
    for line, name in zip(told.left_out, expected_left, strict=True):
        assert f"the Python skill {name} " in line and "outside every mount" in line


def test_skills_installed_on_host_exhaustive() -> None:
    """Only a user's Python skill is built and installed on the host; a project's never is, whatever its name."""
    for root, python in itertools.product(range(len(ROOTS)), (False, True)):
        one = fact({"name": "a-skill", "description": "d"}, root=root, python=python)
        assert installed_on_host(one) is (python and ROOTS[root][0] is Scope.USER)


@given(offered_skills(), st.sets(st.sampled_from(NAMES)))
def test_skills_kernel_path_a_project_python_skill_is_always_imported_from_its_source(
    drawn: tuple[list[tuple[Fields, SkillFact, str, str]], dict[str, str]], installed_names: set[str]
) -> None:
    rows, mounts = drawn
    everything = installed_names | {fields.name for fields, *_ in rows}  # even a record naming every skill
    told = kernel_skills(rows, mounts.get, installed=everything)
    for (fields, one, _, host_import), skill in zip(rows, told.skills, strict=True):
        if one.python and one.scope is Scope.PROJECT:
            on_path = skill.import_path is not None
            left_out = any(f"the Python skill {fields.name} " in line for line in told.left_out)
            assert on_path != left_out  # from its source: on the path, or said to be left out
            assert on_path == (host_import in mounts)
