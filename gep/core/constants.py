"""Every threshold in one place. Settings (gep/core/config.py) may override the ones marked configurable."""

# --- signals (seed 002; the reference's values, not configurable: the differential check needs them)
ERRSIG_MAX_CHARS = 260
SNIPPET_MAX_CHARS = 200
RECURRING_ERROR_MIN = 3
HISTORY_WINDOW = 10
HISTORY_TAIL = 8
SUPPRESS_MIN_COUNT = 3
REPAIR_LOOP_MIN = 3
EMPTY_CYCLE_LOOP_MIN = 4
SATURATION_MIN = 3
STEADY_STATE_MIN = 5
FAILURE_STREAK_MIN = 3
FAILURE_LOOP_MIN = 5
HIGH_FAILURE_RATIO = 0.75
HIGH_TOOL_USAGE_MIN = 10
REPEATED_EXEC_MIN = 5

# --- selection (configurable defaults)
BAN_CYCLES = 10
DOMINANCE_SHARE = 0.6
DOMINANCE_WINDOW = 20
DISTILLED_GENE_FACTOR = 0.8
DRIFT_BONUS = 0.3
EDGE_HALF_LIFE_DAYS = 30.0
GENE_PRIOR_HALF_LIFE_DAYS = 45.0
SIGNAL_KEY_JACCARD_MIN = 0.34
FAMILY_DISCOUNT = 0.9  # a problem family's records fade by this at each outcome there (gep/learning/family_record.py)
FAILED_CAPSULE_OVERLAP_MIN = 0.6
FAILED_CAPSULE_BAN_COUNT = 2
# selection internals (issue 4)
CONTROL_SIGNAL_PREFIXES = ("ban_gene:", "consecutive_failure_streak_", "force_")
MEMORY_GRAPH_EVENTS = 500  # how many recent events the memory graph should be given (more = better memory)
# recency (issue 15): the newest EVIDENCE_WINDOW outcomes of a gene in a situation count fully; each older one
# keeps EVIDENCE_RETENTION of its weight per newer outcome beyond them, so a long record of a fix that stopped
# working (or of a gene that started failing) is outweighed after about the window's length of new outcomes
EVIDENCE_WINDOW = 6
EVIDENCE_RETENTION = 0.85
MEMORY_BAN_MIN_EVIDENCE = 2.0  # reference: attempts >= 2 ...
MEMORY_BAN_P = 0.18  # ... and expected success < 0.18 bans a gene for the situation
PRIOR_BAN_MIN_EVIDENCE = 3.0  # reference: a gene failing everywhere (prior < 0.12 over >= 3 attempts)
PRIOR_BAN_P = 0.12
GENE_PRIOR_PSEUDO_COUNT = 1.0  # weight of a gene's global record when it has no record in this situation
KIND_EVIDENCE_WEIGHT = 0.5  # a gene's record on another problem of the same kind, per outcome (memory graph)
DRIFT_FALLBACK_INTENSITY = 0.7  # reference: explicit drift with a pool of one gene
MAX_ALTERNATIVES = 4
# personality (reference values)
PERSONALITY_KEY_STEP = 0.1
PERSONALITY_BEST_MIN_SAMPLES = 3
PERSONALITY_NATURAL_STEP = 0.1
PERSONALITY_NATURAL_MIN_DIFF = 0.05
PERSONALITY_MUTATION_CLIP = 0.2
PERSONALITY_MAX_MUTATIONS = 4
HIGH_RISK_RIGOR_BELOW = 0.5
HIGH_RISK_TOLERANCE_ABOVE = 0.6
HIGH_RISK_ALLOWED_RIGOR_MIN = 0.6
HIGH_RISK_ALLOWED_TOLERANCE_MAX = 0.5
# strategy
EARLY_STABILIZE_CYCLES = 5
STEADY_STATE_SCHEDULE_EVERY = 5
STEADY_STATE_FORCED_SCHEDULE_EVERY = 10

# --- solidify (configurable defaults)
HARD_CAP_FILES = 60
HARD_CAP_LINES = 20_000
DEFAULT_MAX_FILES = 20
APPROACHING_RATIO = 0.8
CRITICAL_RATIO = 2.0
VALIDATION_TIMEOUT_S = 180
OUTPUT_CAP_CHARS = 4_000
DIFF_SNAPSHOT_CHARS = 8_000
SUCCESS_SCORE = 0.85
FAILURE_SCORE = 0.2
LOCK_TIMEOUT_S = 30.0
# solidify internals (issue 5)
LOCK_POLL_S = 0.1
COMMIT_SUBJECT_CHARS = 72
COMMIT_SIGNALS_CHARS = 200
RECOVERY_LOG_DEPTH = 50  # commits searched for a crashed cycle's GEP-Event trailer
FAILURE_REASON_CHARS = 2_000

# --- prompt and mutators (configurable defaults)
PROMPT_CONTEXT_CHARS = 8_000
MAX_TURNS = 20
MAX_TOKENS_PER_CYCLE = 400_000
AGENT_TIMEOUT_S = 1_800
CYCLE_TIMEOUT_S = 1_800  # a whole cycle, every wait included (gep/core/deadline.py)
GIT_TIMEOUT_S = 600  # one git command
ANTHROPIC_MAX_RETRY_WAIT_S = 60.0  # a longer Retry-After from the Messages API (or a proxy) is cut to this
AGENT_OUTPUT_CHARS = 4_000
# prompt context: per-item caps so one huge field cannot crowd out the rest
PROMPT_MAX_SIGNALS = 40
PROMPT_ITEM_CHARS = 300
PROMPT_MAX_EVENTS = 8
PROMPT_MAX_LESSONS = 10
PROMPT_CAPSULE_DIFF_CHARS = 1_500
# anthropic mutator
ANTHROPIC_MAX_RETRIES = 3
ANTHROPIC_TIMEOUT_S = 300.0
MAX_OUTPUT_TOKENS_PER_TURN = 8_192
# workspace tools given to the model
TOOL_LIST_MAX_ENTRIES = 400
TOOL_READ_MAX_CHARS = 24_000
TOOL_SEARCH_MAX_HITS = 80
TOOL_SEARCH_LINE_CHARS = 240
TOOL_SEARCH_MAX_FILE_BYTES = 1_000_000
TOOL_WRITE_MAX_CHARS = 400_000

# --- sources (configurable defaults)
LOG_TAIL_BYTES = 64_000
MEMORY_TAIL_BYTES = 50_000
USER_TAIL_BYTES = 20_000
TRANSCRIPT_TAIL_BYTES = 64_000
TRANSCRIPT_MAX_AGE_HOURS = 24.0  # the reference's active window for session logs
MAX_SOURCE_FILES = 8

# --- learning (issue 15; configurable defaults)
USEFULNESS_WEIGHT = 0.3  # seed 003's "balanced exploration" weight of feedback beside expected success
LESSON_RECENCY_WEIGHT = 0.7  # seed 004: share of recalled lessons chosen by recency (the rest by strength)
LESSON_RECALL_LIMIT = 10
LESSON_SYNTHESIS_THRESHOLD = 3  # unresolved conflicts on one topic before a synthesis is asked for
LESSON_PROMPT_CHARS = 2_400
# what a new agent session receives (the SessionStart hook, `gep context`): at most this many characters
CONTEXT_CHARS = 1_500

# --- reading inputs (gep/core/safe_files.py): what another program may have put where the engine reads
WALK_MAX_DEPTH = 48  # directory levels a walk goes down (a deeper tree is cut there, with a warning)
WALK_MAX_ENTRIES = 200_000  # entries one walk looks at before it stops (with a warning)
INPUT_WARNINGS_MAX = 50  # warnings kept per cycle (the rest are counted in the last one)
GENE_FILE_MAX_BYTES = 1_000_000  # a gene file (.gep/genes/*.json) over this is skipped
CONFIG_FILE_MAX_BYTES = 1_000_000  # gep.toml over this is refused
ASSET_FILE_MAX_BYTES = 512 * 1024 * 1024  # an asset file to import (genes.json, events.jsonl ...)
# genes a store keeps (imported, distilled, ...): every cycle's select reads and matches them all, and an import
# of 100,000 cost 51-63 s a cycle. An import past it is refused before anything is written (bench/gene_pool.py)
MAX_STORED_GENES = 2_000
GENES_LIST_LIMIT = 50  # rows `gep genes list` shows unless --limit says otherwise (0: all)
SIGNALS_FILE_MAX_BYTES = 16 * 1024 * 1024  # a day's behavioural signals file
BEHAVIOR_SEEN_MAX_BYTES = 64 * 1024 * 1024  # .gep/behavior/seen (one line per exchange read)
SETTINGS_MAX_TAIL_BYTES = 64 * 1024 * 1024  # the largest tail a setting may ask to read from one source
SETTINGS_MAX_TIMEOUT_S = 7 * 24 * 3600  # a longer timeout is a typo (and overflows timers)
BUILD_FILE_MAX_BYTES = 4 * 1024 * 1024  # package.json or a Makefile read to check a validation command
PROTECTED_FILE_MAX_BYTES = 64 * 1024 * 1024  # a protected file (MEMORY.md) compared with its baseline
TOOL_READ_MAX_FILE_BYTES = 8 * 1024 * 1024  # read_file/edit_file refuse larger files (search skips them)
