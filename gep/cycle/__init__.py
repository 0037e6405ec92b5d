"""One evolution cycle, from the request to a recorded outcome: the context (resources), the pipeline
(the one stage list), the stages, the cycle's tree, checks, validation, solidify and delivery (with the
change's excerpt kept for later agents: change_excerpt.py), outcomes, crash recovery, the deadline and Ctrl-C;
around it, what a person does from the terminal: a review waiting for `gep approve`/`gep reject` (review_wait),
`gep status` as data (status), `gep land` and `gep undo` (by_hand).

May import every package below it; never api, sessions/, the CLI, flows/ or Prefect.
"""
