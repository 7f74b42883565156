"""One error catalogue: every code is listed once with its meaning (`eukhe.errors.CATALOGUE`), docs/errors.md is that
table, every error class's code is in it and every error class's name ends in Error."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import eukhe
from eukhe.errors import CATALOGUE, EukheError

ROOT = Path(__file__).resolve().parents[2]
CODED = {"InputError", "CodedError", "RequestError", "DaemonError", "WorkerStartError", "WorkerUnreachableError"}
"""Error classes whose code is chosen where they are raised (their first argument)."""


def all_error_classes() -> set[type[EukheError]]:
    for module in pkgutil.walk_packages(eukhe.__path__, "eukhe."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: set[type[EukheError]] = set()
    stack: list[type[EukheError]] = [EukheError]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_docs_errors_md_is_the_catalogue() -> None:
    text = (ROOT / "docs" / "errors.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", text, flags=re.MULTILINE)
    assert [code for code, _ in rows] == list(CATALOGUE)
    assert {code: meaning.replace("\\|", "|") for code, meaning in rows} == CATALOGUE


def test_every_error_class_has_a_catalogued_code_and_a_name_that_ends_in_error() -> None:
    for cls in all_error_classes():
        assert cls.__name__.endswith("Error"), cls
        assert cls.code in CATALOGUE, (cls, cls.code)


def codes_raised_in_the_code() -> set[str]:
    """The first string argument of every call to an error class whose code is chosen where it is raised."""
    found: set[str] = set()
    for path in (ROOT / "eukhe").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            first = node.args[0]
            if name in CODED and isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
            for keyword in node.keywords:
                if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                    found.add(str(keyword.value.value))
    return found


def test_every_code_the_code_raises_is_catalogued() -> None:
    raised = codes_raised_in_the_code()
    assert {"bad_args", "unknown_op", "daemon_stopping"} <= raised  # the walk finds them
    assert raised - set(CATALOGUE) == set()


def test_unknown_session_is_one_code() -> None:
    assert "no_such_session" not in CATALOGUE
    assert "unknown_session" in CATALOGUE
