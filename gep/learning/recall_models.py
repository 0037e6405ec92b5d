"""What ``gep_recall`` answers (gep/learning/recall.py builds it): plain models, light to import, so that
``gep mcp`` lists its tools' schemas before the engine is loaded."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Attempt(BaseModel):
    """One cycle that worked on the problem or file asked about."""

    event: str = Field(description="The cycle's id as `gep history` shows it.")
    at: str | None = None
    gene: str = "-"
    outcome: str
    fix_verdict: str | None = Field(default=None, description="verified / did_not_hold, once later cycles saw "
                                    "the logs.")
    problems: list[str] = Field(default_factory=list)
    approach: str = Field(default="", description="What the agent or model said it did.")
    files: list[str] = Field(default_factory=list)
    checks: list[str] = Field(default_factory=list, description="Why it failed: the checks' lines.")
    change: list[str] = Field(default_factory=list, description="The change in a few lines (its diff's "
                              "changed lines, when it failed).")


class Note(BaseModel):
    event: str
    verdict: str
    note: str


class Recall(BaseModel):
    problem: str | None = None
    file: str | None = None
    attempts: list[Attempt] = Field(default_factory=list, description="Cycles on it, newest first.")
    worked_on_similar: list[str] = Field(default_factory=list, description="Verified fixes of similar problems.")
    notes: list[Note] = Field(default_factory=list, description="What people said about these cycles.")
