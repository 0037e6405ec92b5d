"""What a cycle may try: pool.py (the gene pool a cycle selects from), eligibility.py and preconditions.py
(which genes can run here), patterns.py (a gene's ``signals_match`` patterns), selector.py (gene and
capsule selection), automatic.py (a gene for what no gene covers), distiller.py (successful capsules
become a gene), personality.py (five traits evolved from outcomes), strategy.py (repair, optimize or
innovate), mutation.py (the Mutation a cycle attempts).

Imports core/, git/, the store, validation/, signals/ and learning/; never mutators/, assets/, a cycle
or the CLI.
"""
