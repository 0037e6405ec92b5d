"""A gene for what no gene covers (the reference's ``buildAutoGene``/``ensureGene``).

When the signals ask for work but no selectable gene matches them (or every match is banned), the cycle
need not end empty: it builds a gene for that signal set and runs with it. As the reference: the id is
``gene_auto_<stable hash of the signal key>`` (the same situation always gets the same gene), the category
comes from the intent or the signals, ``signals_match`` is the signals (at most 8), the strategy is a
generic safe one. Unlike the reference, its validation is this workspace's (``settings.default_validation``,
the seed genes' Python checks unless gep.toml says otherwise), kept only when it can run here.

"Actionable" is exact: a signal about the workspace that asks for a change. Not actionable are the
engine's control signals (``ban_gene:``, ``force_*``, ``consecutive_failure_streak_*``), its loop and
saturation signals about its own history (repair loop, empty-cycle loop, stagnation, plateau, saturation,
failure loop, high failure ratio), the cosmetic "file missing" signals the extractor already ranks below
everything else, signals of resolved problems, and what a person says that asks for nothing (approval, an
emotion that is not frustration). An automatic gene built for those would only
keep the engine busy with itself.

Call :func:`ensure_gene` after selection returned no gene; store ``decision.gene`` when
``decision.created``, record ``decision.reason`` in the event, and run the cycle with the gene.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from gep.core.config import Settings
from gep.core.hashing import compute_asset_id
from gep.core.models import SCHEMA_VERSION, Gene, GeneConstraints, GeneProvenance, Intent
from gep.core.sanitize import redact
from gep.genes.eligibility import command_problem
from gep.genes.mutation import has_error_signal
from gep.learning.memory_graph import compute_signal_key, is_control_signal, stable_hash

__all__ = [
    "AUTO_PREFIX",
    "AutoGeneDecision",
    "actionable_signals",
    "build_auto_gene",
    "ensure_gene",
    "infer_category",
    "is_actionable",
    "literal_pattern",
]

AUTO_PREFIX = "gene_auto_"
AUTO_MAX_SIGNALS = 8  # the reference's cap on an automatic gene's signals_match
AUTO_MAX_FILES = 12
FORBIDDEN_PATHS = [".git", ".gep", ".venv", "node_modules"]
# the engine's signals about its own history: loops, saturation, stagnation, plateaus
HISTORY_SIGNALS = frozenset({
    "repair_loop_detected", "empty_cycle_loop_detected", "evolution_stagnation_detected",
    "stable_success_plateau", "evolution_saturation", "failure_loop_detected", "high_failure_ratio",
})
# the extractor's cosmetic signals (dropped there whenever anything else is present), resolved problems, and
# behavioural signals that ask for no change (praise; gep.signals.claude_pass' emotions other than frustration)
PASSIVE_SIGNALS = frozenset({
    "user_missing", "memory_missing", "session_logs_missing", "windows_shell_incompatible",
    "issue_already_resolved", "openclaw_self_healed", "user_approval", "user_emotion",
})
INNOVATE_SIGNALS = ("user_feature_request", "capability_gap", "unsupported_input_type", "external_opportunity")
SAFE_STRATEGY = [
    "Read the signals and the log lines behind them; name the one problem they point to",
    "Estimate the blast radius (files, lines) before editing and keep within the constraints",
    "Make the smallest change that addresses the problem and can be reverted",
    "Run the declared validation; roll the change back if it fails",
    "Record what was changed and why, so the next cycle can build on it",
]


def is_actionable(signal: str) -> bool:
    """Whether ``signal`` describes the workspace and asks for a change (see the module docstring)."""
    s = str(signal).strip()
    if not s or is_control_signal(s):
        return False
    name = s.split(":", 1)[0].lower()
    return name not in HISTORY_SIGNALS and name not in PASSIVE_SIGNALS


def actionable_signals(signals: Sequence[str]) -> list[str]:
    """The actionable signals, de-duplicated, in order."""
    return list(dict.fromkeys(str(s).strip() for s in signals if is_actionable(s)))


def infer_category(signals: Sequence[str], intent: str | None = None) -> Intent:
    """The intent when it is one, else: errors -> repair, new capability asked for -> innovate, else optimize."""
    if intent is not None and intent in Intent.__members__:
        return Intent(intent)
    sigs = [str(s) for s in signals]
    if has_error_signal(sigs) or any(s.startswith(("recurring_error", "recurring_errsig")) for s in sigs):
        return Intent.repair
    if any(s == n or s.startswith(n + ":") for s in sigs for n in INNOVATE_SIGNALS):
        return Intent.innovate
    return Intent.optimize


def literal_pattern(signal: str) -> str:
    """A ``signals_match`` pattern matching exactly the text of ``signal`` (case-insensitive substring).

    A plain signal is its own pattern; one the selector would read as a regex (``/.../``) or as
    alternatives (``a|b``) becomes an escaped regex, so a signal holding ``|`` does not match every
    signal that contains one of its parts."""
    s = str(signal)
    if "|" not in s and not (s.startswith("/") and s.rfind("/") > 0):
        return s
    return "/" + re.escape(s) + "/i"


def build_auto_gene(signals: Sequence[str], *, intent: str | None, validation: Sequence[str]) -> Gene:
    """The automatic gene for the actionable part of ``signals`` (stamped with its asset id)."""
    sigs = sorted(actionable_signals(signals))  # one signal set, one gene: the same id always has the same content
    key = compute_signal_key(sigs)
    gene = Gene(
        id=AUTO_PREFIX + stable_hash(key),
        category=infer_category(sigs, intent).value,
        signals_match=[literal_pattern(s) for s in sigs[:AUTO_MAX_SIGNALS]] or ["(none)"],
        preconditions=[f"signals_key == {key}"],
        strategy=list(SAFE_STRATEGY),
        constraints=GeneConstraints(max_files=AUTO_MAX_FILES, forbidden_paths=list(FORBIDDEN_PATHS)),
        validation=list(validation),
        summary=redact(f"Automatic gene for signals no other gene covers: {', '.join(sigs[:3]) or '(none)'}")[:200],
        provenance=GeneProvenance(origin="auto", signal_key=key),
        schema_version=SCHEMA_VERSION,
    )
    gene.asset_id = compute_asset_id(gene.to_asset())
    return gene


class AutoGeneDecision(BaseModel):
    gene: Gene | None = None
    created: bool = False  # True: a new gene the caller stores
    reason: str


def runnable_validation(commands: Sequence[str], *, workspace: Path, settings: Settings,
                        env: Mapping[str, str]) -> list[str]:
    """The commands that can run in ``workspace``, in order."""
    return [c for c in commands
            if command_problem(c, workspace=workspace, settings=settings, env=env) is None]


def ensure_gene(*, signals: Sequence[str], intent: str | None, genes: Sequence[Gene], excluded: Collection[str],
                workspace: Path, settings: Settings, env: Mapping[str, str]) -> AutoGeneDecision:
    """Called when selection found no gene. ``genes``: every known gene; ``excluded``: ids not to be used now
    (banned this cycle, retired, not runnable here). Never raises for a situation; the reason says why not."""
    sigs = actionable_signals(signals)
    if not sigs:
        return AutoGeneDecision(reason="no actionable signals (only control, loop or saturation signals)")
    validation = runnable_validation(settings.default_validation, workspace=workspace, settings=settings, env=env)
    if not validation:
        return AutoGeneDecision(reason="no default validation command can run in this workspace")
    auto = build_auto_gene(sigs, intent=intent, validation=validation)
    if auto.id in excluded:
        return AutoGeneDecision(reason=f"the automatic gene for these signals, {auto.id}, is excluded this cycle")
    existing = next((g for g in genes if g.id == auto.id), None)
    if existing is not None:
        return AutoGeneDecision(gene=existing, reason=f"reusing {auto.id}, built earlier for these signals")
    return AutoGeneDecision(gene=auto, created=True,
                            reason=f"no selectable gene matches the signals; created {auto.id}")
