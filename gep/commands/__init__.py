"""Sub-commands of the `gep` command line, one module per group (gep/cli.py registers them)."""
