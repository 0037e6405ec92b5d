"""The vocabulary every part of gep speaks.

Objects: models.py (every GEP object), records.py (typed records in an event's meta), request.py (what a
user asks of one cycle), learned.py (what a workspace learned, as the store keeps it), behavior_signal.py
(the behavioural signal, seed 000), asset_json.py (an asset's JSON), learned_text.py (learned text made
data for agents). Settings and limits: config.py, constants.py, learning_switch.py (which learning
mechanisms a cycle uses), deadline.py (a cycle's wall-clock limit). Names and errors: errors.py,
event_ids.py (ids people can type), workspace_id.py, stored_path.py (a folder in
a model: a Path, stored as its string), hashing.py (byte-compatible with the reference),
machine_key.py (this machine's key that seals what the engine wrote), holdout.py (the holdout's draw),
text_fit.py (lines that fit the terminal). What others write: safe_files.py
(reading their files), safe_regex.py (their regular expressions), json_safe.py, salvage.py (stored records
read one by one), sanitize.py (redaction) and leak_rules.py (a maintained detector's
expressions beside it), forbidden_paths.py (paths a gene forbids). The process:
claude.py (the one Claude client factory), child_wait.py (waiting for a child without polling),
collector.py (the garbage collector paused at start-up), prebuild.py (the models built before a cycle
uses them).

Never imports any other package of gep: everything else imports this.
"""
