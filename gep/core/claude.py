"""Claude over the Messages API, the parts every caller shares (the mutator, the signal pass, distillation):
the one client factory, reading a reply, and what a call cost.

The SDK is imported inside :func:`claude_client`: it takes ~2 s to import, and most commands and prompt-mode
cycles never call Claude.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gep.core import constants
from gep.core.deadline import left
from gep.core.records import MutatorMetrics

if TYPE_CHECKING:
    import anthropic


class OutOfTime(Exception):
    """The Messages API asked for a wait (or a request would run) past the cycle's time limit."""


class Deadline:
    """The monotonic time a session must end by (None: no limit), shared with its client's retry waits."""

    def __init__(self) -> None:
        self.at: float | None = None


def claude_client(api_key: str, env: Mapping[str, str], *, max_retries: int, timeout_s: float,
                  deadline: Deadline | None = None) -> anthropic.Anthropic:
    """The client every caller uses: ``ANTHROPIC_BASE_URL`` from ``env`` when set, the caller's retries and
    time limit. Its retry waits never pass ``ANTHROPIC_MAX_RETRY_WAIT_S`` (every caller: the mutator, the LLM
    signal pass, distillation; issue 45, N09), nor the ``deadline`` when there is one (a cycle's mutator): the
    SDK obeys a ``Retry-After`` of any size (up to 49 days); a proxy at ``ANTHROPIC_BASE_URL`` answering
    ``Retry-After: 100000000`` would hold the cycle, its lock and its Prefect slot for weeks."""
    import anthropic  # deferred: ~2 s of import (see the module docstring)

    base_url = env.get("ANTHROPIC_BASE_URL") or None
    bound = deadline or Deadline()  # no deadline: the cap alone

    class BoundedAnthropic(anthropic.Anthropic):
        def _calculate_retry_timeout(self, remaining_retries: int, options: Any,
                                     response_headers: Any = None) -> float:
            wait = min(super()._calculate_retry_timeout(remaining_retries, options, response_headers),
                       constants.ANTHROPIC_MAX_RETRY_WAIT_S)
            remaining = left(bound.at)
            if wait + 1.0 >= remaining:
                raise OutOfTime(f"the Messages API asked to wait {wait:.0f} s before retrying, past the cycle's "
                                f"time limit ({max(0.0, remaining):.0f} s left)")
            if remaining != float("inf"):  # the retried request ends by the deadline too
                options.timeout = max(1.0, min(timeout_s, remaining - wait))
            return wait

    return BoundedAnthropic(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout_s)


# USD per million tokens (input, output) by model family, first match wins. Cache writes cost 1.25x
# input, cache reads 0.1x input. An estimate for the event, not a bill.
PRICES: list[tuple[str, float, float]] = [
    ("claude-3-opus", 15.0, 75.0),
    ("opus-4-0", 15.0, 75.0),
    ("opus-4-1", 15.0, 75.0),
    ("opus-4-2025", 15.0, 75.0),
    ("opus", 5.0, 25.0),  # Opus 4.5 and later
    ("sonnet", 3.0, 15.0),
    ("3-5-haiku", 0.8, 4.0),
    ("haiku-3-5", 0.8, 4.0),
    ("3-haiku", 0.25, 1.25),
    ("haiku", 1.0, 5.0),  # Haiku 4.5 and later
]


def estimate_cost(model: str | None, m: MutatorMetrics) -> float | None:
    name = (model or "").lower().replace(".", "-")
    for family, price_in, price_out in PRICES:
        if family in name:
            total = (m.input_tokens * price_in + m.cache_creation_input_tokens * price_in * 1.25
                     + m.cache_read_input_tokens * price_in * 0.1 + m.output_tokens * price_out)
            return round(total / 1_000_000, 6)
    return None


# ------------------------------------------------------------------ reply parsing (a JSON edge)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0


class Block(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None  # JSON edge: the model's tool arguments


class Reply(BaseModel):
    type: str
    content: list[Block]
    stop_reason: str | None = None
    model: str | None = None
    usage: Usage | None = None


class MalformedReply(Exception):
    pass


def parse_reply(body: str) -> tuple[Reply, list[dict[str, Any]]]:  # JSON edge: reply blocks
    """The validated reply and its content blocks as they go back into the conversation."""
    try:
        data = json.loads(body)
    except ValueError:
        raise MalformedReply("reply is not JSON") from None
    try:
        reply = Reply.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise MalformedReply(f"reply field '{'.'.join(str(p) for p in err['loc'])}': {err['msg']}") from None
    if reply.type != "message":
        raise MalformedReply(f"reply type is '{reply.type}', expected 'message'")
    history: list[dict[str, Any]] = []  # JSON edge: blocks as the API takes them back
    for block, raw in zip(reply.content, data["content"], strict=True):
        if block.type == "tool_use":
            if not block.id or not block.name or block.input is None:
                raise MalformedReply("tool_use block without id, name or input")
            history.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        elif block.type == "text":
            history.append({"type": "text", "text": block.text or ""})
        else:  # thinking and other blocks go back unchanged, as the API requires
            history.append(raw)
    return reply, history
