"""Settings are strict wherever they come from: decoded from JSON or built in Python, an unknown key, a missing or
mistyped value is an InputError (`bad_setting`) that names the field; the core's Truncation maps one to one."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.bound import Keep, Off, On, OutputLimits
from eukhe.errors import InputError
from eukhe.records.base import decode_json
from eukhe.records.settings import Limits, SessionSettings, setting_of, truncation_of


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: SessionSettings(tool_blocking_budget_ms=-1), "tool_blocking_budget_ms"),
        (lambda: SessionSettings(tool_blocking_budget_ms="5"), "tool_blocking_budget_ms"),
        (lambda: SessionSettings(truncation="on"), "truncation"),
        (lambda: Limits(max_bytes=-3), "max_bytes"),
        (lambda: Limits(keep="middle"), "keep"),
        (lambda: SessionSettings(truncation=Off()), "truncation"),  # a core value: bounded_by is the way
        (lambda: SessionSettings(truncation=On(OutputLimits(1, 1))), "truncation"),
    ],
)
def test_settings_built_in_python_are_checked(make: object, field: str) -> None:
    with pytest.raises(InputError) as refused:
        make()  # type: ignore[operator]
    assert (refused.value.code, refused.value.field) == ("bad_setting", field)


def test_settings_decoded_from_json_name_the_field_and_hint_the_camel_case_spelling() -> None:
    with pytest.raises(InputError) as refused:
        decode_json(b'{"toolBlockingBudgetMs": 5}', SessionSettings, code="bad_setting", what="settings")
    assert refused.value.field == "toolBlockingBudgetMs"
    assert refused.value.hint == "tool_blocking_budget_ms"
    with pytest.raises(InputError) as nested:
        decode_json(b'{"truncation": {"maxBytes": 5}}', SessionSettings, code="bad_setting", what="settings")
    assert (nested.value.field, nested.value.hint) == ("truncation.maxBytes", "max_bytes")
    off = decode_json(b'{"truncation": "off"}', SessionSettings, code="bad_setting", what="settings")
    assert off.bound == Off()


@given(st.integers(0, 10**9), st.integers(0, 10**6), st.sampled_from(Keep))
def test_the_truncation_setting_maps_the_cores_one_to_one(max_bytes: int, max_lines: int, keep: Keep) -> None:
    truncation = On(OutputLimits(max_bytes, max_lines, keep))
    assert truncation_of(setting_of(truncation)) == truncation
    settings = SessionSettings.bounded_by(truncation)
    assert msgspec.json.decode(msgspec.json.encode(settings), type=SessionSettings) == settings
    assert truncation_of(setting_of(Off())) == Off()


def test_a_sandbox_policy_refuses_a_relative_path_by_name() -> None:
    from eukhe.errors import InputError
    from eukhe.records.base import decode_json
    from eukhe.records.sandbox import SandboxPolicy
    from eukhe.records.settings import UserSettings

    with pytest.raises(InputError) as refused:
        decode_json(b'{"sandbox": {"writable_roots": ["rel"]}}', UserSettings, code="bad_setting", what="s.json")
    assert refused.value.code == "bad_setting"
    assert "sandbox.writable_roots[0]" in str(refused.value)
    with pytest.raises(InputError):
        decode_json(b'{"sandbox": {"mode": "loose"}}', UserSettings, code="bad_setting", what="s.json")
    assert SandboxPolicy(writable_roots=["~/x", "/abs"]).confined


@pytest.mark.parametrize("kind", ["UserSettings", "ProjectSettings"])
@pytest.mark.parametrize(
    ("names", "index", "said"),
    [
        ('["GOOD", "not-a-name"]', 1, "variable's name"),
        ('["1ST"]', 0, "variable's name"),
        ('[""]', 0, "variable's name"),
        ('["EUKHE_MCP_TOKEN"]', 0, "eukhe's own secret"),
    ],
)
def test_env_passthrough_refuses_a_bad_entry_by_name(kind: str, names: str, index: int, said: str) -> None:
    from eukhe.records import settings

    document = f'{{"sandbox": {{"env_passthrough": {names}}}}}'.encode()
    with pytest.raises(InputError) as refused:
        decode_json(document, getattr(settings, kind), code="bad_setting", what="s.json")
    assert refused.value.code == "bad_setting"
    assert refused.value.field == "sandbox"  # where the decoder was; the message names the entry
    assert f"sandbox.env_passthrough[{index}] " in str(refused.value) and said in str(refused.value)


def test_env_passthrough_reaches_the_core_policy_and_back() -> None:
    from eukhe.records.sandbox import ProjectSandbox, SandboxPolicy

    policy = SandboxPolicy(env_passthrough=["MY_API_KEY"])
    assert policy.to_core().env_passthrough == ("MY_API_KEY",)
    assert SandboxPolicy.of(policy.to_core()) == policy
    assert SandboxPolicy().env_passthrough == []
    assert ProjectSandbox(env_passthrough=[]).to_core().env_passthrough == ()
    assert ProjectSandbox().to_core().env_passthrough is None
    with pytest.raises(InputError) as refused:
        SandboxPolicy(env_passthrough=["A B"])
    assert refused.value.field == "sandbox.env_passthrough[0]"
