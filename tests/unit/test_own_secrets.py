"""eukhe's own secrets are left out of an environment, and nothing else is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.own_secrets import MCP_TOKEN, OWN_SECRETS, without_own_secrets

NAMES = st.sampled_from([MCP_TOKEN, "PATH", "HOME", "EUKHE_MCP_TOKEN_FILE", "eukhe_mcp_token"]) | st.text(max_size=8)


@given(st.dictionaries(NAMES, st.text(max_size=8)))
def test_without_own_secrets_drops_exactly_the_secrets(environment: dict[str, str]) -> None:
    kept = without_own_secrets(environment)
    assert kept == {name: value for name, value in environment.items() if name not in OWN_SECRETS}
    assert MCP_TOKEN not in kept


def test_the_variables_eukhe_sets_for_a_launch_do_not_look_like_secrets() -> None:
    """The secret filter runs over a kernel's launch after eukhe added its own entries: none of them may look like
    a secret, or a confined kernel would lose it."""
    from eukhe.core.jobleft import KEEPER_ENV, USER_BASH_ENV
    from eukhe.core.secret_env import looks_secret
    from eukhe.jobs.bash import JOB_MARK_ENV
    from eukhe.kernel.launch import OWNER_PID_VARIABLE, OWNER_VARIABLE, SKILLS_VARIABLE
    from eukhe_kernel.snapshot import SNAPSHOT_VARIABLE

    names = [KEEPER_ENV, USER_BASH_ENV, JOB_MARK_ENV, OWNER_PID_VARIABLE, OWNER_VARIABLE, SKILLS_VARIABLE]
    names += [SNAPSHOT_VARIABLE, "PYTHONPATH", "TERM", "TMPDIR"]
    assert [name for name in names if looks_secret(name)] == []
