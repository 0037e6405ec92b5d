"""The optional Claude pass over behavioural signals (seed 001), beside the rules of :mod:`gep.signals.behavior`.

Hybrid, as seed 000 recommends: Claude is asked about an exchange only when the rules found nothing in it
(and it is more than an acknowledgement), or about every new exchange on every Nth cycle
(``llm_signals_every``), within a token budget per cycle (``llm_signals_token_budget``); an exchange is asked
about once. Settings: ``llm_signals = true`` in gep.toml and ``ANTHROPIC_API_KEY``.

One request per exchange (the agent turn and the user turn, both redacted), one tool:
``extract_signal(type, content, source, confidence)`` with seed 001's taxonomy: the five types of the rules
plus ``pattern``, ``value``, ``fear`` and ``defense``. Kept: confidence > 0.6, a ``source`` that is a
verbatim excerpt of the user turn sent (anything else is a hallucinated source: dropped and counted), and a
``content`` that does not copy six words in a row of the message (it becomes a stored summary). The five
core types become :class:`~gep.signals.behavior.BehaviorSignal` records; every kept signal becomes a GEP signal
(:func:`gep_signal`). Tokens and estimated cost are returned for the event. Nothing raises for the API:
errors are counted and the cycle goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, Field, ValidationError

from gep.core.claude import MalformedReply, claude_client, estimate_cost, parse_reply
from gep.core.config import Settings
from gep.core.errors import ConfigError
from gep.core.records import LlmPassRecord, MutatorMetrics
from gep.core.sanitize import redact
from gep.signals.behavior import (
    SUMMARY_MAX,
    BehaviorSignal,
    Detected,
    detect_session,
    exchange_key,
    gep_signals,
    iso,
)
from gep.signals.behavior_cues import agent_context, clean, is_ambiguous, is_cjk
from gep.signals.behavior_log import record, seen
from gep.signals.sources import SessionExchanges, TranscriptExchange

if TYPE_CHECKING:  # imported where used: the SDK takes ~2 s to import, most cycles never call it
    import anthropic
    from anthropic.types import MessageParam, ToolParam

LlmType = Literal["preference", "emotion", "correction", "approval", "style", "pattern", "value", "fear", "defense"]
CORE_TYPES = ("preference", "emotion", "correction", "approval", "style")
CONFIDENCE_MIN = 0.6
MAX_PER_EXCHANGE = 3
MAX_TURNS = 2
MAX_OUTPUT_TOKENS = 400
AGENT_CHARS, USER_CHARS = 1500, 2500

SYSTEM = """You read one exchange between an AI agent and the person it works for, and note what it says about \
that person: how they want the agent to behave, how they feel, what they value.

You're having a conversation, not conducting an interview: read it the way a good colleague would, without \
over-reading. Use their words: the `source` of every signal is the person's exact words, copied verbatim from \
the user turn (a short excerpt). The `content` is the insight in your own words, one short sentence about \
the behaviour, never a quote, never a name, address or secret.

Types: preference (how the agent should behave), emotion (a clearly expressed feeling), correction (the agent \
was wrong or misunderstood), approval (praise, thanks), style (how they communicate), pattern (a recurring \
behaviour of theirs), value (what matters to them), fear (what they want to avoid), defense (how they shield \
themselves). Only extract a signal when your confidence is above 0.6.

Extract 2-3 signals at most with extract_signal, then stop. If the exchange says nothing clear, extract nothing."""

# The tool as the Messages API takes it.
TOOL: ToolParam = {
    "name": "extract_signal",
    "description": "Record one signal about the person from what they just said. Only when confidence > 0.6.",
    "input_schema": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": list(LlmType.__args__)},  # type: ignore[attr-defined]
            "content": {"type": "string", "description": "The insight, one short sentence in your words"},
            "source": {"type": "string", "description": "The person's exact words (a verbatim excerpt)"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["type", "content", "source", "confidence"],
    },
}


class LlmSignal(BaseModel):
    """One ``extract_signal`` call's input (a JSON edge, validated)."""

    type: LlmType
    content: str = Field(min_length=1, max_length=1000)
    source: str = Field(min_length=1, max_length=2000)
    confidence: float = Field(ge=0, le=1)


class LlmPassResult(BaseModel):
    """What the pass found, and its counts, tokens and cost (``record``: what the event keeps)."""

    record: LlmPassRecord = Field(default_factory=LlmPassRecord)
    detected: list[Detected] = Field(default_factory=list)  # core-type signals, per exchange (to record)
    gep_signals: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------ which exchanges


def wants_llm(ex: TranscriptExchange, found: Sequence[BehaviorSignal]) -> bool:
    """Whether the hybrid pass would ask Claude about an exchange: the rules found nothing, and the message
    is more than an acknowledgement, a slash command or a word or two ("push", "run them")."""
    if found:
        return False
    text = clean(ex.user)
    if not text or is_ambiguous(text) or text.startswith("/"):
        return False
    return len(text) >= 4 if is_cjk(text) else len(text.split()) >= 3


def llm_pass_due(cycle_number: int, every: int) -> bool:
    """Whether this cycle asks about every new exchange (every Nth cycle; ``every`` 0: never)."""
    return every > 0 and cycle_number > 0 and cycle_number % every == 0


def llm_candidates(workspace: Path, sessions: Sequence[SessionExchanges], *, now: datetime,
                   periodic: bool) -> list[TranscriptExchange]:
    """The exchanges to ask Claude about this cycle: not asked before, and either the rules found nothing
    in them or this is a periodic cycle."""
    asked = seen(workspace, "llm")
    out: list[TranscriptExchange] = []
    for session in sessions:
        for ex, found in zip(session.exchanges, detect_session(session, now=now), strict=True):
            if found.key not in asked and (wants_llm(ex, found.signals) or (periodic and not is_ambiguous(ex.user))):
                out.append(ex)
    return out


def check_llm_settings(settings: Settings, env: Mapping[str, str]) -> None:
    """ConfigError when the Claude pass is on but cannot run (for a cycle's preflight)."""
    if settings.llm_signals and not env.get("ANTHROPIC_API_KEY"):
        raise ConfigError("the Claude signal pass (--llm-signals / llm_signals = true) needs ANTHROPIC_API_KEY in "
                          "the environment")


# ------------------------------------------------------------------ checks and mapping


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _copies_message(content: str, message: str) -> bool:
    """Whether ``content`` holds six words in a row (twelve characters for CJK) of ``message``."""
    msg = _squash(message)
    if is_cjk(content):
        run = _squash(content).replace(" ", "")
        return any(run[i:i + 12] in msg.replace(" ", "") for i in range(max(0, len(run) - 11)))
    words = _squash(content).split()
    return any(" ".join(words[i:i + 6]) in msg for i in range(max(0, len(words) - 5)))


def _summary(content: str) -> str:
    text = redact(" ".join(content.split()))
    return text if len(text) <= SUMMARY_MAX else text[:SUMMARY_MAX - 3].rsplit(" ", 1)[0] + "..."


def _intensity(confidence: float) -> int:
    return 5 if confidence >= 0.9 else 4 if confidence >= 0.8 else 3


def gep_signal(sig: LlmSignal) -> str:
    """The GEP signal of a kept Claude signal (the five core types as the rules map them)."""
    summary = _summary(sig.content)
    if sig.type in CORE_TYPES:
        mapped = gep_signals([BehaviorSignal(ts="2000-01-01T00:00:00Z", type=sig.type, summary=summary,
                                             intensity=_intensity(sig.confidence))])
        return mapped[0] if mapped else f"user_emotion:{summary}"  # an emotion that is not frustration
    return f"user_{sig.type}:{summary}"


# ------------------------------------------------------------------ the pass


def _prompt(ex: TranscriptExchange) -> tuple[str, str]:
    """(the user message text, the redacted user turn that is sent)."""
    agent = redact(ex.agent)[-AGENT_CHARS:]
    user = redact(ex.user)[:USER_CHARS]
    text = (f"<agent_turn>\n{agent or '(start of the session)'}\n</agent_turn>\n<user_turn>\n{user}\n</user_turn>\n\n"
            "Extract the person's signals from the user turn with extract_signal (2-3 at most), then stop.")
    return text, user


def _account(metrics: MutatorMetrics, reply: Any) -> None:
    if reply.model:
        metrics.model = reply.model
    if reply.usage is not None:
        metrics.input_tokens += reply.usage.input_tokens
        metrics.output_tokens += reply.usage.output_tokens
        metrics.cache_creation_input_tokens += reply.usage.cache_creation_input_tokens or 0
        metrics.cache_read_input_tokens += reply.usage.cache_read_input_tokens or 0


def _keep(raw: Mapping[str, Any], user_sent: str, result: LlmPassResult) -> LlmSignal | None:
    try:
        sig = LlmSignal.model_validate(raw)
    except ValidationError:
        result.record.dropped_malformed += 1
        return None
    if sig.confidence <= CONFIDENCE_MIN:
        result.record.dropped_low_confidence += 1
    elif len(_squash(sig.source)) < 2 or _squash(sig.source) not in _squash(user_sent):
        result.record.dropped_unsourced += 1
    elif _copies_message(sig.content, user_sent):
        result.record.dropped_quoting += 1
    else:
        return sig
    return None


def _ask(client: anthropic.Anthropic, model: str, ex: TranscriptExchange, budget: int,
         result: LlmPassResult) -> list[LlmSignal]:
    """One conversation about one exchange: up to MAX_TURNS replies, at most 3 signals kept."""
    text, user_sent = _prompt(ex)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": text}]}]  # JSON edge: API
    kept: list[LlmSignal] = []
    for _turn in range(MAX_TURNS):
        left = budget - result.record.metrics.total_tokens
        if left <= MAX_OUTPUT_TOKENS:
            break
        # the conversation is kept as the JSON the API exchanges (reply blocks go back as they came)
        raw = client.messages.with_raw_response.create(model=model, max_tokens=MAX_OUTPUT_TOKENS, system=SYSTEM,
                                                       tools=[TOOL], messages=cast("list[MessageParam]", messages))
        reply, history = parse_reply(raw.text())
        _account(result.record.metrics, reply)
        uses = [b for b in reply.content if b.type == "tool_use"]
        for use in uses:
            if use.name == "extract_signal" and len(kept) < MAX_PER_EXCHANGE:
                sig = _keep(use.input or {}, user_sent, result)
                if sig is not None:
                    kept.append(sig)
        if not uses or reply.stop_reason != "tool_use" or len(kept) >= MAX_PER_EXCHANGE:
            break
        messages += [{"role": "assistant", "content": history},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id,
                                                   "content": json.dumps({"extracted": True})} for u in uses]}]
    return kept


def run_llm_pass(exchanges: Sequence[TranscriptExchange], *, settings: Settings, env: Mapping[str, str],
                 now: datetime, max_retries: int = 2) -> LlmPassResult:
    """Ask Claude about ``exchanges`` (see the module docstring) within ``settings.llm_signals_token_budget``."""
    result = LlmPassResult()
    result.record.metrics.model = settings.model
    if not exchanges:
        return result
    import anthropic  # deferred: ~2 s of import, for its error types (the client comes from gep/core/claude.py)

    client = claude_client(env.get("ANTHROPIC_API_KEY") or "", env, max_retries=max_retries, timeout_s=60.0)
    budget = settings.llm_signals_token_budget
    for i, ex in enumerate(exchanges):
        # a request costs at least its text (about 3 characters a token) and the reply it may write
        estimate = (len(SYSTEM) + len(ex.agent[-AGENT_CHARS:]) + len(ex.user[:USER_CHARS])) // 3 + MAX_OUTPUT_TOKENS
        if result.record.metrics.total_tokens + estimate > budget:
            result.record.skipped_budget = len(exchanges) - i
            break
        result.record.asked += 1
        try:
            kept = _ask(client, settings.model, ex, budget, result)
        except anthropic.APIError as exc:
            result.record.errors.append(redact(f"{type(exc).__name__}: {exc}")[:200])
            continue
        except MalformedReply as exc:
            result.record.errors.append(f"malformed reply: {exc}")
            continue
        _collect(ex, kept, now, result)
    result.record.metrics.estimated_cost_usd = estimate_cost(result.record.metrics.model, result.record.metrics)
    return result


def _collect(ex: TranscriptExchange, kept: Sequence[LlmSignal], now: datetime, result: LlmPassResult) -> None:
    core = [BehaviorSignal(ts=iso(ex.ts or now), type=s.type, summary=_summary(s.content),
                           context=agent_context(ex), intensity=_intensity(s.confidence))
            for s in kept if s.type in CORE_TYPES]
    result.detected.append(Detected(key=exchange_key(ex), source=ex.source, session_id=ex.session_id,
                                    ts=ex.ts or now, signals=core))
    result.record.kept += len(kept)
    for s in kept:
        mapped = gep_signal(s)
        if mapped not in result.gep_signals:
            result.gep_signals.append(mapped)


def capture_llm(workspace: Path, sessions: Sequence[SessionExchanges], *, settings: Settings,
                env: Mapping[str, str], now: datetime, cycle_number: int) -> LlmPassResult:
    """The whole Claude pass of one cycle: pick the exchanges, ask, record what was found (pass ``llm``).
    Exchanges not asked (budget) or failed (API errors) are asked again next cycle."""
    if not settings.llm_signals:
        return LlmPassResult()
    periodic = llm_pass_due(cycle_number, settings.llm_signals_every)
    result = run_llm_pass(llm_candidates(workspace, sessions, now=now, periodic=periodic),
                          settings=settings, env=env, now=now)
    if result.detected:
        record(workspace, result.detected, pass_="llm")
    return result
