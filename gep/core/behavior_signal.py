"""The behavioural signal (seed 000) as hooks write it and the store keeps it: one schema, no detection.

Its own module, apart from gep/core/learned.py, so that `gep capture` and `gep signals` read and write signals
without loading gep.core.models. The rules that detect signals are gep/signals/behavior.py, which imports these names back.
Core level: imports nothing of gep but sanitize.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gep.core.sanitize import redact

SignalType = Literal["preference", "emotion", "correction", "approval", "style"]


SUMMARY_MAX = 100
CONTEXT_MAX = 150


class BehaviorSignal(BaseModel):
    """One signal, exactly the seed's schema. Summary and context are redacted on the way in."""

    model_config = ConfigDict(extra="ignore")  # lines written by other tools may carry more

    ts: str
    type: SignalType
    summary: str = Field(min_length=1, max_length=SUMMARY_MAX)
    context: str | None = Field(default=None, max_length=CONTEXT_MAX)
    intensity: int = Field(ge=1, le=5)

    @field_validator("ts")
    @classmethod
    def _iso(cls, v: str) -> str:
        datetime.fromisoformat(v)  # raises ValueError: not ISO-8601
        return v

    @field_validator("summary", "context", mode="before")
    @classmethod
    def _redacted(cls, v: object) -> object:
        return redact(v) if isinstance(v, str) else v

    @property
    def at(self) -> datetime:
        ts = datetime.fromisoformat(self.ts)
        return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


class StoredSignal(BehaviorSignal):
    """A signal as a daily JSONL line: the seed's fields plus where it came from (readers may ignore both)."""

    source: str | None = None  # "claude_code" | "openclaw" | another tool's name
    key: str | None = None  # the exchange it came from (see exchange_key); one exchange, one key
    mac: str | None = None  # this machine's seal when gep wrote it (gep/core/machine_key.py; see sealed_body)

    def sealed_body(self) -> str:
        """What the seal covers: every field but the seal, one per line."""
        return "\n".join(str(v) for v in (self.ts, self.type, self.summary, self.context, self.intensity,
                                          self.source, self.key))
