"""Secrets found by a maintained detector: detect-secrets' plugins, run beside our own rules.

detect-secrets (Yelp, Apache License 2.0) keeps a plugin per vendor: Artifactory, AWS, Azure storage, basic
auth in URLs, Cloudant, Discord, GitHub, GitLab, IBM Cloud IAM and COS, JWT, Mailchimp, npm, OpenAI, private
keys, PyPI, SendGrid, Slack, SoftLayer, Square, Stripe, Telegram, Twilio. Each regex-based plugin is a list
of regular expressions; the secret is what their groups capture, or the whole match (its ``analyze_string``).
Those expressions are the data used here: ``gep/core/data/detect_secrets.rules.json``, derived from the
installed package by ``python -m gep.core.leak_rules`` (importing the package costs ~140 ms of CPU, more
than a hook's budget; reading the file ~1 ms). A test checks that the file holds what the installed
package's plugins hold, so a new release's rules are taken by refreshing the file. Left out: the plugins
that are not credentials (public IP addresses) or that flag any long random-looking string (the entropy
and keyword plugins: commit hashes and digests are the text a cycle reads; our rules handle assignments).

An expression RE2 can run (most) runs under ``google-re2``, linear in the text; one with a lookaround runs
under Python's ``re``: they are the package's own bounded expressions, not untrusted input.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

DERIVED_FILE = Path(__file__).with_name("data") / "detect_secrets.rules.json"
# not credentials (a public address), or any long random-looking string (hashes are what a cycle reads)
LEFT_OUT = frozenset({"IPPublicDetector", "KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString"})
_FLAGS = (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL), ("x", re.VERBOSE))


class Rule(NamedTuple):
    plugin: str
    pattern: str
    flags: str  # inline flags: "i", "m", "s", "x"


def rules_from_package() -> tuple[str, tuple[Rule, ...]]:
    """(the installed detect-secrets' version, its regex plugins' expressions)."""
    # deferred: only the refresh and its test read the package (importing it costs ~140 ms: requests)
    import importlib  # deferred with the rest
    import inspect  # deferred with the rest
    import pkgutil  # deferred with the rest
    from importlib.metadata import version  # deferred with the rest

    import detect_secrets.plugins as plugins  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from detect_secrets.plugins.base import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
        RegexBasedDetector,
    )

    out = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        for name, cls in sorted(inspect.getmembers(module, inspect.isclass)):
            if (cls.__module__ != module.__name__ or not issubclass(cls, RegexBasedDetector) or inspect.isabstract(cls)
                    or name in LEFT_OUT):
                continue
            for rx in cls().denylist:
                out.append(Rule(name, rx.pattern, "".join(f for f, bit in _FLAGS if rx.flags & bit)))
    return version("detect-secrets"), tuple(out)


@cache
def rules() -> tuple[Rule, ...]:
    """The expressions the engine runs: the derived file's."""
    data = json.loads(DERIVED_FILE.read_text(encoding="utf-8"))
    return tuple(Rule(r["plugin"], r["pattern"], r["flags"]) for r in data["rules"])


def derived_version() -> str:
    return str(json.loads(DERIVED_FILE.read_text(encoding="utf-8"))["version"])


def write_derived() -> None:
    """Write the derived file from the installed detect-secrets (after upgrading it)."""
    ver, found = rules_from_package()
    data = {"package": "detect-secrets", "version": ver, "license": "Apache-2.0",
            "note": "regular expressions of detect-secrets' regex plugins; written by python -m gep.core.leak_rules",
            "rules": [r._asdict() for r in found]}
    DERIVED_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


@cache
def _re2() -> Any:
    """google-re2, imported on the first text to redact (a dependency; None in an environment without it)."""
    try:  # deferred: nothing is imported before the first text to redact
        import re2  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:  # pragma: no cover - an environment installed before it was a dependency
        return None
    return re2


@cache
def compiled(rule: Rule) -> Any:
    """The rule's expression under RE2 when RE2 can run it, else under ``re``."""
    lib = _re2()
    if lib is not None and "x" not in rule.flags:
        options = lib.Options()
        options.log_errors = False
        try:
            return lib.compile((f"(?{rule.flags})" if rule.flags else "") + rule.pattern, options)
        except lib.error:
            pass  # a lookaround: the package's own bounded expression, run by re
    flags = 0
    for f, bit in _FLAGS:
        if f in rule.flags:
            flags |= bit
    return re.compile(rule.pattern, flags)


def _spans(m: Any) -> list[tuple[int, int]]:
    groups = [g for g in range(1, (m.re.groups or 0) + 1) if m.group(g)]
    return [m.span(g) for g in groups] if groups else [m.span()]


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the detector's plugins find secrets in ``text``: sorted, merged spans of the secrets."""
    if not text:
        return []
    spans: list[tuple[int, int]] = []
    for rule in rules():
        for m in compiled(rule).finditer(text):
            spans += [(a, b) for a, b in _spans(m) if b > a]
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def replace_secrets(text: str, replacement: str) -> str:
    """``text`` with every secret the detector's plugins find replaced by ``replacement``."""
    spans = secret_spans(text)
    if not spans:
        return text
    out, last = [], 0
    for a, b in spans:
        out += [text[last:a], replacement]
        last = b
    return "".join(out) + text[last:]


if __name__ == "__main__":  # python -m gep.core.leak_rules: refresh the derived rules
    write_derived()
    print(f"wrote {DERIVED_FILE} (detect-secrets {derived_version()}, {len(rules())} expressions)", file=sys.stderr)
