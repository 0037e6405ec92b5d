"""What outcomes and people taught: the memory graph, feedback scores with decay (seed 003), lessons
(seed 004) and lessons by problem, verified fixes, avoid-lists, failure attribution, live problems,
people's verdicts and approval; what an agent asks mid-task (recall, recall_models).

Imports core/, signals/ and validation/ (a report's verdict); never the store (folding and scoring
are given to it from here), genes, mutators, assets or a cycle.
"""
