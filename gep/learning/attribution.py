"""Failure attribution: a cycle that failed for a reason outside the change is a host failure.

The agent command missing, or crashing or timing out before it edited anything; the model provider refusing
(4xx, 5xx, 429, overloaded, unreachable); validation that could not run on this machine (a program or module
not installed, a command the allowlist refuses); the sandbox missing. None of these says anything about the
gene or its change, so such a cycle is recorded with ``meta.host_failure`` (kind and reason) and every rule
that learns from outcomes leaves it out (``learns_from``): failure streaks and repair loops, bans and failed
capsules, the memory graph's usefulness, lessons, implicit feedback and the personality's record. The
reference had the same flaw (innocent genes banned after provider errors) and now classifies host-side
failures apart; this is our own classification.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gep.core.models import EvolutionEvent, ValidationReport
from gep.core.records import HostFailure, MutatorResult
from gep.validation.report_verdict import cannot_run

# what a provider says when it is the provider's fault, in the shapes providers and their SDKs print (the
# Messages API's own errors are recognised by the mutator's line, "Messages API error 429: ..."). Only real
# error shapes: an agent that edited files prints plain words ("collected 500 items", "api key", "rate limit",
# "quota") about its own work, and that must not turn its gene's failure into the host's.
_STATUS = r"(?:429|5\d\d)"
_PROVIDER = re.compile(
    r"messages api (?:error|request timed out)|cannot reach the messages api|malformed reply from the messages api"
    rf"|\berror code:?\s*(?:4\d\d|5\d\d)\b|\bhttp(?:/\d(?:\.\d)?)?\s+{_STATUS}\b"
    rf"|\b(?:error|status(?: code)?)[:=]?\s+{_STATUS}\b"
    rf"|\b{_STATUS}\s+(?:too many requests|internal server error|bad gateway|service unavailable|gateway time-?out)"
    r"|\b(?:overloaded_error|rate_limit_error|api_error|authentication_error|permission_error|insufficient_quota)\b"
    r"|credit balance is too low|invalid x-api-key"
    r"|(?-i:\b(?:anthropic|openai)\.\w*Error\b|\b(?:RateLimitError|APIStatusError|APIConnectionError"
    r"|APITimeoutError|InternalServerError|OverloadedError|AuthenticationError|PermissionDeniedError"
    r"|ServiceUnavailableError)\b)",
    re.IGNORECASE)
_MISSING = re.compile(r"cannot start agent command|exited with code 127\b|command not found|no such file",
                      re.IGNORECASE)


def is_host_failure(event: EvolutionEvent) -> bool:
    return event.meta.host_failure is not None


def learns_from(events: Iterable[EvolutionEvent]) -> list[EvolutionEvent]:
    """The events the learning rules may judge a gene by: host failures left out."""
    return [e for e in events if not is_host_failure(e)]


def mutator_host_failure(result: MutatorResult, *, edited: bool) -> HostFailure | None:
    """Why a mutator's error is the host's, or None when it is the change's (an agent that edited and then
    crashed, a model that ran out of turns or tokens).

    A provider failure is what the mutator saw from the API (``provider_error``: the anthropic mutator caught
    the SDK's error), whether or not the model had edited. Words are evidence only from an agent that edited
    nothing: one that deleted the tests and printed ``anthropic.RateLimitError ... 429`` failed at its change."""
    if result.status != "error" or not result.error:
        return None
    if result.error.startswith(("token budget exhausted", "turn budget exhausted")):
        return None
    if result.provider_error:
        return HostFailure(kind="provider", reason=result.error)
    if edited:
        return None
    # a command agent's error line repeats its command line (`--max-turns 500`): only what it said is evidence
    said = result.output[-2000:]
    text = said if result.error.startswith("agent command ") else f"{result.error}\n{said}"
    if _PROVIDER.search(text):
        return HostFailure(kind="provider", reason=result.error)
    if _MISSING.search(result.error):
        return HostFailure(kind="agent_missing", reason=result.error)
    if "timed out" in result.error:
        return HostFailure(kind="agent_timeout", reason=result.error)
    if result.error.startswith(("agent command exited", "anthropic mutator failed", "cannot write the prompt")):
        return HostFailure(kind="agent_crash", reason=result.error)
    return None


def validation_host_failure(report: ValidationReport) -> HostFailure | None:
    """Validation that could not run here (the first failing command was never a verdict on the change). A
    command that ran past the timeout is left to the change: a change can make the tests hang."""
    failed = next((r for r in report.results if not r.ok), None)
    if failed is None or failed.timed_out:
        return None
    why = cannot_run(failed)
    if why is None:
        return None
    kind = "sandbox_missing" if (failed.blocked_reason or "").startswith("sandbox:") else "validation_not_run"
    return HostFailure(kind=kind, reason=f"validation could not run here: {why}")


def host_label(event: EvolutionEvent) -> str | None:
    """``host: <kind>`` for `gep history`, None for any other event."""
    h = event.meta.host_failure
    return f"host: {h.kind}" if h is not None else None
