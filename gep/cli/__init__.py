"""The ``gep`` command line: the root app and the cycle commands (root), then one module per command
group (``*_cmd``). Errors are one line on stderr and a non-zero exit, never a traceback.

root.py (the app, the cycle commands); a module per command group: context_cmd.py, feedback_cmd.py,
fleet_cmd.py, genes_cmd.py, history_cmd.py, lessons_cmd.py, report_cmd.py, store_cmd.py, eval_cmd.py
(`gep eval`), init_cmd.py (`gep init`, `gep doctor`), mcp_cmd.py (`gep mcp`), status_cmd.py (`gep status`),
review_cmd.py (`gep approve`, `gep reject`), land_cmd.py (`gep land`, `gep undo`); what they share:
workspace_arg.py (``--workspace``), store_open.py (opening the store; JSON out, warnings on stderr),
history_table.py (`gep history`'s table), prefect_link.py (the Prefect API a run reports to),
prefect_console.py (what a flow run prints on the terminal).

The top: may import every package of gep, never the console script (entry). Store-only commands
never import Prefect or SQLAlchemy.
"""
