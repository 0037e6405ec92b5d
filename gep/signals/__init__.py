"""What the workspace says, read and turned into signals: bounded, redacted tails of logs, memory and
transcripts (sources), the lines written since the last change landed (unread), the seed-002 rules (rules), behavioural signals (seed 000) and their daily
files, the Claude pass (seed 001).

Imports core/ only; never the store, git, validation, learning, genes, mutators or a cycle.
"""
