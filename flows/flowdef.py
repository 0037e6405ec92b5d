"""How gep's cycle flows are declared: Prefect's Flow, without two costs a cycle's run does not need.

- Parameters that are JSON already (the cycle's are str, int and bool) go to the server as they are.
  Prefect's generic encoder gives the same values, but it imports FastAPI to do it (~0.2 s of a
  `gep cycle` process); any other value still goes through it.
- No result persistence. A cycle's outcome is its event in gep's store and its run's state, name, tags and
  artifacts; nothing reads a flow's result back from storage. Saying so up front also spares the run a
  request asking the server for a default result storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prefect import Flow

P = ParamSpec("P")
R = TypeVar("R")

JSON_SCALARS = (str, int, float, bool, type(None))


class GepFlow(Flow[P, R]):
    """A Prefect flow whose JSON parameters are sent without Prefect's generic (FastAPI) encoder."""

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        # type(), not isinstance: a str enum or an int subclass takes the generic path, as before
        if all(type(value) in JSON_SCALARS for value in parameters.values()):
            return dict(parameters)
        return super().serialize_parameters(parameters)


def gep_flow(name: str, **options: Any) -> Callable[[Callable[P, R]], GepFlow[P, R]]:
    """``@flow(name=..., validate_parameters=True, persist_result=False, **options)`` as a :class:`GepFlow`."""

    def make(fn: Callable[P, R]) -> GepFlow[P, R]:
        return GepFlow(fn=fn, name=name, validate_parameters=True, persist_result=False, **options)

    return make
