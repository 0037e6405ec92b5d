"""The ``gep`` command line: the root app and the cycle commands (root), then one module per command
group (``*_cmd``). Errors are one line on stderr and a non-zero exit, never a traceback.

The top: may import every package of gep, never the console script (entry). Store-only commands
never import Prefect or SQLAlchemy.
"""
