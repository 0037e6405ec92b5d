"""The full store: every aggregate's mixin over one SQLAlchemy engine (see the package's docstring)."""

from __future__ import annotations

from gep.store.behavior import BehaviorMixin
from gep.store.events import EventsMixin
from gep.store.export import ExportMixin
from gep.store.learned import LearningMixin
from gep.store.objects import ObjectsMixin
from gep.store.prune import PruneMixin
from gep.store.retirements import GenePoolMixin
from gep.store.runs import RunsMixin


class Store(EventsMixin, ObjectsMixin, RunsMixin, ExportMixin, PruneMixin, GenePoolMixin, BehaviorMixin,
            LearningMixin):
    """All reads and writes of GEP objects. Open with :meth:`open` (unscoped) or :meth:`for_workspace`."""
