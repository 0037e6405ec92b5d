"""Validating a cycle's change: the validation commands, then the canary, both in the sandbox for the change's
origin and in one throw-away copy of the tree the change was made in (gep/validation/scratch.py), so what they write
never reaches it. The tree is read again afterwards: anything that still changed it meanwhile is drift."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from gep.core.config import Settings
from gep.core.models import ValidationReport
from gep.cycle.checks import ConstraintCheck, failure_reasons
from gep.cycle.tree import CycleTree, TreeChange
from gep.validation.canary import CanaryResult, run_canary
from gep.validation.runner import run_validation
from gep.validation.scratch import throwaway


class Validated(BaseModel):
    report: ValidationReport
    canary: CanaryResult | None = None
    artifacts: list[str] = Field(default_factory=list)  # files the commands created, removed again
    drift: list[str] = Field(default_factory=list)  # committable paths the commands changed

    def drift_reason(self) -> str:
        """Why the change fails when validation changed the tree it checked ("" when it did not)."""
        if not self.drift:
            return ""
        shown = sorted(self.drift)
        return ("validation: the commands changed the workspace they checked: " + ", ".join(shown[:10])
                + (f" (+{len(shown) - 10} more)" if len(shown) > 10 else ""))


def validate_tree(tree: CycleTree, tc: TreeChange, *, commands: Sequence[str], settings: Settings,
                  gene_id: str, report_id: str, now: Callable[[], datetime]) -> Validated:
    """Run ``commands`` and the canary on ``tree`` holding the change ``tc`` (read just before)."""
    started = time.time()
    with throwaway(tree.sandbox(settings, tc)) as box:  # one throw-away copy for the commands and the canary
        report = run_validation(commands=commands, cwd=tree.path, settings=settings, gene_id=gene_id,
                                report_id=report_id, now=now, sandbox=box)
        canary = (run_canary(tree=tree.path, paths=tc.paths, settings=settings, sandbox=box)
                  if report.overall_ok else None)
    artifacts, drift = tree.validation_effects(tc, tree.read(), started)
    return Validated(report=report, canary=canary, artifacts=artifacts, drift=drift)


def revalidation_reasons(v: Validated) -> list[str]:
    """Failure reasons of validating a rebased tree again (empty when everything passed)."""
    reasons = failure_reasons(ConstraintCheck(), v.report, v.canary, [])
    return reasons + ([v.drift_reason()] if v.drift else [])
