"""The with/without evaluation a user runs on their own history (``gep eval``), and the holdout's arithmetic.

Imports core, git, store and validation; never the cycle (its runner is passed in by the caller: gep/cli/eval_cmd.py),
the CLI or Prefect. `gep report` (gep/report/) reads the holdout's effect from here.

Modules:
  stats.py exact McNemar, bootstrap ratio interval, anytime-valid confidence sequences (pure)
  effect.py the holdout's measured effect of learning in a workspace, from its events (pure)
  scratch.py the throwaway folder: a copy of the history, trees checked out aside, a clone per arm
  tasks.py tasks mined from the history: a commit that passes the validation its parent failed
  tape.py  the agent as the evaluation runs it: timed, recorded, or played back without the agent
  run.py   the run: every task in every arm through the real cycle, judged by the fixing commit's tests
  table.py the paired table, 80 columns
"""
