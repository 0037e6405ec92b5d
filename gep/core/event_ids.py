"""Event (and gene) ids people can type: `gep history` shows a short form, every command taking an event id accepts it.

An event id is ``evt_<milliseconds>_<6 hex>``; ids of one workspace share their leading digits, so the short
form is the random hex tail. Like git, any unique prefix of the short form or of the full id is accepted; an
ambiguous one is refused in one line that lists the candidates. The name Prefect's UI shows for a cycle's
run, ``cycle-0042 repair gene_x`` (flows/reporting.py run_name: the cycle's number, ``meta.cycle``), names
the cycle too (:func:`resolve_in`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from gep.core.errors import GepError

if TYPE_CHECKING:  # the models' import is for the checker: `gep history` imports this module for short_id
    from gep.core.models import EvolutionEvent

_ID = re.compile(r"^evt_\d+_([0-9a-f]{4,})$")
_RUN_NAME = re.compile(r"^cycle-0*(\d+)(?:\s.*)?$", re.S)
_PAGE = 200  # events read at a time, newest first, looking for a cycle by its number
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


class EventReader(Protocol):
    """What resolving an id reads of a store (every store gep opens answers it)."""

    def event_ids(self) -> list[str]: ...
    def list_events(self, limit: int = 20, offset: int = 0, status: str | None = None) -> list[EvolutionEvent]: ...


def cycle_number(typed: str) -> int | None:
    """The cycle's number in a run name as Prefect's UI shows it (``cycle-0003``, ``cycle-0003 repair gene_x``)."""
    m = _RUN_NAME.match(typed.strip())
    return int(m.group(1)) if m else None


def resolve_in(typed: str, store: EventReader) -> str:
    """The event ``typed`` names in ``store``: an id or a unique prefix of one (:func:`resolve`), or a cycle's
    run name; a one-line GepError when none or several match."""
    number = cycle_number(typed)
    if number is None:
        return resolve(typed, store.event_ids())
    found = _events_of_cycle(store, number)
    if len(found) == 1:
        return found[0]
    if not found:
        raise GepError(f"no cycle {typed.strip().split()[0]!r} in this workspace; `gep history` lists them")
    raise GepError(f"{typed.strip().split()[0]!r} names {len(found)} events ({', '.join(short_id(i) for i in found)}):"
                   " give the id `gep history` shows")


def _events_of_cycle(store: EventReader, number: int) -> list[str]:
    """Ids of the events recorded with this cycle number, newest first. Numbers grow with the events (the
    count of events when the cycle began, plus one), so the search stops at the first page that is all older."""
    found: list[str] = []
    offset = 0
    while True:
        page = store.list_events(limit=_PAGE, offset=offset)
        found += [e.id for e in page if e.meta.cycle == number]
        numbers = [e.meta.cycle for e in page if e.meta.cycle]
        if len(page) < _PAGE or (numbers and max(numbers) < number):
            return found
        offset += _PAGE


def resolve_gene(typed: str, known: Sequence[str]) -> str:
    """The gene ``typed`` names among ``known``: its id, the id without ``gene_`` (as `gep history` shows
    genes), or a unique prefix of either (a list cut with "…" included); a one-line GepError otherwise."""
    return resolve_prefix(typed, known, what="gene", listing="gep genes list",
                          forms=lambda g: (g, g.removeprefix("gene_")))


def resolve_prefix(typed: str, known: Sequence[str], *, what: str, listing: str,
                   forms: Callable[[str], Iterable[str]] = lambda i: (i,)) -> str:
    """The one id of ``known`` that ``typed`` names: equal, or a unique prefix of one of its ``forms``
    (a value a list cut with "…" included); a one-line GepError naming ``what`` and the ``listing`` otherwise."""
    typed = typed.strip().rstrip("…").rstrip(".")
    if typed in known:
        return typed
    found = sorted({i for i in known if any(f.startswith(typed) for f in forms(i))}) if len(typed) >= MIN_TYPED else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise GepError(f"no {what} with id {typed!r} (see `{listing}`)")
    more = f" and {len(found) - CANDIDATES_SHOWN} more" if len(found) > CANDIDATES_SHOWN else ""
    raise GepError(f"{what} {typed!r} is ambiguous: it matches {', '.join(found[:CANDIDATES_SHOWN])}{more}; "
                   "type more of it")
