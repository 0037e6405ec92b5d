"""One evolution cycle, from the request to a recorded outcome.

context.py (opening a cycle: the request checked, the workspace, its settings and store, the lock, crash
recovery), handoff.py (what a command checked and opened, handed as a value to the flow run it starts in
this process), state.py (what the stages pass along), pipeline.py (the one stage list), stages.py (each
stage), tree.py (where the change is made: a clone or the person's tree), checks.py (what a change must
pass before it is committed), unsafe_entries.py (entries no change may hold), validate.py (validation and
the canary in the sandbox), solidify.py (check, then commit and deliver, or end without the change),
commit_change.py, commit_subject.py (a subject when nobody wrote one), change_excerpt.py (the change's
excerpt kept for later agents), outcomes.py (empty, awaiting changes, failed), abandon.py (giving up a
cycle that awaits changes), recovery.py (cycles that died), interrupt.py (Ctrl-C), budget.py (the daily
token budget), fixes.py (verified fixes), collect_behavior.py (behavioural signals), record_learning.py
(what a finished cycle teaches), session_context.py (the context a new agent session receives). Around a cycle, what a person does from
the terminal: review_wait.py (a review waiting for `gep approve`/`gep reject`), status.py (`gep status` as
data, MCP's gep_status too), status_models.py (its models, light to import), by_hand.py (`gep land`, `gep undo`).

May import every package below it; never api, sessions/, the CLI, flows/ or Prefect.
"""
