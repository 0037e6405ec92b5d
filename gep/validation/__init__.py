"""Running a command safely: the allowlist parser (allowlist.py), the one runner (runner.py), the bubblewrap
sandbox (sandbox.py), the scratch clone a command runs in (scratch.py), the canary (canary.py), how many
validations run at once (slots.py), whether a report is a verdict on the change (report_verdict.py), and
``python -m`` tools resolved outside the tree (tool_module.py).

Imports core/ and git/ only; never the store, signals, genes, learning, mutators or a cycle.
"""
