"""The reference implementation's asset files and what a workspace learned, exported and imported.

gene_files.py (the reference's asset files, into the store and out of it), learned.py (what a workspace
learned, beside them), retired.py (retired genes in asset files), files.py (reading and writing asset
files, which both use), gene_folders.py (the genes a cycle selects from: the seed genes, a workspace's
``.gep/genes/*.json`` and the stored ones).

Imports the packages below it (core, store, signals, learning, genes); never report/, a cycle or the
CLI.
"""
