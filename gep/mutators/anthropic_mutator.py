"""Anthropic mode: Claude makes the change through workspace tools (Messages API, tool use).

One session per cycle: the static protocol goes in a cached system block, the tool definitions are
cached with a breakpoint on the last one, and a third breakpoint on the newest message lets every turn
reuse the conversation so far. The SDK retries 429/5xx itself. The session ends when the model calls
``finish``, ends its turn without a tool call, or exhausts the turn or token budget.

Outcomes: ``finish`` -> "changed" (or "no_change" when nothing was written); end of turn without
``finish`` -> "changed"/"no_change" with the model's last text as rationale (solidify decides);
budget exhausted, API errors and malformed replies -> "error" with a one-line message. Nothing raises.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from gep.core import constants
from gep.core.claude import PRICES as PRICES  # kept importable here (tests, other callers)
from gep.core.claude import (
    Block,
    Deadline,
    MalformedReply,
    OutOfTime,
    Reply,
    claude_client,
    estimate_cost,
    parse_reply,
)
from gep.core.config import Settings
from gep.core.deadline import left
from gep.core.errors import ConfigError
from gep.core.sanitize import redact
from gep.mutators.base import (
    MutationRequest,
    MutatorMetrics,
    MutatorResult,
    MutatorStatus,
    bounded_output,
    one_line,
    write_prompt_file,
)
from gep.mutators.tools import TOOL_SPECS, WorkspaceTools

if TYPE_CHECKING:
    # imported where used: the SDK takes ~2 s to import, and most commands and prompt-mode cycles never call it
    import anthropic
    from anthropic.types import CacheControlEphemeralParam, MessageParam, TextBlockParam, ToolParam

EPHEMERAL: CacheControlEphemeralParam = {"type": "ephemeral"}

def _with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[MessageParam]:  # JSON edge: the API's
    """A copy of the conversation with one cache breakpoint on the newest block. The conversation is kept as
    the JSON the API exchanges (reply blocks go back as they came): the SDK's TypedDicts describe that JSON."""
    out = list(messages)
    last = copy.deepcopy(out[-1])
    if isinstance(last.get("content"), list) and last["content"]:
        last["content"][-1]["cache_control"] = EPHEMERAL
    out[-1] = last
    return cast("list[MessageParam]", out)


def _api_error(exc: anthropic.APIError) -> str:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        message = exc.message
        body = exc.body
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            message = str(body["error"].get("message") or message)
        return f"Messages API error {exc.status_code}: {message}"
    if isinstance(exc, anthropic.APITimeoutError):
        return "Messages API request timed out"
    if isinstance(exc, anthropic.APIConnectionError):
        return f"cannot reach the Messages API: {exc}"
    return f"Messages API error: {exc}"


# ------------------------------------------------------------------ the mutator


class AnthropicMutator:
    name = "anthropic"

    def __init__(self, settings: Settings, env: Mapping[str, str], *,
                 max_retries: int = constants.ANTHROPIC_MAX_RETRIES, timeout_s: float = constants.ANTHROPIC_TIMEOUT_S) -> None:
        api_key = env.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise ConfigError("mutator 'anthropic' needs ANTHROPIC_API_KEY in the environment")
        self.settings = settings
        self.timeout_s = timeout_s
        self.deadline = Deadline()
        self.client = claude_client(api_key, env, max_retries=max_retries, timeout_s=timeout_s,
                                    deadline=self.deadline)

    def apply(self, req: MutationRequest) -> MutatorResult:
        started = time.monotonic()
        self.deadline.at = req.deadline
        session = _Session(self.client, req, self.timeout_s)
        try:
            result = session.run()
        except Exception as exc:  # noqa: BLE001 - a mutator reports failures, it never raises them
            result = session.result("error", error=f"anthropic mutator failed: {type(exc).__name__}: {exc}")
        result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
        return result


class _Session:
    """One conversation: the loop, its budgets and its bookkeeping."""

    def __init__(self, client: anthropic.Anthropic, req: MutationRequest,
                 timeout_s: float = constants.ANTHROPIC_TIMEOUT_S) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.req = req
        self.settings = req.settings
        self.tools = WorkspaceTools(req.work_tree, forbidden_paths=req.forbidden_paths,
                                    validation_commands=req.validation_commands, settings=req.settings,
                                    gene_id=req.gene.id, cycle_id=req.cycle_id, origin=req.origin)
        self.metrics = MutatorMetrics(model=req.settings.model)
        self.log: list[str] = []
        self.last_text = ""
        self.prompt_file: str | None = None

    def result(self, status: MutatorStatus, *, summary: str = "", rationale: str = "",
               error: str | None = None, provider_error: bool = False) -> MutatorResult:
        m = self.metrics
        m.tool_calls, m.tool_refusals = self.tools.calls, self.tools.refusals
        m.estimated_cost_usd = estimate_cost(m.model, m)
        if status == "error" and self.tools.changed:
            self.log.append(f"changed before the error: {', '.join(sorted(self.tools.changed))}")
        return MutatorResult(status=status, summary=summary, rationale=redact(rationale),
                             error=one_line(error) if error else None, metrics=m,
                             output=bounded_output("\n".join(self.log)), prompt_file=self.prompt_file,
                             provider_error=provider_error)

    def _changed_status(self) -> MutatorStatus:
        return "changed" if self.tools.changed else "no_change"

    def run(self) -> MutatorResult:
        try:  # a copy of what the model was told, for review next to the event
            self.prompt_file = str(write_prompt_file(self.req))
        except OSError:
            self.prompt_file = None
        system: list[TextBlockParam] = [{"type": "text", "text": self.req.prompt.system, "cache_control": EPHEMERAL}]
        tool_defs = [t.to_api() for t in TOOL_SPECS]
        tool_defs[-1]["cache_control"] = EPHEMERAL
        messages: list[dict[str, Any]] = [  # JSON edge: the conversation as the API exchanges it
            {"role": "user", "content": [{"type": "text", "text": self.req.prompt.context}]}]
        max_turns = self.settings.max_turns

        for turn in range(1, max_turns + 1):
            asked = self._ask(turn, system, tool_defs, messages)
            if isinstance(asked, MutatorResult):
                return asked
            reply, history = asked
            self.metrics.turns = turn
            self._account(reply)
            messages.append({"role": "assistant", "content": history})

            texts = [b.text for b in reply.content if b.type == "text" and b.text]
            if texts:
                self.last_text = texts[-1]
                self.log.append(f"[turn {turn}] " + " ".join(texts)[:600])
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                if reply.stop_reason == "max_tokens":
                    messages.append({"role": "user", "content": [{"type": "text", "text":
                                     "Your reply was cut off. Continue; call finish when done."}]})
                    continue
                self.log.append(f"[turn {turn}] ended without finish ({reply.stop_reason})")
                return self.result(self._changed_status(),
                                   rationale=self.last_text or "the model ended its turn without calling finish")

            results = [self._call(use, turn) for use in uses]
            if self.tools.finished is not None:
                fin = self.tools.finished
                return self.result(self._changed_status(), summary=fin.summary, rationale=fin.rationale)
            messages.append({"role": "user", "content": results})

        return self.result("error", error=f"turn budget exhausted ({max_turns} turns) before finish")

    def _ask(self, turn: int, system: list[TextBlockParam], tool_defs: list[ToolParam],
             messages: list[dict[str, Any]]) -> tuple[Reply, list[dict[str, Any]]] | MutatorResult:
        """One request of turn ``turn`` within the token budget and the cycle's time: the reply and its blocks
        for the history, or the result that ends the conversation (budget or time spent, the API's error, a
        malformed reply)."""
        import anthropic

        budget = self.settings.max_tokens_per_cycle
        remaining = budget - self.metrics.total_tokens
        if remaining <= 0:
            return self.result("error", error=f"token budget exhausted ({self.metrics.total_tokens} of "
                                              f"{budget} tokens) after {turn - 1} turns, before finish")
        time_left = left(self.req.deadline)
        if time_left <= 1.0:
            return self.result("error", error=f"the cycle's time limit (cycle_timeout_s) passed after {turn - 1} "
                                              "turns, before finish")
        try:
            raw = self.client.messages.with_raw_response.create(
                model=self.settings.model, max_tokens=min(constants.MAX_OUTPUT_TOKENS_PER_TURN, remaining),
                system=system, tools=tool_defs, messages=_with_cache_breakpoint(messages),
                timeout=min(self.timeout_s, time_left))
            return parse_reply(raw.text())
        except anthropic.APIError as exc:
            return self.result("error", error=_api_error(exc), provider_error=True)
        except OutOfTime as exc:
            return self.result("error", error=str(exc))
        except MalformedReply as exc:
            return self.result("error", error=f"malformed reply from the Messages API (turn {turn}): {exc}",
                               provider_error=True)

    def _call(self, use: Block, turn: int) -> dict[str, Any]:  # JSON edge: a tool_result block
        """Run one tool call; its result block as the API takes it (a JSON edge), logged."""
        outcome = self.tools.call(use.name or "", use.input or {})
        flag = "REFUSED" if outcome.refused else ("error" if outcome.is_error else "ok")
        self.log.append(f"[turn {turn}] {use.name}({_brief(use.input or {})}) -> {flag}: "
                        f"{one_line(outcome.content, 160)}")
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use.id, "content": outcome.content}  # JSON edge
        if outcome.is_error:
            block["is_error"] = True
        return block

    def _account(self, reply: Reply) -> None:
        if reply.model:
            self.metrics.model = reply.model
        u = reply.usage
        if u is None:
            return
        self.metrics.input_tokens += u.input_tokens
        self.metrics.output_tokens += u.output_tokens
        self.metrics.cache_creation_input_tokens += u.cache_creation_input_tokens or 0
        self.metrics.cache_read_input_tokens += u.cache_read_input_tokens or 0


def _brief(args: Mapping[str, Any]) -> str:
    """Tool arguments for the log: paths and patterns in full, bodies by size only."""
    parts = []
    for k, v in args.items():
        if isinstance(v, str) and k in ("content", "old_text", "new_text", "rationale"):
            parts.append(f"{k}=<{len(v)} chars>")
        else:
            try:
                parts.append(f"{k}={json.dumps(v)[:80]}")
            except (RecursionError, ValueError, TypeError):  # nested too deep to log: the call still runs
                parts.append(f"{k}=<nested>")
    return redact(", ".join(parts))
