"""Redaction: the one place that decides what counts as a secret.

``redact`` runs over every text that leaves a workspace source (logs, transcripts, memory), every
prompt and everything the store keeps. ``scrub_env`` builds the environment of the commands the
engine runs, without the variables that hold credentials.

The pattern list covers at least the reference's ``sanitize.js`` (tokens of the big providers,
JWTs, private key blocks, credentials in URLs, generic ``key=value`` assignments, session and cookie
ids, emails, home directories, ``.env`` and credential file names, database URLs, private IPs) plus
a few it lacks (Anthropic/OpenAI key shapes with dashes, ``password: value`` with spaces, PEM blocks
of any kind, Google API keys, Stripe keys).
Deliberately narrower than the reference's (written for capsule payloads published to its hub):
a path keeps everything but the user name (``/home/[REDACTED]/app/x.py``,
``C:\\Users\\[REDACTED]\\...``; other Windows paths stay), so a traceback still names the file to
repair; a database URL keeps its scheme. A bare ``.env`` is redacted only as a path component, as
the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

REDACTED = "[REDACTED]"

_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"

# Patterns whose whole match is replaced. Order matters: whole structures (PEM blocks, JWTs and URLs
# with credentials, see _SECRET_RES) go before the shorter shapes that could eat part of them.
_WHOLE = [
    # PEM private keys (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ...), also when truncated at the end.
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
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
    # Authorization headers: whatever follows "Bearer", as the reference (prose such as "Bearer
    # tokens are ..." loses its second word: a short all-letter token would otherwise show).
    r"(?P<keep>(?i:bearer)\s+)(?!\[REDACTED\])[" + _TOKEN_CHARS + r"]+=*",
    r"(?P<keep>\bBasic\s+)(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{12,}={0,2}",
    # Generic assignments: api_key=..., "password": "...", secret: ..., client_secret=...
    r"(?P<keep>(?<![A-Za-z0-9])(?i:(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key"
    r"|secret|passwd|password|passphrase|pwd|token|auth|credentials?))[\"']?\s*[:=]\s*[\"']?)"
    r"(?![\[{(<])[^\s\"',;)}\]]{4,}",
    # The reference's floor: these keywords also count inside a longer name (accessToken,
    # clientSecret, dbPassword, myApiKey).
    r"(?P<keep>(?i:token|api[_\-]?key|secret)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{16,}",
    r"(?P<keep>(?i:password)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;)}\]]{6,}",
    # Session and cookie identifiers (session_id=..., cookie-id: ..., sessionid=...) log a user in.
    r"(?P<keep>(?<![A-Za-z0-9])(?i:session|cookie)[_ \-]?(?i:id)[\"']?\s*[=:]\s*[\"']?)"
    r"(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{12,}",
]

# Personal data (no credential, but not for prompts or a shared store).
_PERSONAL = [
    r"(?<![a-zA-Z0-9._%+\-])[a-zA-Z0-9._%+\-]+@[a-zA-Z0-9.\-]+\.[a-zA-Z]{2,}",
    # The user name inside home directories (the rest of the path stays useful in tracebacks).
    r"(?P<keep>/home/|/Users/|[A-Z]:\\Users\\)(?!runner\b|circleci\b|distiller\b|vsts\b|travis\b|jenkins\b)[^\s/\\\"',;)}\]]+",
    # .env files with a suffix or as a path component (their content is all secrets).
    r"\.env\.[a-zA-Z]+\b",
    r"(?<=[\\/])\.env\b",
    # Infrastructure the reference hides too: database and broker URLs (the scheme stays, so an error
    # still says what failed), private IPv4 addresses, names of files that hold credentials.
    r"(?P<keep>(?i:mongodb(?:\+srv)?|postgres(?:ql)?|mysql|rediss?|amqps?)://)(?!\[REDACTED\])"
    r"[^\s\"',;)}\]]{10,}",
    r"(?<![A-Za-z0-9_])(?:10\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|172\.(?:1[6-9]|2[0-9]|3[01])\.[0-9]{1,3}\.[0-9]{1,3}"
    r"|192\.168\.[0-9]{1,3}\.[0-9]{1,3})(?::[0-9]{2,5})?(?![A-Za-z0-9_])",
    r"\.(?i:npmrc|pypirc|netrc|aws/credentials|ssh/config)\b",
]

_ALLOWED_EMAIL = re.compile(
    r"^(?:(?:noreply|no-reply|donotreply|do-not-reply)@(?:github\.com|gitlab\.com|bitbucket\.org"
    r"|npmjs\.com|anthropic\.com|claude\.ai)|[a-zA-Z0-9._+\-]+@users\.noreply\.github\.com"
    r"|git@(?:github\.com|gitlab\.com|bitbucket\.org))$",
    re.IGNORECASE,
)

# user:password in URLs (scheme://user:pass@host): keep the scheme and the @. The user may be empty
# (redis://:pass@host) and the password may hold "/". A match ends before an "@" of its
# whitespace-free run, so it is only tried on the run up to its last "@": a run without one (such
# as "redis://redis://...") would otherwise be rescanned to its end from every scheme in it.
_URL_CREDENTIALS = re.compile(r"(?P<keep>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)[^@\s/:]*:[^@\s]+(?=@)")
_NON_SPACE_RUN = re.compile(r"\S+")


class _UrlCredentials:
    """``_URL_CREDENTIALS`` with the interface of a compiled pattern (``sub``, ``search``)."""

    @staticmethod
    def _head(run: str) -> int:
        return run.rfind("@") + 1 if "://" in run else 0

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        def one(m: re.Match[str]) -> str:
            run = m.group(0)
            cut = self._head(run)
            return _URL_CREDENTIALS.sub(repl, run[:cut]) + run[cut:] if cut else run

        return _NON_SPACE_RUN.sub(one, text) if "://" in text and "@" in text else text

    def search(self, text: str) -> bool:
        if "://" not in text or "@" not in text:
            return False
        return any(_URL_CREDENTIALS.search(run[: self._head(run)]) for run in _NON_SPACE_RUN.findall(text))


class _JsonWebTokens:
    """JSON Web Tokens: ``eyJ<a>.eyJ<b>.<c, 10+>`` with a, b, c made of ``[A-Za-z0-9_-]``.

    The regex ``eyJ[...]+\\.eyJ[...]+\\.[...]{10,}`` rescans a segment to its end from every "eyJ" in
    it when the token fails later ("eyJeyJeyJ....x"): quadratic. The same leftmost matches are found
    segment by segment here: in a run of token characters and dots, a match starts at the first "eyJ"
    of a segment that has a character after it, when the next segment starts with "eyJ" plus one
    character and the one after holds 10 or more; it ends with that third segment."""

    _RUN = re.compile(r"[A-Za-z0-9_\-.]+")

    @staticmethod
    def _spans(run: str) -> list[tuple[int, int]]:
        segs = run.split(".")
        starts, pos = [], 0
        for seg in segs:
            starts.append(pos)
            pos += len(seg) + 1
        spans, k = [], 0
        while k + 2 < len(segs):
            p = segs[k].find("eyJ")
            while 0 <= p and p + 3 >= len(segs[k]):
                p = segs[k].find("eyJ", p + 1)
            if p >= 0 and segs[k + 1].startswith("eyJ") and len(segs[k + 1]) > 3 and len(segs[k + 2]) >= 10:
                spans.append((starts[k] + p, starts[k + 2] + len(segs[k + 2])))
                k += 3
            else:
                k += 1
        return spans

    def sub(self, repl: Callable[[re.Match[str]], str], text: str) -> str:
        if "eyJ" not in text:
            return text

        def one(m: re.Match[str]) -> str:
            run = m.group(0)
            if run.count(".") < 2 or "eyJ" not in run:
                return run
            out, last = [], 0
            for a, b in self._spans(run):
                out += [run[last:a], REDACTED]
                last = b
            return "".join(out) + run[last:]

        return self._RUN.sub(one, text)

    def search(self, text: str) -> bool:
        return "eyJ" in text and any(self._spans(run) for run in self._RUN.findall(text) if "eyJ" in run)


# Whole structures first (PEM blocks, then JWTs and URL credentials), then the shorter shapes.
_SECRET_RES: list[Any] = [re.compile(_WHOLE[0]), _JsonWebTokens(), *(re.compile(p) for p in _WHOLE[1:]),
                          *(re.compile(p) for p in _KEEP_PREFIX[:2]), _UrlCredentials(),
                          *(re.compile(p) for p in _KEEP_PREFIX[2:])]

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
