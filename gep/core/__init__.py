"""The vocabulary every part of gep speaks: models, records, settings, constants, errors, hashing,
redaction, JSON, safe regular expressions, the safe way to read others' files, workspace identity, the
learned values the store keeps, the one Claude client factory, learned text made data for agents
(learned_text.py) and this machine's key that seals what the engine wrote (machine_key.py).

Never imports any other package of gep: everything else imports this.
"""
