"""What uv set to run eukhe itself is left out of the environment jobs and the kernel get, and nothing else is: uv's
parent interpreter always, `VIRTUAL_ENV` only when it names eukhe's own environment."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core.own_launch import PARENT_INTERPRETER, VIRTUAL_ENV, without_own_launch

OWN = "/opt/eukhe/.venv"
NAMES = st.sampled_from([PARENT_INTERPRETER, VIRTUAL_ENV, "PATH", "HOME", "virtual_env"]) | st.text(max_size=8)
VALUES = st.sampled_from([OWN, OWN + "/", "/opt/eukhe/./.venv", "/opt/other/.venv", ".venv", ""]) | st.text(max_size=8)


@given(st.dictionaries(NAMES, VALUES))
def test_without_own_launch_drops_exactly_uvs_variables_for_eukhe(environment: dict[str, str]) -> None:
    kept = without_own_launch(environment, (OWN,))
    own_venv = environment.get(VIRTUAL_ENV) in (OWN, OWN + "/", "/opt/eukhe/./.venv")
    dropped = {PARENT_INTERPRETER, *([VIRTUAL_ENV] if own_venv else [])}
    assert kept == {name: value for name, value in environment.items() if name not in dropped}


def test_a_virtual_env_of_the_users_stays_and_eukhes_goes() -> None:
    environment = {VIRTUAL_ENV: OWN, PARENT_INTERPRETER: "/usr/bin/python3", "PATH": "/usr/bin"}
    assert without_own_launch(environment, ("/elsewhere", OWN)) == {"PATH": "/usr/bin"}
    users = {VIRTUAL_ENV: "/home/u/project/.venv"}
    assert without_own_launch(users, (OWN,)) == users
