"""`limits` in the user settings: typed, defaults where unset, and each refusal names its field."""

from __future__ import annotations

import pytest

from eukhe.core import limits as core
from eukhe.errors import InputError
from eukhe.records.base import decode_json
from eukhe.records.settings import ResourceLimits, UserSettings


def test_unset_keys_keep_their_defaults() -> None:
    settings = decode_json(b'{"limits": {"max_processes": 64}}', UserSettings, code="bad_setting", what="x")
    assert settings.limits == ResourceLimits(max_processes=64)
    assert settings.limits.to_core() == core.Settings(64, None, None)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (b'{"limits": {"max_processes": 3}}', "limits.max_processes"),
        (b'{"limits": {"max_memory_mb": 10}}', "limits.max_memory_mb"),
        (b'{"limits": {"max_tmp_mb": -1}}', "max_tmp_mb"),
        (b'{"limits": {"max_memory_mb": "lots"}}', "max_memory_mb"),
        (b'{"limits": {"max_files": 3}}', "max_files"),
    ],
)
def test_a_bad_limit_is_refused_naming_its_field(text: bytes, field: str) -> None:
    with pytest.raises(InputError) as raised:
        decode_json(text, UserSettings, code="bad_setting", what="settings.json")
    assert raised.value.code == "bad_setting"
    assert field in str(raised.value)


def test_zero_is_no_limit() -> None:
    assert ResourceLimits(max_processes=0, max_memory_mb=0, max_tmp_mb=0).to_core() == core.Settings(0, 0, 0)
