"""Build the engine's pydantic models before a cycle uses them, each after the models its fields hold.

The console script defers every model's build to its first use (gep/cli/root.py: most commands use a few of the
hundreds imported). A cycle uses dozens, and a model built on first use builds the schema of every
not-yet-built model it holds inline, again for each holder (the cycle context holds the request, the
settings, the repository, the run and its event ...): ~0.2 s of a `gep cycle` process. Built children first,
each schema is made once and reused by its holders: all of the engine's models take ~0.06 s.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator

from pydantic import BaseModel

ENGINE_MODULES = ("gep.", "flows.")


def build_models(prefixes: tuple[str, ...] = ENGINE_MODULES) -> int:
    """Build every model not built yet whose module starts with one of ``prefixes``, held models first;
    the number built. A model that cannot be built yet (a name not importable now) is left to build on
    first use, as before."""
    models = {cls for cls in _subclasses(BaseModel) if cls.__module__.startswith(prefixes)}
    done: set[type[BaseModel]] = set()
    built = 0

    def visit(cls: type[BaseModel]) -> None:
        nonlocal built
        if cls in done:
            return
        done.add(cls)
        for field in cls.__pydantic_fields__.values():
            for held in _types(field.annotation):
                if held in models:
                    visit(held)
        if not cls.__pydantic_complete__ and cls.model_rebuild(raise_errors=False):
            built += 1

    for cls in sorted(models, key=lambda c: (c.__module__, c.__qualname__)):  # the same order every run
        visit(cls)
    return built


def _subclasses(cls: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _types(annotation: object) -> Iterator[type]:
    """The classes an annotation names: ``list[Gene] | None`` gives list, Gene and NoneType."""
    if isinstance(annotation, type):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _types(arg)
