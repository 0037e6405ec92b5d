"""`gep report`'s page: what it shows, computed from a workspace's store (data.py), and the one
self-contained HTML file drawn from it and written whole (html.py); and a cycle's own story in Markdown,
the text of its run's artifact in Prefect (cycle_text.py).

Imports the packages below it (core, store, learning, genes); never assets/, a cycle or the CLI.
"""
