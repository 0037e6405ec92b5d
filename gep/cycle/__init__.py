"""One evolution cycle, from the request to a recorded outcome: the context (resources), the pipeline
(the one stage list), the stages, the cycle's tree, checks, validation, solidify and delivery (with the
change's excerpt kept for later agents: change_excerpt.py), outcomes, crash recovery, the deadline and Ctrl-C.

May import every package below it; never api, sessions/, the CLI, flows/ or Prefect.
"""
