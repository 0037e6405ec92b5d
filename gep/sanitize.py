"""Redaction: the one place that decides what counts as a secret.

``redact`` runs over every text that leaves a workspace source (logs, transcripts, memory), every
prompt and everything the store keeps. ``scrub_env`` builds the environment of the commands the
engine runs, without the variables that hold credentials.

The pattern list covers at least the reference's ``sanitize.js`` (tokens of the big providers,
JWTs, private key blocks, credentials in URLs, generic ``key=value`` assignments, emails, home
directories, ``.env`` file names) plus a few it lacks (Anthropic/OpenAI key shapes with dashes,
``password: value`` with spaces, PEM blocks of any kind, Google API keys, Stripe keys).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"

_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"

# Patterns whose whole match is replaced. Order matters: whole structures (PEM blocks, URLs with
# credentials, JWTs) go before the shorter shapes that could eat part of them.
_WHOLE = [
    # PEM private keys (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ...), also when truncated at the end.
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    # JSON Web Tokens.
    r"eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]{10,}",
    # Provider keys.
    r"sk-ant-[A-Za-z0-9\-_]{16,}",
    r"sk-proj-[A-Za-z0-9\-_]{16,}",
    r"\bsk-[A-Za-z0-9\-_]{20,}",
    # The reference's floor: no word boundary before, alphanumerics only after "sk-".
    r"sk-[A-Za-z0-9]{20,}",
    r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"\bglpat-[A-Za-z0-9\-_]{20,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"\bAIza[0-9A-Za-z\-_]{35}",
    r"npm_[A-Za-z0-9]{36,}",
    r"\bhf_[A-Za-z0-9]{30,}",
    r"xox[abposrv]-[A-Za-z0-9-]{10,}",
    # Azure connection-string and app secrets.
    r"(?i:accountkey)=[^;\s]+",
    r"(?i:instrumentationkey)=[0-9a-fA-F-]{20,}",
]

# Patterns that keep a prefix (group "keep") and redact the rest of the match.
_KEEP_PREFIX = [
    # Authorization headers.
    # Any length once the token holds a digit or punctuation ("Bearer abc123"); prose such as
    # "Bearer tokens are ..." survives.
    r"(?P<keep>(?i:bearer)\s+)(?:[" + _TOKEN_CHARS + r"]{8,}|(?=[A-Za-z]*[0-9\-._~+/])[" + _TOKEN_CHARS + r"]+)=*",
    r"(?P<keep>\bBasic\s+)(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{12,}={0,2}",
    # user:password in URLs (scheme://user:pass@host): keep the scheme and the @.
    # The user may be empty (redis://:pass@host) and the password may hold "/".
    r"(?P<keep>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)[^@\s/:]*:[^@\s]+(?=@)",
    # Generic assignments: api_key=..., "password": "...", secret: ..., client_secret=...
    r"(?P<keep>(?<![A-Za-z0-9])(?i:(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key"
    r"|secret|passwd|password|passphrase|pwd|token|auth|credentials?))[\"']?\s*[:=]\s*[\"']?)"
    r"(?![\[{(<])[^\s\"',;)}\]]{4,}",
    # The reference's floor: these keywords also count inside a longer name (accessToken,
    # clientSecret, dbPassword, myApiKey).
    r"(?P<keep>(?i:token|api[_\-]?key|secret)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{16,}",
    r"(?P<keep>(?i:password)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;)}\]]{6,}",
]

# Personal data (no credential, but not for prompts or a shared store).
_PERSONAL = [
    r"(?<![a-zA-Z0-9._%+\-])[a-zA-Z0-9._%+\-]+@[a-zA-Z0-9.\-]+\.[a-zA-Z]{2,}",
    # The user name inside home directories (the rest of the path stays useful in tracebacks).
    r"(?P<keep>/home/|/Users/|[A-Z]:\\Users\\)(?!runner\b|circleci\b|distiller\b|vsts\b|travis\b|jenkins\b)[^\s/\\\"',;)}\]]+",
    # .env files with a suffix or as a path component (their content is all secrets).
    r"\.env\.[a-zA-Z]+\b",
    r"(?<=[\\/])\.env\b",
]

_ALLOWED_EMAIL = re.compile(
    r"^(?:(?:noreply|no-reply|donotreply|do-not-reply)@(?:github\.com|gitlab\.com|bitbucket\.org"
    r"|npmjs\.com|anthropic\.com|claude\.ai)|[a-zA-Z0-9._+\-]+@users\.noreply\.github\.com"
    r"|git@(?:github\.com|gitlab\.com|bitbucket\.org))$",
    re.IGNORECASE,
)

_SECRET_RES = [re.compile(p) for p in _WHOLE] + [re.compile(p) for p in _KEEP_PREFIX]

# Discord bot tokens: three base64url segments, the first (24+) starting with M, N or O at a word
# boundary, which may follow a "-" inside a longer run. Matching whole runs (each run is read
# once) and finding the token start in the callback keeps this linear on inputs like "M-M-M-...".
_DISCORD_RUN = re.compile(r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]{24,}+)\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}")


def _discord_start(first: str) -> int:
    """Where a token starts in the first segment of a run, or -1."""
    for i in range(len(first) - 23):
        if first[i] in "MNO" and (i == 0 or first[i - 1] == "-"):
            return i
    return -1


def _redact_discord(match: re.Match[str]) -> str:
    start = _discord_start(match.group(1))
    return match.group(0) if start < 0 else match.group(0)[:start] + REDACTED


_PERSONAL_RES = [re.compile(p) for p in _PERSONAL]


def _replace(match: re.Match[str]) -> str:
    text = match.group(0)
    if _ALLOWED_EMAIL.match(text):
        return text
    keep = match.groupdict().get("keep")
    if keep:
        return keep + REDACTED
    return REDACTED


def redact(text: str) -> str:
    """``text`` with every credential and personal datum replaced by ``[REDACTED]``."""
    if not text:
        return text
    for pattern in _SECRET_RES:
        text = pattern.sub(_replace, text)
    text = _DISCORD_RUN.sub(_redact_discord, text)
    for pattern in _PERSONAL_RES:
        text = pattern.sub(_replace, text)
    return text


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds a credential (personal data such as emails does not count)."""
    return any(p.search(text) for p in _SECRET_RES) or any(
        _discord_start(m.group(1)) >= 0 for m in _DISCORD_RUN.finditer(text)
    )


# ---------------------------------------------------------------- environment

_SECRET_NAME_PARTS = tuple(
    "SECRET PASSWORD PASSWD PASSPHRASE TOKEN CREDENTIAL APIKEY PRIVATE COOKIE SESSION".split()
)
_SECRET_NAME_WORDS = frozenset("KEY KEYS AUTH DSN PAT CERT SIGNATURE".split())
_SECRET_PREFIXES = tuple(
    """ANTHROPIC_ OPENAI_ AWS_ AZURE_ GOOGLE_ GCP_ GCLOUD_ GH_ GITHUB_TOKEN HF_ HUGGING NPM_ PYPI_
    TWINE_ SLACK_ DISCORD_ STRIPE_ DATABASE_URL GEP_DATABASE_URL VAULT_ SSH_ DOCKER_AUTH CLAUDE_
    GEMINI_ MISTRAL_ COHERE_ GROQ_""".split()
)
# Never dropped by name alone (their values are still checked).
_SAFE_NAMES = frozenset(
    """PATH HOME LANG LANGUAGE USER LOGNAME SHELL TERM TZ PWD OLDPWD TMPDIR TEMP TMP VIRTUAL_ENV
    PYTHONPATH PYTHONHASHSEED PYTHONDONTWRITEBYTECODE PYTHONUNBUFFERED PYTHONIOENCODING PYTHONUTF8
    KEYBOARD NODE_PATH NODE_ENV SYSTEMROOT COMSPEC PATHEXT""".split()
)


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable of this name is likely to hold a credential."""
    upper = name.upper()
    if upper in _SAFE_NAMES or upper.startswith("LC_"):
        return False
    if upper.startswith(_SECRET_PREFIXES):
        return True
    if any(part in upper for part in _SECRET_NAME_PARTS):
        return True
    words = set(re.split(r"[^A-Z0-9]+", upper))
    if words & _SECRET_NAME_WORDS:
        return True
    # FOO_APIKEY, MYKEY, SIGNINGKEY ...
    return upper.endswith("KEY") or upper.endswith("KEYS")


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` without variables whose name or value looks like a credential."""
    return {k: v for k, v in env.items() if not is_secret_env_name(k) and not contains_secret(v)}
