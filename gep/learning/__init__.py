"""What outcomes and people taught: memory_graph.py (what happened when a gene was used in a similar
situation), family_record.py (its evidence: each problem family's discounted record), feedback.py (gene
usefulness from feedback signals, seed 003, with decay), lessons.py (seed 004), lessons_by_problem.py, similar_problems.py and problem_key.py (lessons by problem), live_problems.py
(never starved by the loop rules), resolved.py (verified fixes), fix_credit.py (which problems a change
addressed) and settled_fixes.py (which tries a prompt recounts), avoid.py (avoid-lists), attribution.py (host
failures), human_verdicts.py (a person's verdict), approval.py (approval as feedback) and corrections.py (a
correction naming a change as not_helpful), persons_word.py (a person's not_helpful outranks a fix verdict's
"verified"), agent_context.py (what an agent should know now), context_cache.py
(its cache) and injections.py (whether it helped); recall.py and recall_models.py (what `gep mcp`'s gep_recall
answers).

Imports core/, signals/ and validation/ (a report's verdict); never the store (folding and scoring
are given to it from here), genes, mutators, assets or a cycle.
"""
