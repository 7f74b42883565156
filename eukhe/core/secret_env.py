"""Which environment variables look like secrets, and the environment a launch gets without them (docs/sandbox.md,
"The environment: secrets left out").

A confined launch (a bash job, a terminal, the kernel, and so a child's jobs and cells) gets the host's environment
minus every variable that looks like a secret, unless the policy's `env_passthrough` names it; eukhe's own secrets
(`own_secrets.OWN_SECRETS`) never pass. An unconfined launch (mode `off`) gets the user's environment as it is,
minus eukhe's own secrets only: with the sandbox off, a command has the user's full rights anyway.

The rule, on a variable's name, in upper case:
- its words are the runs of letters and digits between any other characters (`_`, `-`, `.`), each without its
  trailing digits;
- the name looks secret when one of its words ends with a stem of `SECRET_STEMS`, or with one and an `S`
  (`API_KEY`, `APIKEY`, `openaiApiKey`, `GH_TOKEN`, `CLIENT_SECRET`, `PGPASSWORD`, `DB_PASSWORD2`,
  `GOOGLE_APPLICATION_CREDENTIALS`), or is one of `SECRET_WORDS` (`DB_PASS`);
- or it is one of the known names of `KNOWN_SECRETS`, or has a known prefix (`AWS_*`), or it is `held` (the
  variable the model key for prompt children is in, whatever its name).
A name of `NOT_SECRETS` never looks secret (`GIT_CONFIG_KEY_0`: git's config given in the environment, which
git refuses to run without). A word that only starts with a stem is not one: `KEYBOARD`, `KEYMAP`,
`TOKENIZERS_PARALLELISM`, `PASSTHROUGH` stay.
Words end-matched and not substrings: the plain substring would take `TOKENIZERS_PARALLELISM` and `KEYTIMEOUT`; a
word matched whole would miss `APIKEY`, `PGPASSWORD` and every camelCase name. The price is a rare word that ends
like a stem by chance (`MONKEY`), which `env_passthrough` lets through.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from eukhe.core.own_secrets import OWN_SECRETS, without_own_secrets

SECRET_STEMS: tuple[str, ...] = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
"""A word ending with one of these (or with one and an `S`) makes a name look secret."""

SECRET_WORDS: tuple[str, ...] = ("PASS",)
"""A word that is one of these makes a name look secret (`PASS` only whole: `PASSTHROUGH`, `BYPASS` stay)."""

KNOWN_SECRETS: tuple[tuple[str, str], ...] = (
    ("AWS_*", "AWS: access keys, session tokens, and the profile, role and endpoints they go with"),
    ("GITHUB_TOKEN", "GitHub token (Actions, gh, hub)"),
    ("GH_TOKEN", "GitHub CLI token"),
    ("ANTHROPIC_API_KEY", "Anthropic API key"),
    ("OPENAI_API_KEY", "OpenAI API key (the default `model.api_key_env`)"),
    ("EUKHE_MCP_TOKEN", "eukhe's own: the bearer token of `eukhe mcp --http` (never passed through)"),
    ("MYSQL_PWD", "MySQL password"),
    ("SSHPASS", "sshpass's password"),
    ("AZURE_DEVOPS_EXT_PAT", "Azure DevOps personal access token"),
    ("NPM_CONFIG__AUTH", "npm registry credentials (`_auth`)"),
    ("DOCKER_AUTH_CONFIG", "Docker registry credentials (GitLab CI)"),
)
"""Names known to hold secrets, each with whose (a name ending in `*` is a prefix), whatever the rule says of them:
the rule catches most already; these are the ones it must never miss, and the ones it would (`MYSQL_PWD`)."""

NOT_SECRETS = re.compile(r"GIT_CONFIG_KEY_[0-9]+")
"""Names the rule would take that hold no secret and that a program needs whole: git reads `GIT_CONFIG_COUNT`
entries as `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>`, and stops at a missing one."""

KNOWN_NAMES = frozenset(name for name, _ in KNOWN_SECRETS if not name.endswith("*"))
KNOWN_PREFIXES = tuple(name[:-1] for name, _ in KNOWN_SECRETS if name.endswith("*"))

_ENDINGS = tuple(stem + plural for stem in SECRET_STEMS for plural in ("", "S"))
_SEPARATORS = re.compile(r"[^A-Z0-9]+")
_TRAILING_DIGITS = re.compile(r"[0-9]+$")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def words(name: str) -> tuple[str, ...]:
    """A name's words: the upper-case runs of letters and digits between other characters, without trailing digits."""
    return tuple(word for part in _SEPARATORS.split(name.upper()) if (word := _TRAILING_DIGITS.sub("", part)))


def looks_secret(name: str, held: Collection[str] = ()) -> bool:
    """Whether a variable's name looks like a secret's (the module's rule); `held`: more names that hold one."""
    upper = name.upper()
    if upper in KNOWN_NAMES or upper.startswith(KNOWN_PREFIXES) or upper in {other.upper() for other in held}:
        return True
    if NOT_SECRETS.fullmatch(upper):
        return False
    return any(word.endswith(_ENDINGS) or word in SECRET_WORDS for word in words(name))


def without_secrets(
    environment: Mapping[str, str], passthrough: Collection[str] = (), held: Collection[str] = ()
) -> dict[str, str]:
    """`environment` without the variables that look like secrets, except those `passthrough` names exactly;
    eukhe's own secrets are left out whatever `passthrough` says."""
    return {
        name: value
        for name, value in environment.items()
        if name not in OWN_SECRETS and (name in passthrough or not looks_secret(name, held))
    }


def launch_environment(
    environment: Mapping[str, str], *, confined: bool, passthrough: Collection[str] = (), held: Collection[str] = ()
) -> dict[str, str]:
    """What a launch gets of the host's `environment`: confined, `without_secrets`; unconfined, all of it but
    eukhe's own secrets."""
    if confined:
        return without_secrets(environment, passthrough, held)
    return without_own_secrets(environment)


def passthrough_problem(name: object) -> str | None:
    """Why `name` cannot be an entry of `env_passthrough` (None: it can): not a variable's name, or eukhe's own."""
    if not (isinstance(name, str) and _VARIABLE.fullmatch(name)):
        return f"must be a variable's name (letters, digits and _, not starting with a digit), got {name!r}"
    if name in OWN_SECRETS:
        return f"names {name}, eukhe's own secret, which no launch ever gets"
    return None
