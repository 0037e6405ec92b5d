"""How gep's cycle flows are declared: Prefect's Flow, without two costs a cycle's run does not need.

- Parameters that are JSON already (the cycle's are str, int and bool) go to the server as they are.
  Prefect's generic encoder gives the same values, but it imports FastAPI to do it (~0.2 s of a
  `gep cycle` process); any other value still goes through it.
- A flow whose parameter is a typed request (``request_model``: gep/core/request.py) gets it checked into that
  model before it runs, a bad field failing the run with one line. Runs made by deployments and schedules
  registered before the request was one parameter still carry the old flat fields (``workspace``,
  ``mutator``, ..., with "" and -1 for "not set"): the flow's signature keeps those names, hidden from its
  Run form (Prefect binds a run's parameters to the signature before anything else sees them), and they
  are folded into the request here, not refused. A field given both ways goes to the one the run's caller
  gave, not to the deployment's default the server merged in (`--param workspace=/path` on a deployment whose
  default request names another or none); a conflict nothing can settle is refused in one line.
- No result persistence. A cycle's outcome is its event in gep's store and its run's state, name, tags and
  artifacts; nothing reads a flow's result back from storage. Saying so up front also spares the run a
  request asking the server for a default result storage.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar
from uuid import UUID

from prefect import Flow
from prefect.utilities.callables import parameter_schema
from pydantic import BaseModel

from gep.core.errors import ConfigError
from gep.core.request import parse_request

P = ParamSpec("P")
R = TypeVar("R")

JSON_SCALARS = (str, int, float, bool, type(None))
# the flat parameters of the cycle flows before the request was one parameter; -1 was "random seed"
FLAT_FIELDS = ("workspace", "mutator", "strategy", "agent_cmd", "abandon_pending", "branch", "review", "seed",
               "llm_signals")


class GepFlow(Flow[P, R]):
    """A Prefect flow whose JSON parameters are sent without Prefect's generic (FastAPI) encoder, and whose
    ``request`` parameter (when it has a ``request_model``) is checked, and folded from the old flat shape."""

    request_model: type[BaseModel] | None = None

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        # type(), not isinstance: a str enum or an int subclass takes the generic path, as before
        if all(type(value) in JSON_SCALARS for value in parameters.values()):
            return dict(parameters)
        if all(type(value) in JSON_SCALARS or isinstance(value, BaseModel) for value in parameters.values()):
            return {k: form_values(v) if isinstance(v, BaseModel) else v for k, v in parameters.items()}
        return super().serialize_parameters(parameters)

    def validate_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        if self.request_model is not None:
            parameters = {"request": self._request(dict(parameters))}
        return super().validate_parameters(parameters)

    def _request(self, parameters: dict[str, Any]) -> BaseModel:
        """The run's request: given as such, or with an old run's flat fields folded in; one line if neither,
        or if a field comes both ways with different values (the server merges a deployment's parameters
        with the run's, so one of them may be a default: which one cannot be told, and the wrong workspace
        must never be evolved)."""
        model = self.request_model
        assert model is not None
        flat = fold_flat({k: v for k in FLAT_FIELDS if (v := parameters.pop(k, None)) is not None})
        request = parameters.pop("request", None)
        if request is None and not flat:
            raise ConfigError("parameter 'request' is missing: fill in the workspace field of the Run form")
        if not flat:
            return parse_request(model, request)
        given = request.model_dump() if isinstance(request, BaseModel) else dict(request or {})
        defaults: dict[str, Any] | None = None  # the deployment's own parameters, read on the first conflict
        for name in flat.keys() & given.keys():
            if _unset(given[name]) or _field(model, name, flat[name]) == _field(model, name, given[name]):
                continue  # a blank or unrendered field of the request is no value: the flat one fills it
            defaults = deployment_defaults() if defaults is None else defaults
            winner = explicit_one(model, name, flat[name], given[name], defaults)
            if winner is None:
                raise ConfigError(f"parameter {name!r} is given twice, on its own and inside 'request', with "
                                  "different values: give it once (a deployment made before the request was one "
                                  "parameter: deploy it again)")
            if winner == "request":
                del flat[name]
        return parse_request(model, {**given, **flat})


def _unset(value: Any) -> bool:
    """A request field's "not set": blank, or a deployment's template its environment left unrendered."""
    return value is None or isinstance(value, str) and (not value.strip() or "{{" in value)


def explicit_one(model: type[BaseModel], name: str, flat: Any, given: Any, defaults: dict[str, Any]) -> str | None:
    """Which of a field given both ways the run's caller gave ("flat" or "request"): the one that is not the
    deployment's default (the server merged that in); None when that cannot be told."""
    found = defaults.get("request")
    default_request: dict[str, Any] = found if isinstance(found, dict) else {}
    request_is_default = name in default_request and _same(model, name, default_request[name], given)
    flat_is_default = name in defaults and _same(model, name, defaults[name], flat)
    if request_is_default != flat_is_default:
        return "flat" if request_is_default else "request"
    return None


def _same(model: type[BaseModel], name: str, a: Any, b: Any) -> bool:
    try:
        return bool(_field(model, name, a) == _field(model, name, b))
    except ConfigError:  # a default that is no valid value (a blank workspace) is never the explicit one
        return a == b


def deployment_defaults() -> dict[str, Any]:
    """The parameters of the deployment this flow run was made from ({} for a run of no deployment, or when
    the server cannot say): a worker names the run in PREFECT__FLOW_RUN_ID."""
    # deferred: only a run whose flat parameters meet a default request asks the server (the client, the runtime)
    from prefect import get_client
    from prefect.runtime import flow_run  # deferred with the client

    run_id = flow_run.get_id()
    if not run_id:
        return {}
    try:
        with get_client(sync_client=True) as client:
            deployment_id = client.read_flow_run(UUID(run_id)).deployment_id
            return dict(client.read_deployment(deployment_id).parameters) if deployment_id else {}
    except Exception:  # noqa: BLE001 - unknown: the conflict is refused as before, in one line
        return {}


def _field(model: type[BaseModel], name: str, value: Any) -> Any:
    """``value`` as the request's field ``name`` holds it (names and blanks normalised)."""
    return getattr(parse_request(model, {"workspace": "/", name: value}), name)


def form_values(model: BaseModel) -> dict[str, Any]:
    """What a run records of a request: the fields its Run form shows (those left unset omitted, so the run
    can be copied into a new one), in JSON."""
    return model.model_dump(mode="json", include=_form_fields(type(model)), exclude_none=True)


@functools.cache
def _form_fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_json_schema().get("properties", {}))


def fold_flat(fields: dict[str, Any]) -> dict[str, Any]:
    """An old run's flat parameters as the request's fields ("" and -1 meant "not set")."""
    fields = dict(fields)
    if fields.get("seed") == -1:
        del fields["seed"]
    return fields


def gep_flow(name: str, request_model: type[BaseModel] | None = None,
             **options: Any) -> Callable[[Callable[P, R]], GepFlow[P, R]]:
    """``@flow(name=..., validate_parameters=True, persist_result=False, **options)`` as a :class:`GepFlow`;
    ``request_model``: the model of its ``request`` parameter."""

    def make(fn: Callable[P, R]) -> GepFlow[P, R]:
        made = GepFlow(fn=fn, name=name, validate_parameters=True, persist_result=False, **options)
        made.request_model = request_model
        if request_model is not None:
            # The function's request defaults to None only so that an old run's flat fields bind; the schema
            # Prefect draws the Run form from (and deployments register) shows it required.
            sig = inspect.signature(fn, eval_str=True)  # the annotations as Prefect reads them
            params = [p.replace(default=inspect.Parameter.empty) if p.name == "request" else p
                      for p in sig.parameters.values()]
            made.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
            made.parameters = parameter_schema(made)
        return made

    return make
