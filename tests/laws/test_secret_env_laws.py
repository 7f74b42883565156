"""Laws of the environment a launch gets (eukhe.core.secret_env): a confined launch gets no variable that looks like a
secret unless `env_passthrough` names it, eukhe's own secrets never, and every other variable as it is; over free
names (built of secret stems, harmless words and separators, and any text) and exhaustively over the known names."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from eukhe.core import secret_env as core
from eukhe.core.own_secrets import OWN_SECRETS

KNOWN = [name for name, _ in core.KNOWN_SECRETS if not name.endswith("*")]
PREFIXED = [name[:-1] + rest for name, _ in core.KNOWN_SECRETS if name.endswith("*") for rest in ("X", "REGION", "")]
WORDS = [
    *core.SECRET_STEMS,
    *core.SECRET_WORDS,
    "API",
    "MY",
    "DB",
    "KEYBOARD",
    "TOKENIZERS",
    "PASSTHROUGH",
    "PATH",
    "HOME",
    "EUKHE",
    "MCP",
    "AWS",
    "S",
    "2",
    "x",
]
built = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).flatmap(
    lambda parts: st.sampled_from(["_", "", "-", "."]).map(lambda sep: sep.join(parts))
)
cased = built.flatmap(lambda name: st.sampled_from([name, name.lower(), name.title()]))
names = cased | st.sampled_from([*KNOWN, *PREFIXED, *OWN_SECRETS]) | st.text(max_size=12)
environments = st.dictionaries(names, st.text(max_size=4), max_size=8)


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, str], list[str], list[str]]:
    """An environment, a passthrough and the held names, the last two partly of the environment's own names."""
    env = draw(environments)
    own = st.sampled_from(sorted(env)) if env else st.nothing()
    passthrough = draw(st.lists(own | names, max_size=4))
    held = draw(st.lists(own | names, max_size=2))
    return env, passthrough, held


@given(cases())
def test_secret_env_removes_every_secret_name(case: tuple[dict[str, str], list[str], list[str]]) -> None:
    env, passthrough, held = case
    kept = core.without_secrets(env, passthrough, held)
    for name in kept:
        assert name not in OWN_SECRETS
        assert name in passthrough or not core.looks_secret(name, held), name


@given(cases())
def test_secret_env_keeps_the_rest(case: tuple[dict[str, str], list[str], list[str]]) -> None:
    env, passthrough, held = case
    kept = core.without_secrets(env, passthrough, held)
    assert all(env[name] == value for name, value in kept.items())  # nothing added, nothing changed
    for name in env:
        if name not in OWN_SECRETS and not core.looks_secret(name, held):
            assert name in kept, name


@given(cases())
def test_secret_env_passthrough_wins_except_own(case: tuple[dict[str, str], list[str], list[str]]) -> None:
    env, passthrough, held = case
    kept = core.without_secrets(env, passthrough, held)
    for name in env:
        if name in passthrough:
            assert (name in kept) is (name not in OWN_SECRETS), name


@given(cases())
def test_secret_env_idempotent(case: tuple[dict[str, str], list[str], list[str]]) -> None:
    env, passthrough, held = case
    once = core.without_secrets(env, passthrough, held)
    assert core.without_secrets(once, passthrough, held) == once


@given(cases())
def test_secret_env_unconfined_leaves_out_own_secrets_only(case: tuple[dict[str, str], list[str], list[str]]) -> None:
    env, passthrough, held = case
    confined = core.launch_environment(env, confined=True, passthrough=passthrough, held=held)
    assert confined == core.without_secrets(env, passthrough, held)
    unconfined = core.launch_environment(env, confined=False, passthrough=passthrough, held=held)
    assert unconfined == {name: value for name, value in env.items() if name not in OWN_SECRETS}


def test_secret_env_removes_every_known_name_small_scope() -> None:
    """Each known name and each name of a known prefix, in any case, with any passthrough but itself, is left out;
    named in passthrough it stays, unless it is eukhe's own."""
    for known, case in itertools.product([*KNOWN, *PREFIXED, *OWN_SECRETS], [str.upper, str.lower, str.title]):
        name = case(known)
        assert core.looks_secret(name), name
        env = {name: "v", "PATH": "/bin"}
        assert core.without_secrets(env, ["PATH", "OTHER"]) == {"PATH": "/bin"}
        assert (name in core.without_secrets(env, [name])) is (name not in OWN_SECRETS)


def test_secret_env_held_names_are_secrets_whatever_they_are_called() -> None:
    for name in ("LLM_ACCESS", "x", "MODEL"):
        assert not core.looks_secret(name)
        assert core.looks_secret(name, [name]) and core.looks_secret(name.lower(), [name])
        assert core.without_secrets({name: "k"}, held=[name]) == {}
        assert core.without_secrets({name: "k"}, [name], held=[name]) == {name: "k"}


SECRET = [
    "MY_API_KEY",
    "API_KEY_2",
    "APIKEY",
    "apiKey",
    "openaiApiKey",
    "GITHUB_TOKEN",
    "SLACK_BOT_TOKENS",
    "HF_TOKEN",
    "CLIENT_SECRET",
    "SECRETS_DIR",
    "DB_PASSWORD",
    "PGPASSWORD",
    "MYSQL_PASSWD",
    "DB_PASS",
    "SOME_CREDENTIAL_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH.KEY",
    "KEY",
    "AWS_REGION",
    "MYSQL_PWD",
]
HARMLESS = [
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "KEYBOARD",
    "KEYTIMEOUT",
    "XKB_DEFAULT_LAYOUT",
    "TOKENIZERS_PARALLELISM",
    "PASSTHROUGH",
    "GIT_ASKPASS",
    "SSH_AUTH_SOCK",
    "GNOME_KEYRING_CONTROL",
    "SECRETARY",
    "EUKHE_KEEPER",
    "EUKHE_JOB_MARK",
    "EUKHE_KERNEL_OWNER_PID",
    "EUKHE_TEST_HARMLESS",
    "GIT_CONFIG_KEY_0",
    "GIT_CONFIG_KEY_12",
    "LANG",
    "",
]


FALSE_ALARMS = ["MONKEY", "GPG_KEY_ID", "SSH_KEY_PATH", "AWS_REGION", "PASSWORD_STORE_DIR"]
"""Harmless, and left out all the same: the price docs/sandbox.md names (env_passthrough lets them through)."""


def test_secret_env_rule_on_examples_small_scope() -> None:
    """The module's rule on the names its docs (and docs/sandbox.md) give either way."""
    assert [name for name in [*SECRET, *FALSE_ALARMS] if not core.looks_secret(name)] == []
    assert [name for name in HARMLESS if core.looks_secret(name)] == []


def test_secret_env_git_config_keys_are_not_secrets_small_scope() -> None:
    """git stops at a missing `GIT_CONFIG_KEY_<n>` of its `GIT_CONFIG_COUNT`: each such name passes, every number."""
    assert [n for n in range(1000) if core.looks_secret(f"GIT_CONFIG_KEY_{n}")] == []
    assert core.looks_secret("GIT_CONFIG_KEY_X") and core.looks_secret("MY_GIT_CONFIG_KEY_0")


def test_secret_env_words() -> None:
    assert core.words("my_api-key2.x") == ("MY", "API", "KEY", "X")
    assert core.words("__a__") == ("A",)
    assert core.words("123_") == ()


def test_secret_env_passthrough_entries_are_variable_names_and_not_own() -> None:
    for good in ("A", "_", "MY_API_KEY", "a1", "GITHUB_TOKEN"):
        assert core.passthrough_problem(good) is None, good
    for bad in ("", "1A", "A-B", "A B", "A=B", "É", 3, None):
        problem = core.passthrough_problem(bad)
        assert problem is not None and "variable's name" in problem, bad
    for own in OWN_SECRETS:
        problem = core.passthrough_problem(own)
        assert problem is not None and "eukhe's own" in problem
