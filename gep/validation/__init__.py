"""Running a command safely: the allowlist parser, the one runner, the bubblewrap sandbox, the scratch
clone a command runs in, the canary, whether a report is a verdict on the change, and ``python -m`` tools
resolved outside the tree (tool_module).

Imports core/ and git/ only; never the store, signals, genes, learning, mutators or a cycle.
"""
