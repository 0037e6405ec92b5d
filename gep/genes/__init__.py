"""What a cycle may try: the gene pool and which genes can run here (eligibility, preconditions), the
selector, automatic and distilled genes, personality, strategy, the mutation.

Imports core/, git/, the store, validation/, signals/ and learning/; never mutators/, assets/, a cycle
or the CLI.
"""
