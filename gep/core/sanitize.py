"""Redaction: the one place that decides what counts as a secret.

``redact`` runs over every text that leaves a workspace source (logs, transcripts, memory), every
prompt and everything the store keeps. ``scrub_env`` builds the environment of the commands the
engine runs, without the variables that hold credentials.

Beside our own rules run a maintained detector's: detect-secrets' plugins (gep/core/leak_rules.py).

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
import shlex
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from gep.core import leak_rules

REDACTED = "[REDACTED]"

_TOKEN_CHARS = r"A-Za-z0-9\-._~+/"
# A line break, also JSON-escaped once or more ("\\n", "\\\\n").
_NL = r"(?:\r?\n|(?:\\+r)?\\+n)"


def _json_forms(words: str) -> str:
    """An alternation of ``words`` as written and JSON-escaped to ASCII (\\u5bc6..., once or more)."""
    forms = set()
    for w in words.split():
        forms.add(re.escape(w))
        forms.add("".join(rf"\\+u{ord(c):04x}" for c in w))
    return "(?:" + "|".join(sorted(forms)) + ")"


# A word boundary, or the letter of a JSON escape before it (\nglpat-...: "n" would hide the boundary).
_B = r"(?:\b|(?<=\\[nrtbf]))"
# Not inside a longer word (but after a JSON escape's letter, as _B).
_B_WORD = r"(?:(?<![A-Za-z0-9_])|(?<=\\[nrtbf]))"

# Patterns whose whole match is replaced. Order matters: whole structures (PEM blocks, JWTs and URLs
# with credentials, see _SECRET_RES) go before the shorter shapes that could eat part of them.
_WHOLE = [
    # PEM private keys (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ...), also when truncated at the end.
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    # Provider keys.
    r"sk-ant-[A-Za-z0-9\-_]{16,}",
    r"sk-proj-[A-Za-z0-9\-_]{16,}",
    _B + r"sk-[A-Za-z0-9\-_]{20,}",
    # The reference's floor: no word boundary before, alphanumerics only after "sk-".
    r"sk-[A-Za-z0-9]{20,}",
    _B + r"(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    _B + r"gl(?:pat|dt|rt|ptt|ft|imt|soat|cbt|oas|agent)-[A-Za-z0-9\-_]{20,}",  # GitLab's token kinds
    _B + r"xapp-[0-9]+-[A-Za-z0-9\-]{10,}",  # Slack app-level tokens
    _B + r"whsec_[A-Za-z0-9+/=]{16,}",  # Stripe webhook signing secrets
    _B + r"pypi-AgE[A-Za-z0-9\-_]{40,}",  # PyPI API tokens (a macaroon)
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    _B + r"AIza[0-9A-Za-z\-_]{35}",
    r"npm_[A-Za-z0-9]{36,}",
    _B + r"hf_[A-Za-z0-9]{30,}",
    r"xox[abposrv]-[A-Za-z0-9-]{10,}",
    _B + r"ya29\.[A-Za-z0-9\-_]{20,}",  # Google OAuth access tokens
    _B + r"do[opr]_v1_[a-f0-9]{64}",  # DigitalOcean
    _B + r"dckr_pat_[A-Za-z0-9\-_]{20,}",  # Docker Hub
    _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",  # Shopify
    # Azure connection-string and app secrets.
    r"(?i:accountkey)=[^;\s]+",
    r"(?i:instrumentationkey)=[0-9a-fA-F-]{20,}",
    _B + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",  # SendGrid
    # A PEM block in base64 ("-----BEGIN" encodes to LS0tLS1CRUdJT...), e.g. PRIVATE_KEY_B64=...
    r"LS0tLS1CRUdJT[A-Za-z0-9+/]*={0,2}",
    # Issue 45 (E01): a Telegram bot token, bare or in its API URL (api.telegram.org/bot<token>/...); a
    # Mailgun key.
    r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])",
    _B + r"key-[0-9a-f]{32}(?![0-9A-Za-z])",
    # an age encryption key; a Databricks token
    r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
    _B + r"dapi[a-f0-9]{32}(?:-[0-9])?(?![A-Za-z0-9])",
    # HashiCorp Vault tokens (service, batch, recovery)
    _B + r"hv[sbr]\.[A-Za-z0-9_\-]{24,}",
]

# Patterns that keep a prefix (group "keep") and redact the rest of the match.
_KEEP_PREFIX = [
    # Authorization headers: whatever follows "Bearer", as the reference (prose such as "Bearer
    # tokens are ..." loses its second word: a short all-letter token would otherwise show).
    r"(?P<keep>(?i:bearer)\s+)(?!\[REDACTED\])[" + _TOKEN_CHARS + r"]+=*",
    r"(?P<keep>\bBasic\s+)(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{12,}={0,2}",
    # Webhook URLs carry their secret in the path.
    r"(?P<keep>hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9_/\-]+",
    r"(?P<keep>(?i:discord(?:app)?\.com)/api/webhooks/)[0-9]+/[A-Za-z0-9_\-]+",
    # Generic assignments: api_key=..., "password": "...", secret: ..., client_secret=...
    r"(?P<keep>(?<![A-Za-z0-9])(?i:(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key"
    r"|secret|passwd|password|passphrase|pwd|token|auth|credentials?))[\"']?\s*[:=]\s*[\"']?)"
    r"(?![\[{(<])[^\s\"',;)}\][]{4,}",
    # The reference's floor: these keywords also count inside a longer name (accessToken,
    # clientSecret, dbPassword, myApiKey).
    r"(?P<keep>(?i:token|api[_\-]?key|secret)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{16,}",
    r"(?P<keep>(?i:password)\"?[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;)}\]]{6,}",
    # A secret said in words ("my passphrase is correct horse battery staple", "the password was ..."): the
    # rest of the sentence. Prose such as "the password is wrong" loses a word; a passphrase is never kept.
    r"(?P<keep>(?<![A-Za-z0-9])(?i:pass(?:word|phrase|wd)|pin(?: code)?|secret(?: key)?)\s+(?i:is|was)\s+)"
    r"(?!\[REDACTED\])[^.\n\r\\\"]{3,}",
    # Session and cookie identifiers (session_id=..., cookie-id: ..., sessionid=...) log a user in.
    r"(?P<keep>(?<![A-Za-z0-9])(?i:session|cookie)[_ \-]?(?i:id)[\"']?\s*[=:]\s*[\"']?)"
    r"(?!\[REDACTED\])[A-Za-z0-9\-._~+/]{12,}",
    # A Cookie or Set-Cookie header: every value in it may log a user in (session=..., a framework's own name);
    # one whose session id was already redacted keeps its attributes (Path, Expires).
    r"(?P<keep>(?:(?<![A-Za-z0-9\-])|(?<=\\[nrt]))(?i:set-)?(?i:cookie):[ \t]*)(?![^\r\n\\\"]*\[REDACTED\])"
    r"[^\r\n\\\"]{8,}",
    # A key's id next to the key (a GCP service-account JSON's "private_key_id": "<40 hex>").
    r"(?P<keep>(?<![A-Za-z0-9])(?i:private[_\-]?key[_\-]?id)\\*[\"']?[ \t]*[:=][ \t]*\\*[\"']?)"
    r"(?!\[REDACTED\])[A-Za-z0-9\-_]{8,}",
    # "token <value>" in a line ("token ghs...", curl -H 'Authorization: token ...'): a value that looks
    # generated (a digit in 12+ characters, or 24+), so "token limit" and "the token expired" stay.
    _B_WORD + r"(?P<keep>(?i:token)[ \t]+)(?![./])(?:(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{12,}"
    r"|[A-Za-z0-9\-._~+/]{24,})=*",
    # HTTP Digest auth: the response hash proves the password (nonce and cnonce are public).
    _B_WORD + r"(?P<keep>(?i:response)\\*[\"']?=\\*[\"']?)[0-9a-fA-F]{32,}",
    # Passwords given to a command: curl -u/--user user:pass (not docker's -u uid:gid), mysql -pPASS,
    # sshpass -p PASS. The program's name bounds the flag, so mkdir -p and -p8080 stay.
    r"(?P<keep>(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))(?:-u[ \t]*|--(?:proxy-)?user(?:[ \t]+|=))\\*[\"']?"
    r"(?![0-9]+:)[^\s:\\\"']*:)(?!\[REDACTED\])[^\s\\\"']+",
    _B + r"(?P<keep>(?:mysql|mariadb)[a-z\-]*\b[^\n]{0,200}?[ \t]-p)(?!\[REDACTED\])[^\s\\\"']+",
    _B + r"(?P<keep>sshpass\b[^\n]{0,80}?[ \t]-p[ \t]*)(?:'[^'\n]+'|\\*\"[^\"\n\\]+\\*\")",
    _B + r"(?P<keep>sshpass\b[^\n]{0,80}?[ \t]-p[ \t]*)(?!\[REDACTED\])[^\s\\\"']+",
    # Issue 45 (E01): a .netrc's password (after machine/login on its line, or alone on an indented line)
    r"(?P<keep>(?:(?<![A-Za-z0-9_])|(?<=\\[nrt]))(?:machine|default)[ \t][^\n]{0,200}?[ \t]password[ \t]+)"
    r"(?!\[REDACTED\])[^\s\\\"']+",
    r"(?P<keep>(?:^|\n|\\+n)[ \t]*password[ \t]+)(?!\[REDACTED\])[^\s\\\"']+(?=[ \t]*(?:\r?\n|\\+[rn]|$))",
    # the secret column beside an AWS key id (the credentials CSV a console download gives)
    r"(?P<keep>(?:(?:AKIA|ASIA)[0-9A-Z]{16}|\[REDACTED\])[ \t]*[,;\t|][ \t]*)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
    # a PuTTY key file's MAC (its private lines: _PuttyPrivateLines)
    r"(?P<keep>Private-MAC:[ \t]*)[0-9a-fA-F]{20,}",
    # a password given after the word (.netrc's "password X", also inside a longer line) that looks generated
    r"(?P<keep>(?<![A-Za-z0-9_])(?i:password|passwd)[ \t]+)(?!\[REDACTED\])(?=[^\s\\\"']*[0-9])[^\s\\\"']{8,}",
    # an htpasswd line's hash (apr1, bcrypt, crypt's $1$ $5$ $6$, {SHA})
    r"(?P<keep>(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{1,64}:)(?:\$(?:apr1|2[abxy]?|1|5|6|y)\$[./A-Za-z0-9$]{8,}"
    r"|\{SHA\}[A-Za-z0-9+/]{27}=)",
    # a password labelled in another language (密码：..., パスワード: ..., Passwort=...)
    r"(?P<keep>(?:" + _json_forms("密码 密碼 口令 パスワード 暗証番号 비밀번호 암호") + r"|(?i:пароль|passwort|contraseña|"
    r"mot de passe|senha))[ \t]*(?:[:=]|" + _json_forms("：") + r")[ \t]*(?:\\*[\"']|「)?)(?!\[REDACTED\])"
    r"[^\s\"'」\\,;]{3,}",
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


# ---------------------------------------------------------------- assignments to secret names

# A name (DB_PASS, smtpCred, PRIVATE_KEY_B64, "api_key", \"password\") and ":", "=" or "=>", the quotes
# around the name and the value possibly JSON-escaped (\" or \\\"). The value's extent is found in Python.
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*+)(?P<q1>\\*[\"'])?[ \t]*(?:=>|[:=](?!:))"
                     r"[ \t]*(?P<q2>\\*[\"'])?")
_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Values that run to the end of the line (a password may hold spaces); "header" keeps its scheme word.
_PASSWORD_WORDS = frozenset("password passwd passphrase pass cred creds credential credentials".split())
_STRONG_WORDS = frozenset("secret secrets token apikey privatekey secretkey accesskey dsn".split())
_STRONG_ENDINGS = ("password", "passwd", "passphrase", "secret", "apikey", "token", "credential", "credentials")
# Only with a value that looks generated (sort key=lambda ... is code, key=Xy7... is not).
_WEAK_WORDS = frozenset("key keys auth sig signature pat".split())
# A name ending in one of these describes a secret without holding it (token_type, api_key_id, PASSWORD_FILE).
_DESCRIBING = frozenset("""type types name names id ids len length size count counts url uri path paths file files dir
    env var field header prefix format kind mode hint expires expiry expiration ttl limit limits max min timeout
    usage used cost label hash algorithm alg scheme provider location source endpoint enabled required policy
    rotation version index""".split())
_NOT_A_VALUE = ("[", "{", "(", "<", "$", "%(", "os.environ", "os.getenv", "getenv(", "process.env", "env(",
                "env.", "settings.", "config.", "self.", "this.", "*")
_LITERALS = frozenset("true false none null nil undefined yes no required optional empty".split())
_VALUE_STOP = re.compile(r"[\s\"'\\,;&)}\]<>`]")
_LINE_STOP = re.compile(r"\n|\r|\\[nr]|\\?\"")


@lru_cache(maxsize=4096)
def _secret_name(name: str) -> str | None:
    """What kind of secret a name holds: "password" and "header" (to the end of the line), "strong",
    "weak", or None for an ordinary name."""
    words = [w.lower() for w in _SEGMENT.findall(name)]
    if not words or words[-1] in _DESCRIBING:
        return None
    joined = "".join(words)
    if words[-1] == "authorization" or (words[-1] == "auth" and len(words) == 1 and name[:1].isupper()):
        return "header"
    if any(w in _PASSWORD_WORDS for w in words) or any(k in joined for k in ("password", "passwd", "passphrase")):
        return "password"
    if any(w in _STRONG_WORDS or w.endswith(_STRONG_ENDINGS) for w in words) or any(
            k in joined for k in ("apikey", "privatekey", "secretkey", "accesskey", "signingkey")):
        return "strong"
    return "weak" if any(w in _WEAK_WORDS for w in words) else None


def _value_end(text: str, start: int, quote: str | None, kind: str) -> int:
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if quote:  # up to the same (unescaped) quote sequence
        close = re.compile(r"(?<!\\)" + re.escape(quote)).search(text, start, line_end)
        return close.start() if close else line_end
    if kind in ("password", "header"):
        stop = _LINE_STOP.search(text, start, line_end)
        return stop.start() if stop else line_end
    stop = _VALUE_STOP.search(text, start, line_end)
    return stop.start() if stop else line_end


def _generated(value: str) -> bool:
    """Whether a value looks machine-made (a key), not like a word or an identifier of code."""
    has_digit = any(c.isdigit() for c in value)
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return len(value) >= 20 or (len(value) >= 8 and (has_digit or mixed) and "(" not in value)


def _assignment_value(text: str, m: re.Match[str], kind: str) -> tuple[int, int] | None:
    """The span of the secret value after the name matched by ``m``, or None when there is none."""
    start = m.end()
    if text.startswith(_NOT_A_VALUE, start) or text.startswith(REDACTED, start):
        return None
    end = _value_end(text, start, m.group("q2"), kind)
    inner = None if m.group("q2") else _ASSIGN.match(text, start, end + 2)
    if inner is not None and inner.end() <= end + 2:  # "auth_token: password: X": a name, not the value
        inner_end = _value_end(text, inner.end(), inner.group("q2"), kind)
        # ... unless nothing follows it ("SharedAccessKey=...xKey=": a base64 value ending in a name)
        if _secret_name(inner.group("name")) and len(text[inner.end():inner_end].strip(" \t\"'`,;)}]=")) >= 4:
            return None  # the inner assignment is redacted on its own
        end = max(end, inner_end)
    value = text[start:end].rstrip()
    if kind == "header":  # keep the scheme (Token, Bearer, Basic, Digest ...)
        scheme = re.match(r"[A-Za-z]+[ \t]+", value)
        if scheme and len(value) > scheme.end():
            start, value = start + scheme.end(), value[scheme.end():]
    bare = value.replace(REDACTED, "").strip(" \t\"'`,;)}]")
    if len(bare) < (3 if kind in ("password", "header") else 4) or bare.lower() in _LITERALS:
        return None
    if kind == "weak" and not _generated(bare):
        return None
    return start, start + len(value)


class _Assignments:
    """Values assigned to secret names, quoted or not, JSON-escaped or not (interface of a compiled pattern)."""

    def sub(self, repl: Callable[[re.Match[str]], str] | None, text: str) -> str:
        if ":" not in text and "=" not in text:
            return text
        out: list[str] = []
        last = 0
        for m in _ASSIGN.finditer(text):
            if m.start() < last:
                continue
            kind = _secret_name(m.group("name"))
            span = _assignment_value(text, m, kind) if kind else None
            if span is not None:
                out += [text[last:span[0]], REDACTED]
                last = span[1]
        return "".join(out) + text[last:] if out else text

    def search(self, text: str) -> bool:
        return self.sub(None, text) != text


class _PuttyPrivateLines:
    """The private lines of a PuTTY key file (``Private-Lines: N`` up to ``Private-MAC:``): every base64 run
    of 16 or more in between, also when each line went to a log with a prefix of its own."""

    _REGION = re.compile(r"Private-Lines:[ \t]*[0-9]+[\s\S]{0,8192}?(?:Private-MAC:|\Z)")
    _RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}")

    def sub(self, repl: Callable[[re.Match[str]], str] | None, text: str) -> str:
        if "Private-Lines:" not in text:
            return text

        def region(m: re.Match[str]) -> str:
            head = m.group(0).index(":") + 1
            return m.group(0)[:head] + self._RUN.sub(REDACTED, m.group(0)[head:])

        return self._REGION.sub(region, text)

    def search(self, text: str) -> bool:
        return self.sub(None, text) != text


# Whole structures first (PEM blocks, then JWTs and URL credentials), then assignments to secret names,
# then the shorter shapes.
_SECRET_RES: list[Any] = [re.compile(_WHOLE[0]), _JsonWebTokens(), *(re.compile(p) for p in _WHOLE[1:]),
                          *(re.compile(p) for p in _KEEP_PREFIX[:4]), _UrlCredentials(), _Assignments(),
                          _PuttyPrivateLines(),
                          *(re.compile(p) for p in _KEEP_PREFIX[4:])]

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
    text = leak_rules.replace_secrets(text, REDACTED)  # detect-secrets' plugins, beside ours
    for pattern in _PERSONAL_RES:
        text = pattern.sub(_replace, text)
    return text


# Redaction runs over this much more than a tail keeps: a secret straddling the final cut is then seen whole
# (with the name it is assigned to), and what the cut leaves of it is already "[REDACTED]".
REDACT_MARGIN = 16_384


def redacted_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, redacted before the cut when there is one (a text within
    ``limit`` is returned as it is, for its reader to redact)."""
    if len(text) <= limit:
        return text
    return redact(text[-(limit + REDACT_MARGIN):])[-limit:]


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds a credential (personal data such as emails does not count)."""
    return any(p.search(text) for p in _SECRET_RES) or any(
        _discord_start(m.group(1)) >= 0 for m in _DISCORD_RUN.finditer(text)
    ) or bool(leak_rules.secret_spans(text))


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


# ---------------------------------------------------------------- command lines

_FLAG_VALUE = re.compile(r"^(?P<flag>--?[A-Za-z][A-Za-z0-9_.\-]*)=(?P<value>.*)$", re.DOTALL)
_ENV_WORD = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.DOTALL)


_QUANTITY_WORDS = frozenset("max min num count limit limits budget".split())
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?[kKmM]?")


def _secret_flag(flag: str, value: str | None = None) -> bool:
    """Whether a flag (or variable) holds a secret; a number given to a quantity (``--max-tokens 500``,
    ``MAX_TURNS=12``) does not."""
    name = flag.lstrip("-")
    if value is not None and _NUMBER.fullmatch(value) and {w.lower() for w in _SEGMENT.findall(name)} & _QUANTITY_WORDS:
        return False
    return _secret_name(name) is not None or is_secret_env_name(name.replace("-", "_"))


# Flags whose value is "user:password" (curl), and programs whose "-p" carries the password.
_USER_PASS_FLAGS = frozenset(("-u", "--user", "--proxy-user", "-U"))
_PASSWORD_P_PROGRAMS = re.compile(r"(?:mysql|mariadb)[a-z\-]*|sshpass")


def _command_word(word: str, prev: str, program: str) -> str | None:
    """A word's redacted form given its context (the word before it, the program it belongs to), or None."""
    if prev in _USER_PASS_FLAGS and ":" in word and not word.split(":", 1)[0].isdigit():
        return word.split(":", 1)[0] + ":" + REDACTED
    if not _PASSWORD_P_PROGRAMS.fullmatch(program):
        return None
    if word.startswith("-p") and len(word) > 2 and not word.startswith("--"):
        return "-p" + REDACTED
    if prev == "-p" and program == "sshpass":  # mysql -p <name>: a database, the password is asked for
        return REDACTED
    return None


def redact_command(cmd: str) -> str:
    """A command line fit to store (flow-run parameters, events, logs): the values of secret flags
    (``--api-key X``, ``--token=X``) and environment assignments (``ANTHROPIC_API_KEY=X claude``) are
    redacted, and every word goes through :func:`redact`."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    out: list[str] = []
    hide_next = False
    prev = program = ""
    for word in words:
        in_context = _command_word(word, prev, program)
        base = word.rsplit("/", 1)[-1]
        prev, program = word, base if _PASSWORD_P_PROGRAMS.fullmatch(base) else program
        if hide_next:
            hide_next = False
            if not (_NUMBER.fullmatch(word) and not _secret_flag(out[-1], word)):
                out.append(REDACTED)
                continue
        flag, env = _FLAG_VALUE.match(word), _ENV_WORD.match(word)
        if in_context is not None:
            out.append(in_context)
        elif flag and _secret_flag(flag["flag"], flag["value"]):
            out.append(f"{flag['flag']}={REDACTED}")
        elif env and _secret_flag(env["name"], env["value"]) and (
                is_secret_env_name(env["name"]) or _secret_name(env["name"]) is not None):
            out.append(f"{env['name']}={REDACTED}")
        elif word.startswith("-") and "=" not in word and len(word) > 2 and _secret_flag(word):
            out.append(word)
            hide_next = True
        else:
            out.append(redact(word))
    return " ".join(w if REDACTED in w else shlex.quote(w) for w in out)
