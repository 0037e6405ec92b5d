"""Behavioural signals (seed 000): what the way a person talks to their agent says about the agent.

From each user turn of a session transcript, with the agent turn before it, the rules detect five kinds of
signal: ``preference`` (how the agent should behave: manner, format, defaults; never a taste unrelated to the
agent, "I prefer coffee"), ``emotion`` (clearly expressed, intensity >= 3; "!!", CAPS and emoji amplify),
``correction`` (the agent's previous turn was wrong, misunderstood or unwanted; needs that turn; "actually, I
changed my mind" is not one), ``approval`` (praise, thanks, positive emoji) and ``style`` (a pattern over the
session's last messages: short bursts, emoji habit, formality, long messages). English, Chinese (simplified
and traditional) and Japanese are understood, the languages of the seed-002 rules.

Precision first: an ambiguous message ("ok", "好的", "はい") gives nothing, a negated cue ("not really good",
"不是很好") gives nothing, a "no" that answers the agent's question is not a correction, and a cue that
sits in a question or before "but" gives no approval. At most 3 signals per exchange (corrections first).

Privacy: a summary is a description chosen from fixed phrases (topics, kinds of correction, emotion labels);
only an English preference with no known topic keeps up to six filtered words of the message (no capitalised
word, digit, path or address), and everything passes ``gep.core.sanitize.redact``. No message text is stored.

Pure: exchanges and an injected ``now`` in, signals out. The cue lists are :mod:`gep.signals.behavior_cues`; storage
is :mod:`gep.signals.behavior_log`; live capture :mod:`gep.sessions.capture`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from gep.core.behavior_signal import CONTEXT_MAX as CONTEXT_MAX
from gep.core.behavior_signal import SUMMARY_MAX as SUMMARY_MAX
from gep.core.behavior_signal import BehaviorSignal as BehaviorSignal
from gep.core.behavior_signal import SignalType as SignalType
from gep.core.behavior_signal import StoredSignal as StoredSignal
from gep.core.sanitize import redact
from gep.signals import behavior_cues
from gep.signals.sources import SessionExchanges, TranscriptExchange

SIGNAL_TYPES: tuple[SignalType, ...] = ("correction", "preference", "emotion", "approval", "style")  # priority
MAX_PER_EXCHANGE = 3
MAX_PER_DAY = 10  # per day and source (seed 000: "more than 10 signals per day per user" is over-capturing)

# GEP signal names (gep.genes.mutation and gep.genes.selector read these).
USER_CORRECTION = "user_correction"
USER_CORRECTION_REPEATED = "user_correction_repeated"
USER_FRUSTRATION = "user_frustration"
USER_PREFERENCE = "user_preference"
USER_APPROVAL = "user_approval"
USER_STYLE = "user_style"
# Signals that carry a description after "<name>:": a gene pattern matches the name, never the description
# (it is the user's behaviour in words, not a log line to repair).
DETAIL_PREFIXES = (USER_CORRECTION, USER_PREFERENCE, USER_STYLE, "user_emotion", "user_pattern", "user_value",
                   "user_fear", "user_defense")
NEGATIVE_EMOTIONS = ("frustrated", "annoyed", "angry", "disappointed", "fed up", "upset")


class Detected(BaseModel):
    """The signals of one exchange, with the key that makes capturing it idempotent."""

    key: str
    source: str
    session_id: str
    ts: datetime
    signals: list[BehaviorSignal] = Field(default_factory=list)


# ------------------------------------------------------------------ keys


def _norm(text: str, keep: int) -> str:
    return " ".join(text.split())[-keep:]


def exchange_key(ex: TranscriptExchange) -> str:
    """A stable id of one exchange: the same whether a hook saw it live or a cycle re-read the transcript
    (no timestamp in it; the texts' last characters only, so a tail that cut the agent turn agrees)."""
    raw = "\0".join((ex.source, ex.session_id, _norm(ex.agent, 200), _norm(ex.user, 2000)))
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:20]


def iso(ts: datetime) -> str:
    """``ts`` as the signals' ISO-8601 text (UTC, seconds)."""
    aware = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ detection


def detect(ex: TranscriptExchange, history: Sequence[TranscriptExchange] = (), *,
           now: datetime) -> list[BehaviorSignal]:
    """The signals of one exchange (at most 3, most important first). ``history``: the earlier exchanges of
    the same session, oldest first (style patterns and repeated corrections need them)."""
    ts = iso(ex.ts or now)
    text = behavior_cues.clean(ex.user)
    found: list[BehaviorSignal] = []
    context = behavior_cues.agent_context(ex)
    if text and not behavior_cues.is_ambiguous(text):
        for kind, hit in (("correction", behavior_cues.correction(text, ex.agent)),
                          ("preference", behavior_cues.preference(text)),
                          ("emotion", behavior_cues.emotion(text, ex, history)),
                          ("approval", behavior_cues.approval(text, ex))):
            if hit is not None:
                found.append(BehaviorSignal(ts=ts, type=kind, summary=hit.summary, context=context,
                                            intensity=hit.intensity))
    style = behavior_cues.style([h.user for h in history] + [ex.user], [h.agent for h in history] + [ex.agent])
    if style is not None:
        found.append(BehaviorSignal(ts=ts, type="style", summary=style.summary, context=context,
                                    intensity=style.intensity))
    return found[:MAX_PER_EXCHANGE]  # built in SIGNAL_TYPES order: corrections first, style last


def detect_session(session: SessionExchanges, *, now: datetime, only_last: bool = False) -> list[Detected]:
    """Every exchange of a session (or only its last, for a live hook) with its key and signals."""
    out: list[Detected] = []
    exchanges = session.exchanges
    start = len(exchanges) - 1 if only_last else 0
    for i in range(max(0, start), len(exchanges)):
        ex = exchanges[i]
        out.append(Detected(key=exchange_key(ex), source=ex.source, session_id=ex.session_id, ts=ex.ts or now,
                            signals=detect(ex, exchanges[max(0, i - 8):i], now=now)))
    return out


# ------------------------------------------------------------------ into evolution


def _emotion_negative(summary: str) -> bool:
    low = summary.lower()
    return any(word in low for word in NEGATIVE_EMOTIONS)


def gep_signals(signals: Sequence[BehaviorSignal]) -> list[str]:
    """GEP signals the selector can match, in order, without duplicates:

    ``user_correction:<summary>`` (and ``user_correction_repeated`` for two or more corrections),
    ``user_frustration`` (a negative emotion of intensity >= 4), ``user_preference:<summary>``,
    ``user_approval`` and ``user_style:<summary>``."""
    out: list[str] = []

    def add(s: str) -> None:
        if s not in out:
            out.append(s)

    corrections = 0
    for s in signals:
        summary = redact(" ".join(s.summary.split()))[:SUMMARY_MAX]
        if s.type == "correction":
            corrections += 1
            add(f"{USER_CORRECTION}:{summary}")
        elif s.type == "emotion" and s.intensity >= 4 and _emotion_negative(summary):
            add(USER_FRUSTRATION)
        elif s.type == "preference":
            add(f"{USER_PREFERENCE}:{summary}")
        elif s.type == "approval":
            add(USER_APPROVAL)
        elif s.type == "style":
            add(f"{USER_STYLE}:{summary}")
    if corrections >= 2:
        add(USER_CORRECTION_REPEATED)
    return out
