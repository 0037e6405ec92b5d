"""The learning key of an error (gep/learning/problem_key.py): one key for every occurrence of one error, different keys
for different errors, on the log formats agents' jobs write. The seed's ``errsig:`` signal stays exact."""

from __future__ import annotations

import json

import pytest

from gep.core.config import Settings
from gep.core.models import FailedCapsule
from gep.genes.selector import active_bans
from gep.learning.memory_graph import compute_signal_key, normalize_error_signature, normalize_signals
from gep.learning.problem_key import error_key
from gep.signals.rules import extract_signals

# (the same error twice: other time, pid, ids, port, duration), (another error in the same format)
FORMATS = {
    "iso": ("2026-11-28T00:12:13.024Z [ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0, expected 4.0",
            "2026-11-29T17:01:59.871Z [ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0, expected 4.0",
            "2026-11-28T00:12:13.024Z [ERROR] report: ZeroDivisionError: division by zero in stats.mean"),
    "iso_offset": ("[2026-11-28 00:12:13+01:00] ERROR worker: KeyError: 'currency' in rates.convert",
                   "[2026-12-01 23:40:02+01:00] ERROR worker: KeyError: 'currency' in rates.convert",
                   "[2026-11-28 00:12:13+01:00] ERROR worker: KeyError: 'amount' in rates.convert"),
    "python_logging": ("2026-11-28 02:30:01,123 ERROR [app.report] ZeroDivisionError: division by zero "
                       "(/home/ci/build-812/ws/stats.py line 8)",
                       "2026-11-28 03:30:01,977 ERROR [app.report] ZeroDivisionError: division by zero "
                       "(/tmp/run-99/ws/stats.py line 8)",
                       "2026-11-28 02:30:01,123 ERROR [app.report] ZeroDivisionError: division by zero "
                       "(/home/ci/build-812/ws/money.py line 8)"),
    "syslog": ("Nov 28 02:30:01 host1 nightly[4242]: ERROR: connection refused to db.local:5432 after 1500ms",
               "Dec  3 14:05:17 host1 nightly[977]: ERROR: connection refused to db.local:5433 after 30012ms",
               "Nov 28 02:30:01 host1 nightly[4242]: ERROR: permission denied opening /var/lib/app/state.db"),
    "json_lines": (json.dumps({"ts": "2026-11-28T00:12:13.024Z", "level": "error", "pid": 812,
                               "request_id": "a3f9c2e1d4", "msg": "KeyError: 'currency' in fetch_rates", "duration_ms": 5012}),
                   json.dumps({"ts": "2026-11-28T06:00:00.001Z", "level": "error", "pid": 90,
                               "request_id": "77b0e9f2aa", "msg": "KeyError: 'currency' in fetch_rates", "duration_ms": 6100}),
                   json.dumps({"ts": "2026-11-28T00:12:13.024Z", "level": "error", "pid": 812,
                               "request_id": "a3f9c2e1d4", "msg": "KeyError: 'currency' in fetch_users", "duration_ms": 5012})),
    "ids": ("request req-8f3a2b failed: KeyError: 'user_id' (took 12.5ms) trace 5f2c9a0e-1b2c-4d5e-8f90-123456789abc",
            "request req-0c91ff failed: KeyError: 'user_id' (took 3.1ms) trace 0d1e2f3a-4b5c-4d6e-8f70-abcdefabcdef",
            "request req-8f3a2b failed: KeyError: 'email' (took 12.5ms) trace 5f2c9a0e-1b2c-4d5e-8f90-123456789abc"),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_one_error_has_one_key_and_two_errors_two(name: str) -> None:
    once, again, other = FORMATS[name]
    assert error_key(once) == error_key(again), (error_key(once), error_key(again))
    assert error_key(once) != error_key(other)


def test_the_reference_normalisation_kept_the_iso_timestamp() -> None:
    """What this module exists for: the reference's key tells two occurrences of one ISO-stamped error apart."""
    once, again, _ = FORMATS["iso"]
    assert normalize_error_signature(once) != normalize_error_signature(again)


@pytest.mark.parametrize("name", ["iso", "python_logging", "syslog", "json_lines"])
def test_the_situation_of_one_error_logged_twice_is_one_situation(name: str) -> None:
    """Through the seed's extraction: the ``errsig:`` signal keeps each line as written (parity), and the
    situation key learning uses is the same for both occurrences and differs for the other error."""
    once, again, other = FORMATS[name]
    sigs = [extract_signals(today_log=line + "\n", recent_events=[]) for line in (once, again, other)]
    errsigs = [[s for s in x if s.startswith("errsig:")] for x in sigs]
    assert all(errsigs), sigs
    assert errsigs[0] != errsigs[1]  # the seed's signal is exact
    keys = [compute_signal_key(x) for x in sigs]
    assert keys[0] == keys[1] and keys[0] != keys[2], (sigs, keys)
    assert normalize_signals(["errsig:" + once]) == normalize_signals(["errsig:" + again])


def test_failed_capsules_of_one_error_logged_at_other_times_ban_the_gene() -> None:
    """The failed-capsule rule compares triggers by their learning keys: two failures on one error, each logged
    at its own time, ban the gene on the third occurrence (the exact lines never matched)."""
    lines = [f"2026-11-2{d}T0{d}:12:13.{d}24Z [ERROR] report: AssertionError: mean([2, 4, 6]) returned 6.0"
             for d in (1, 2, 3)]
    failed = [FailedCapsule(id=f"fc_{i}", gene="gene_a", trigger=["log_error", "errsig:" + line])
              for i, line in enumerate(lines[:2])]
    bans = active_bans(recent_events=[], signals=["log_error", "errsig:" + lines[2]], settings=Settings(),
                       failed_capsules=failed)
    assert [(b.gene_id, b.source) for b in bans] == [("gene_a", "failed_capsules")]
    other = ["log_error", "errsig:2026-11-23T03:12:13.324Z [ERROR] report: ZeroDivisionError: division by zero"]
    assert active_bans(recent_events=[], signals=other, settings=Settings(), failed_capsules=failed) == []
