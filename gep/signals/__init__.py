"""What the workspace says, read and turned into signals: bounded, redacted tails of logs, memory and
transcripts (sources.py), the seed-002 rules (rules.py), behavioural signals (seed 000: behavior.py, its
cues behavior_cues.py, its daily files behavior_log.py), the Claude pass (seed 001: claude_pass.py); unread.py (what was written since the last change landed:
the lines a cycle reads); warning_lines.py (new warning lines as signals: the skeptic baseline setting `warning_signals`).

Imports core/ only; never the store, git, validation, learning, genes, mutators or a cycle.
"""
