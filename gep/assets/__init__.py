"""The reference implementation's asset files and what a workspace learned, exported and imported.

Imports the packages below it (core, store, signals, learning, genes); never report/, a cycle or the
CLI.
"""
