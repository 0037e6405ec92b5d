"""gep: evolution cycles for AI-agent workspaces, as a library.

What a script uses::

    import gep

    event = gep.run_cycle(gep.CycleRequest(workspace="/path/to/repo", mutator="prompt"))
    # ... someone makes the change the prompt asks for ...
    event = gep.solidify_pending(gep.CycleRequest(workspace="/path/to/repo", summary="Fix the mean"))
    with gep.open_store("/path/to/repo") as store:
        print([e.id for e in store.list_events(limit=5)])

Beside the package's folders: api.py, distill_run.py, server.py, fleet_progress.py (library entry points),
workspace_setup.py (`gep init`'s gep.toml), doctor.py (`gep doctor`'s checks), entry.py (the console script),
fleet.py and prefect_api.py (the fleet's records and the Prefect API over HTTP).

Names are loaded on first use, so ``import gep.signals.rules`` (or the hook behind ``gep capture``) does not pay
for the store, git and the mutators.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gep.api import open_store, recover
    from gep.core.config import Settings, load_settings
    from gep.core.errors import GepError
    from gep.core.models import EvolutionEvent
    from gep.core.request import CycleRequest
    from gep.cycle.pipeline import run_cycle, solidify_pending
    from gep.store import Store

_EXPORTS = {
    "CycleRequest": "gep.core.request",
    "EvolutionEvent": "gep.core.models",
    "GepError": "gep.core.errors",
    "Settings": "gep.core.config",
    "Store": "gep.store",
    "load_settings": "gep.core.config",
    "open_store": "gep.api",
    "recover": "gep.api",
    "run_cycle": "gep.cycle.pipeline",
    "solidify_pending": "gep.cycle.pipeline",
}

__all__ = ["CycleRequest", "EvolutionEvent", "GepError", "Settings", "Store", "load_settings", "open_store",
           "recover", "run_cycle", "solidify_pending"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gep' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
