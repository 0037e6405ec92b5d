"""A demo-like recorded history for the `gep report` tests (and the README's screenshot): cycles with every
kind of outcome, fix verdicts, feedback on the genes, lessons and a failed change, stored through the store's
own API in a real workspace's SQLite store."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gep.core.models import EvolutionEvent, FailedCapsule, iso
from gep.learning.feedback import FeedbackKind, FeedbackSignal, Observation
from gep.learning.lessons import Lesson, LessonCategory
from gep.store import Store

START = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
GENES = ("gene_repair_from_errors", "gene_optimize_code_quality", "gene_capability_gap", "gene_perf_bottleneck")
SIGNALS = (["log_error", "errsig:ZeroDivisionError: division by zero"], ["recurring_errsig(3x):KeyError: 'id'"],
           ["user_correction:use the config file", "log_error"], ["user_feature_request:export to csv"],
           ["perf_bottleneck", "high_tool_usage:grep"], ["repair_loop_detected", "log_error"])
HOST_REASON = "mutator: the agent command exited 137 (killed)"


def outcome_of(i: int, rng: random.Random, n: int) -> dict[str, object]:
    """What cycle ``i`` of ``n`` ended with: more verified fixes as the workspace learns."""
    learnt = i / max(n - 1, 1)
    roll = rng.random()
    if i % 11 == 7:
        return {"status": "failed", "meta": {"failure_reasons": [HOST_REASON],
                                             "host_failure": {"kind": "agent_crash", "reason": HOST_REASON}}}
    if roll < 0.2 + 0.45 * learnt:
        return {"status": "success", "meta": {"fix_verdict": "verified", "commit": f"c{i:04x}"}}
    if roll < 0.3 + 0.45 * learnt:
        return {"status": "success", "meta": {"fix_verdict": "did_not_hold", "commit": f"c{i:04x}"}}
    if roll < 0.75:
        return {"status": "failed", "meta": {"failure_reasons": ["validation: python -m pytest -q exited 1: "
                                                                 "1 failed"]}}
    if roll < 0.9:
        return {"status": "empty", "meta": {"empty_cycle": True}}
    return {"status": "success", "meta": {"commit": f"c{i:04x}"}}


def demo_history(ws: Path, n: int = 40, seed: int = 7) -> list[EvolutionEvent]:
    """``n`` recorded cycles an hour apart, feedback on them, lessons and a failed change; the events."""
    rng = random.Random(seed)
    events = []
    with Store.for_workspace(ws) as store:
        for i in range(n):
            at = START + timedelta(hours=i)
            out = outcome_of(i, rng, n)
            gene = GENES[0] if i % 3 else GENES[1 + (i // 3) % 3]
            meta = {"at": iso(at), **out["meta"]}  # type: ignore[dict-item]
            event = EvolutionEvent(id=f"evt_demo_{i:03d}", signals=SIGNALS[i % len(SIGNALS)], genes_used=[gene],
                                   outcome={"status": out["status"], "score": 0.85 if out["status"] == "success"
                                            else 0.2}, meta=meta)
            store.add_event(event)
            events.append(event)
            verdict = event.meta.fix_verdict
            if verdict:
                good = verdict == "verified"
                store.add_feedback(FeedbackSignal(
                    id=f"fb_{i}", gene_id=gene, event_id=event.id, confidence=0.8,
                    created_at=at + timedelta(minutes=30),  # judged after the cycle
                    kind=FeedbackKind.helpful if good else FeedbackKind.not_helpful,
                    origin=Observation.fix_verified if good else Observation.fix_did_not_hold))
                store.append_lesson(Lesson(
                    id=f"les_{i}", topic=f"{gene}@errors", gene_id=gene, content=(
                        f"cycle {i}: the fix " + ("held: the error stayed gone" if good else
                                                  "did not hold: the error came back")),
                    category=LessonCategory.fix_verified if good else LessonCategory.fix_did_not_hold,
                    event_id=event.id, created_at=at))
        store.add_failed_capsule(FailedCapsule(id="fc_demo_1", gene=GENES[0], trigger=["log_error"],
                                               failure_reason="validation: python -m pytest -q exited 1"))
    return events
