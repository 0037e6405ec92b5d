"""Event ids people can type: `gep history` shows a short form, every command taking an event id accepts it.

An event id is ``evt_<milliseconds>_<6 hex>``; ids of one workspace share their leading digits, so the short
form is the random hex tail. Like git, any unique prefix of the short form or of the full id is accepted; an
ambiguous one is refused in one line that lists the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gep.core.errors import GepError

_ID = re.compile(r"^evt_\d+_([0-9a-f]{4,})$")
MIN_TYPED = 4  # shorter than this matches too much to mean one event
CANDIDATES_SHOWN = 5


def short_id(event_id: str) -> str:
    """The part of ``event_id`` people type: its hex tail, or the whole id when it has another shape."""
    m = _ID.match(event_id)
    return m.group(1) if m else event_id


def short_ids(event_ids: Iterable[str]) -> dict[str, str]:
    """Each id's short form, the full id where two short forms collide (both stay typeable)."""
    ids = list(event_ids)
    counts: dict[str, int] = {}
    for i in ids:
        counts[short_id(i)] = counts.get(short_id(i), 0) + 1
    return {i: short_id(i) if counts[short_id(i)] == 1 else i for i in ids}


def matches(typed: str, event_id: str) -> bool:
    return event_id.startswith(typed) or short_id(event_id).startswith(typed)


def resolve(typed: str, known: Sequence[str]) -> str:
    """The one id ``typed`` names among ``known``; a one-line GepError when none or several match."""
    typed = typed.strip()
    if typed in known:
        return typed
    found = sorted({i for i in known if matches(typed, i)}) if len(typed) >= MIN_TYPED else []
    if len(found) == 1:
        return found[0]
    if not found:
        hint = f" (type at least {MIN_TYPED} characters)" if len(typed) < MIN_TYPED else ""
        raise GepError(f"no event {typed!r} in this workspace{hint}; `gep history` lists them")
    names = short_ids(found)
    shown = ", ".join(names[i] for i in found[:CANDIDATES_SHOWN])
    more = f" and {len(found) - CANDIDATES_SHOWN} more" if len(found) > CANDIDATES_SHOWN else ""
    raise GepError(f"event {typed!r} is ambiguous: it matches {shown}{more}; type more of it")
