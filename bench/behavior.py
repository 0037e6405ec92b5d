"""How well do the behavioural rules read people? Precision and recall per signal type on a labelled set.

The set (tests/fixtures/behavior_labelled.jsonl) holds user messages in English, Chinese (simplified and
traditional) and Japanese, each with the agent turn before it, the session's earlier user messages where a
style pattern needs them, and the types a careful reader would capture (none for negatives). Items are
split: ``dev`` (written before the rules, used while writing them) and ``holdout`` (written after the rules
were frozen, never used to change them).

Printed: per type, precision / recall / support on each split and on both; per language; the messages the
rules got wrong (``--errors``); and the share of messages the hybrid Claude pass would be asked about
(``gep.signals.claude_pass.wants_llm``: the rules found nothing and the message is not a bare acknowledgement).

Run: ``.venv/bin/python bench/behavior.py [--errors] [--markdown]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel, Field

from gep.signals.behavior import SIGNAL_TYPES, detect
from gep.signals.claude_pass import wants_llm
from gep.signals.sources import TranscriptExchange

SET = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "behavior_labelled.jsonl"
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


class Labelled(BaseModel):
    """One item of the set: a user message, the agent turn before it, and what a careful reader captures."""
    id: str
    split: str
    lang: str
    user: str
    agent: str = ""
    history: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)


def load(path: Path = SET) -> list[Labelled]:
    """The labelled items, checked against the signal types."""
    items = [Labelled.model_validate(json.loads(line))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for it in items:
        assert set(it.labels) <= set(SIGNAL_TYPES), it.id
    return items


def predict(item: Labelled) -> tuple[set[str], bool]:
    """(types the rules capture, whether the Claude pass would be asked) for one item."""
    history = [TranscriptExchange(source="openclaw", session_id="bench", user=u, ts=NOW) for u in item.history]
    ex = TranscriptExchange(source="openclaw", session_id="bench", agent=item.agent, user=item.user, ts=NOW)
    found = detect(ex, history, now=NOW)
    return {s.type for s in found}, wants_llm(ex, found)


def scores(items: list[Labelled]) -> dict[str, tuple[int, int, int]]:
    """Per type: (true positives, false positives, false negatives)."""
    out: dict[str, tuple[int, int, int]] = {}
    preds = [predict(it)[0] for it in items]
    for t in SIGNAL_TYPES:
        tp = sum(1 for it, p in zip(items, preds, strict=True) if t in p and t in it.labels)
        fp = sum(1 for it, p in zip(items, preds, strict=True) if t in p and t not in it.labels)
        fn = sum(1 for it, p in zip(items, preds, strict=True) if t not in p and t in it.labels)
        out[t] = (tp, fp, fn)
    return out


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "-"


def table(items: list[Labelled], markdown: bool) -> str:
    rows = []
    for t, (tp, fp, fn) in scores(items).items():
        rows.append((t, _ratio(tp, tp + fp), _ratio(tp, tp + fn), str(tp + fn), str(fp)))
    tp, fp, fn = (sum(v[i] for v in scores(items).values()) for i in range(3))
    rows.append(("all", _ratio(tp, tp + fp), _ratio(tp, tp + fn), str(tp + fn), str(fp)))
    head = ("type", "precision", "recall", "labelled", "false pos.")
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines = ["  ".join(f"{h:>10}" for h in head)] + ["  ".join(f"{c:>10}" for c in r) for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="list the messages the rules got wrong")
    parser.add_argument("--markdown", action="store_true", help="tables as Markdown (for docs/behavior.md)")
    args = parser.parse_args()
    items = load()
    langs = Counter(it.lang for it in items)
    negatives = sum(1 for it in items if not it.labels)
    print(f"{len(items)} messages ({', '.join(f'{k} {v}' for k, v in sorted(langs.items()))}; "
          f"{negatives} negatives)\n")
    for split in ("dev", "holdout", None):
        part = [it for it in items if split is None or it.split == split]
        if part:
            print(f"### {split or 'all'} ({len(part)} messages)\n\n{table(part, args.markdown)}\n")
    for lang in sorted(langs):
        part = [it for it in items if it.lang == lang]
        tp, fp, fn = (sum(v[i] for v in scores(part).values()) for i in range(3))
        print(f"{lang:>6}: precision {_ratio(tp, tp + fp)}, recall {_ratio(tp, tp + fn)} ({len(part)} messages)")
    asked = [predict(it)[1] for it in items]
    print(f"\nClaude pass asked about {sum(asked)} of {len(items)} messages "
          f"({sum(asked) / len(items):.0%}): rules found nothing and the message is not a bare acknowledgement")
    if args.errors:
        print("\nerrors:")
        for it in items:
            got = predict(it)[0]
            if got != set(it.labels):
                print(f"  {it.id}: labelled {sorted(it.labels)} got {sorted(got)}: {it.user[:70]!r}")


if __name__ == "__main__":
    main()
