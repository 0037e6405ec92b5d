"""Redaction and environment scrubbing (gep/core/sanitize.py)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gep.core.sanitize import REDACTED, contains_secret, is_secret_env_name, redact, scrub_env

SECRETS = {
    "anthropic": "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 3,
    "openai": "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4",
    "openai_proj": "sk-proj-" + "Zz9_Yy8-Xx7Ww6Vv5Uu4Tt3",
    "github_classic": "ghp_" + "a" * 36,
    "github_oauth": "gho_" + "B7" * 18,
    "github_pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-1234567890-abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "npm": "npm_" + "c" * 36,
    "google": "AIza" + "S" * 35,
    "stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_provider_tokens_are_redacted(kind: str) -> None:
    secret = SECRETS[kind]
    out = redact(f"2024-05-01 using key {secret} for the call")
    assert secret not in out
    assert REDACTED in out
    assert out.startswith("2024-05-01 using key ")
    assert contains_secret(secret)


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        ("Authorization: Bearer abcdef0123456789xyz", "abcdef0123456789xyz", "Bearer "),
        ("api_key=hunter2hunter2", "hunter2hunter2", "api_key="),
        ('{"password": "correct horse battery"}', "correct", '"password": "'),
        ("password: s3cr3t!!", "s3cr3t!!", "password: "),
        ("CLIENT_SECRET=abcd1234efgh", "abcd1234efgh", "SECRET="),
        ("export GITHUB_TOKEN=zzzzzzzzzzzz", "zzzzzzzzzzzz", "TOKEN="),
        ("secret = 'topsecretvalue'", "topsecretvalue", "secret = '"),
        ("postgres://admin:pa55word@db.internal:5432/app", "admin:pa55word", "postgres://"),
        ("https://bob:xyz@example.com/x", "bob:xyz", "@example.com/x"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "Basic "),
        ("mail alice.smith+dev@example.co.uk now", "alice.smith+dev@example.co.uk", "mail "),
        ("File /home/alice/project/app.py, line 3", "alice", "/project/app.py, line 3"),
        ("loaded /srv/app/.env.production", ".env.production", "/srv/app/"),
    ],
)
def test_assignments_urls_and_personal_data(text: str, gone: str, kept: str) -> None:
    out = redact(text)
    assert gone not in out
    assert kept in out
    assert REDACTED in out


def test_pem_private_key_block_is_removed_whole() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq0x9line2\n-----END RSA PRIVATE KEY-----"
    out = redact(f"before\n{block}\nafter")
    assert out == f"before\n{REDACTED}\nafter"
    # A block cut off by a bounded tail read is still removed up to the end.
    cut = redact("x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")
    assert "b3BlbnNz" not in cut


def test_ordinary_text_and_allowlisted_addresses_survive() -> None:
    text = (
        "TypeError: cannot read property 'x' of undefined\n"
        "the token expired; please add a feature flag. See /home/runner/work/x.py\n"
        "Co-authored-by: bot <noreply@github.com>\n"
    )
    assert redact(text) == text


def test_whatever_follows_bearer_is_redacted_as_the_reference_does() -> None:
    assert redact("Authorization: Bearer abc") == "Authorization: Bearer [REDACTED]"
    assert redact("Bearer tokens are described in RFC 6750.") == "Bearer [REDACTED] are described in RFC 6750."


def test_redact_is_idempotent() -> None:
    text = "api_key=abcdefgh1234 and sk-ant-" + "x" * 30 + " mail a@b.io"
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_redact_never_raises_and_is_idempotent_on_arbitrary_text(text: str) -> None:
    out = redact(text)
    assert isinstance(out, str)
    assert redact(out) == out


@pytest.mark.parametrize("junk", ["a" * 200_000, "a-" * 100_000, "M-" * 100_000, "a.b" * 70_000,
                                  # URL credentials and JWTs used to rescan the rest of the run from every
                                  # scheme / "eyJ" (seconds at 64 KB, minutes here)
                                  "redis://" * 25_000, "a://b:" * 33_000, "@x://y:" * 28_000, "eyJ" * 66_000,
                                  "eyJeyJ.eyJa.b" * 15_000])
def test_no_pathological_backtracking(junk: str) -> None:
    """Redaction time grows linearly: 8x the input takes about 8x the time (quadratic would be 64x, and
    minutes here). Relative to the same machine's time on an eighth of the input, so load does not matter."""

    def best(text: str, runs: int) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            redact(text)
            times.append(time.perf_counter() - start)
        return min(times)

    whole = best(junk, 1)
    eighth = max(best(junk[: len(junk) // 8], 3), 1e-3)  # below a millisecond the timer's noise dominates
    assert whole / eighth < 32, (whole, eighth)


@pytest.mark.parametrize(
    "name",
    [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "DB_PASSWORD",
        "MY_SECRET",
        "SLACK_BOT_TOKEN",
        "STRIPE_KEY",
        "SIGNINGKEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
        "GEP_DATABASE_URL",
        "SENTRY_DSN",
        "HF_TOKEN",
        "api_key",
        "SSH_AUTH_SOCK",
        "NPM_TOKEN",
    ],
)
def test_secret_env_names(name: str) -> None:
    assert is_secret_env_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        "PWD",
        "TERM",
        "USER",
        "TMPDIR",
        "GEP_MODEL",
        "CI",
        "NODE_ENV",
        "KEYBOARD",
        "MONKEY_PATCH",
    ],
)
def test_ordinary_env_names(name: str) -> None:
    assert not is_secret_env_name(name)


def test_scrub_env_drops_secret_names_and_values() -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "PYTHONPATH": "/src",
        "ANTHROPIC_API_KEY": "sk-ant-" + "q" * 40,
        "FOO_PASSWORD": "x",
        "INNOCENT_LOOKING": "ghp_" + "z" * 36,
        "VIRTUAL_ENV": "/work/.venv",
    }
    out = scrub_env(env)
    assert out == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "PYTHONPATH": "/src",
        "VIRTUAL_ENV": "/work/.venv",
    }
    assert env["FOO_PASSWORD"] == "x"  # input untouched


# The reference's sanitize.js list is a floor: what it redacts, redact() redacts too.
@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ('{"accessToken": "abcdefghijklmnop1234"}', "abcdefghijklmnop1234"),
        ("refreshToken=abcdefghijklmnopqr", "abcdefghijklmnopqr"),
        ("stripeApiKey: abcdefghijklmnop12", "abcdefghijklmnop12"),
        ("clientSecret=abcdefghijklmnopqrst", "abcdefghijklmnopqrst"),
        ("dbPassword=hunter22", "hunter22"),
        ("password=(hunter22)", "hunter22"),
        ("key%3Dsk-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
        ("OPENAI_sk-abcdefghijklmnopqrstuvwx1", "abcdefghijklmnopqrstuvwx1"),
        ("_ghp_" + "a" * 36, "a" * 36),
        ("MY_github_pat_" + "c" * 22, "c" * 22),
        ("AKIAIOSFODNN7EXAMPLEX", "IOSFODNN7EXAMPLE"),
        ("mynpm_" + "d" * 36, "d" * 36),
        ("axoxb-1234567890-abc", "1234567890-abc"),
        ("accountkey=abcdEFGH==;", "abcdEFGH=="),
        ("-MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs", "Cl2FMQ"),
        ("bot MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs ok", "Cl2FMQ"),
        ("Authorization: Bearer abc123", "abc123"),
        ("https://user:pa/ss@host.com", "pa/ss"),
        ("redis://:secretpass@cache:6379", "secretpass"),
    ],
)
def test_everything_the_reference_redacts_is_redacted(text: str, gone: str) -> None:
    out = redact(text)
    assert gone not in out
    assert REDACTED in out
    assert redact(out) == out


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        # Patterns of the newest reference sanitize.js that the list lacked.
        ("set-cookie: session_id=abcdef1234567890xyz; Path=/", "abcdef1234567890xyz", "session_id="),
        ("cookie_id: 'AbCdEf0123456789'", "AbCdEf0123456789", "cookie_id: '"),
        ("sessionid=0123456789abcdef", "0123456789abcdef", "sessionid="),
        ("Cookie id=a1b2c3d4e5f6g7h8", "a1b2c3d4e5f6g7h8", "Cookie id="),
        ("connecting to postgres://db.internal:5432/production_db failed", "db.internal", "postgres:// failed"),
        ("mongodb+srv://cluster0.mongodb.net/mydb?retryWrites=true", "cluster0", "mongodb+srv://"),
        ("broker redis://cache.local:6379/0 down", "cache.local", "broker redis://"),
        ("ECONNREFUSED 10.0.3.17:5432", "10.0.3.17", "ECONNREFUSED "),
        ("host 192.168.1.20 unreachable", "192.168.1.20", "host  unreachable"),
        ("172.20.0.5:8080 timed out", "172.20.0.5", " timed out"),
        ("reading ~/.npmrc and ~/.aws/credentials", ".npmrc", "reading ~/"),
    ],
)
def test_reference_floor_session_ids_database_urls_private_ips_credential_files(
        text: str, gone: str, kept: str) -> None:
    out = redact(text)
    assert gone not in out
    assert kept.replace(" ", "") in out.replace(REDACTED, "").replace(" ", "")
    assert REDACTED in out


def test_public_addresses_versions_and_plain_urls_survive() -> None:
    text = "172.15.0.5 and 8.8.8.8 are public; v10.1.2.3; see https://docs.example.org/postgres/guide"
    assert redact(text) == text


def test_infrastructure_is_redacted_but_not_a_credential_for_env_scrubbing() -> None:
    # A broker URL without a password may stay in a validation command's environment.
    env = {"CELERY_BROKER_URL": "redis://localhost:6379/0", "SVC_HOST": "10.0.0.8", "WEB_SESSION_ID": "x"}
    assert scrub_env(env) == {"CELERY_BROKER_URL": "redis://localhost:6379/0", "SVC_HOST": "10.0.0.8"}


JWT_RE = re.compile(r"eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]{10,}")
URL_RE = re.compile(r"(?P<keep>(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://)[^@\s/:]*:[^@\s]+(?=@)")
PIECES = st.sampled_from(["eyJ", ".", "a", "Z9", "-", "_", " ", "\n", "@", "://", ":", "/", "redis", "+", "é", "A" * 10])


def _plain(m: re.Match[str]) -> str:
    return (m.groupdict().get("keep") or "") + REDACTED


@settings(max_examples=500, deadline=None)
@given(st.lists(PIECES, max_size=40).map("".join))
def test_linear_jwt_and_url_matchers_redact_what_the_plain_regexes_do(text: str) -> None:
    from gep.core.sanitize import _JsonWebTokens, _UrlCredentials

    assert _JsonWebTokens().sub(_plain, text) == JWT_RE.sub(_plain, text)
    assert _UrlCredentials().sub(_plain, text) == URL_RE.sub(_plain, text)
    assert _JsonWebTokens().search(text) == bool(JWT_RE.search(text))
    assert _UrlCredentials().search(text) == bool(URL_RE.search(text))
