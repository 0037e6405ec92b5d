"""What a cycle's process no longer pays for, and that the flow run still tells Prefect the same things:
its parameters as Prefect's own encoder would send them (without importing FastAPI), the foreground run's
settings (this API, no heartbeats), the engine's models built held-models-first, and fewer git calls."""

from __future__ import annotations

import enum
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.timeout(300)


def _python(code: str) -> str:
    """Run ``code`` in a new interpreter (a process as fresh as a `gep` command); its stdout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


PARAMS = {"workspace": "/w/ws", "mutator": "prompt", "strategy": "auto", "agent_cmd": "", "abandon_pending": False,
          "branch": "", "review": True, "seed": 7, "llm_signals": False}


def test_cycle_parameters_are_sent_as_prefect_sends_them_without_importing_fastapi():
    out = _python(f"""
import json, sys
from prefect import Flow
from flows.cycle import evolution_cycle, scheduled_cycle
from flows.solidify import solidify_pending
from gep.core.request import CycleRequest
request = CycleRequest(workspace="/w/ws", mutator="prompt", review=True, seed=7, flow_run_id="not-a-form-field")
ours = evolution_cycle.serialize_parameters({{"request": request}})
print(json.dumps(ours))
print("fastapi" in sys.modules)
print([f.persist_result for f in (evolution_cycle, scheduled_cycle, solidify_pending)])
print(json.dumps(Flow.serialize_parameters(evolution_cycle, ours)) == json.dumps(ours))
print(CycleRequest.model_validate(ours["request"]) == request.model_copy(update={{"flow_run_id": None}}))
flat = {PARAMS!r}
print(json.dumps(evolution_cycle.serialize_parameters(flat)) == json.dumps(flat))
""").splitlines()
    import json

    sent = json.loads(out[0])["request"]
    assert sent == {"workspace": "/w/ws", "mutator": "prompt", "strategy": "auto", "abandon_pending": False,
                    "review": True, "seed": 7, "llm_signals": False}  # the form's fields, unset ones omitted
    assert type(sent["seed"]) is int and type(sent["review"]) is bool
    assert out[1] == "False", "the cycle's parameters went through Prefect's FastAPI encoder"
    assert out[2] == "[False, False, False]"
    assert out[3] == "True", "not what Prefect's own encoder sends"
    assert out[4] == "True", "the recorded request does not give the same request back"
    assert out[5] == "True", "an old run's flat parameters are not sent as they are"


class Mode(enum.StrEnum):
    prompt = "prompt"


def test_other_parameter_values_still_take_prefects_encoder():
    from prefect import Flow

    from flows.cycle import evolution_cycle

    odd = {"workspace": Path("/w/ws"), "mutator": Mode.prompt, "seed": 3}
    assert evolution_cycle.serialize_parameters(odd) == Flow.serialize_parameters(evolution_cycle, odd) == \
        {"workspace": "/w/ws", "mutator": "prompt", "seed": 3}


def test_foreground_run_reports_to_the_api_without_heartbeats_or_a_ca_bundle_for_plain_http():
    from prefect.settings import get_current_settings, temporary_settings

    from flows.runtime import foreground_run

    api = "http://127.0.0.1:9/api"  # nothing connects here: only the settings are read
    with temporary_settings(updates={"api.url": api}):  # what PREFECT_API_URL gives a `gep cycle` process
        before = get_current_settings()
        assert before.flows.heartbeat_frequency is not None  # Prefect's default: deployments keep heartbeats
        assert before.api.tls_insecure_skip_verify is False
        with foreground_run(api):
            inside = get_current_settings()
            assert inside.flows.heartbeat_frequency is None
            assert inside.api.tls_insecure_skip_verify is True  # plain http: no TLS, no CA bundle to parse
            assert inside.api.url == api and inside.model_dump(exclude={"flows", "api"}) == \
                before.model_dump(exclude={"flows", "api"})
        assert get_current_settings() is before
        with foreground_run("http://127.0.0.1:8/api"):  # another API: the validated path
            inside = get_current_settings()
            assert inside.api.url == "http://127.0.0.1:8/api" and inside.flows.heartbeat_frequency is None
            assert inside.api.tls_insecure_skip_verify is True
        assert get_current_settings() is before
    secure = "https://prefect.example.com/api"
    with temporary_settings(updates={"api.url": secure}):
        with foreground_run(secure):
            assert get_current_settings().api.tls_insecure_skip_verify is False  # TLS is verified
        with foreground_run("https://other.example.com/api"):
            assert get_current_settings().api.tls_insecure_skip_verify is False


def test_a_cycles_models_are_built_once_each_held_models_first():
    out = _python("""
from pydantic import BaseModel
BaseModel.model_config["defer_build"] = True  # as the console script does
import pydantic._internal._model_construction as mc
import gep.cycle.pipeline, gep.cycle.context
from gep.core.prebuild import build_models, _subclasses
built = []
real = mc.complete_model_class
def counted(cls, *a, **k):
    built.append(f"{cls.__module__}.{cls.__qualname__}")
    return real(cls, *a, **k)
mc.complete_model_class = counted
n = build_models()
models = [c for c in _subclasses(BaseModel) if c.__module__.startswith("gep.")]
print(n, len(built), len(set(built)), sum(not c.__pydantic_complete__ for c in models), build_models())
from gep.core.prebuild import _types
name = lambda c: f"{c.__module__}.{c.__qualname__}"
late = [(name(c), name(h)) for c in models for f in c.__pydantic_fields__.values() for h in _types(f.annotation)
        if h in models and h is not c and {name(h), name(c)} <= set(built) and built.index(name(h)) > built.index(name(c))]
print(not late and built.index("gep.core.request.CycleRequest") < built.index("gep.cycle.context.CycleContext") or late)
""").split()
    n, calls, distinct, left, again, order = out
    assert int(n) > 100 and int(calls) == int(distinct) == int(n)  # each model built once
    assert left == "0" and again == "0"
    assert order == "True", "a holder was built before the models it holds"


def test_opening_a_workspace_asks_git_three_times(repo: Path, monkeypatch):
    """One rev-parse for the work tree, git dir, common dir and object format (a cycle opens the workspace
    twice: each git process counts on a busy machine)."""
    import gep.git.plumbing as plumbing
    from gep.git import open_repo

    calls: list[tuple[str, ...]] = []
    real = plumbing.Git.run

    def counted(self, *args, **kw):
        calls.append(args)
        return real(self, *args, **kw)

    monkeypatch.setattr(plumbing.Git, "run", counted)
    opened = open_repo(repo)
    assert opened.path == repo.resolve() and opened.object_format == "sha1"
    assert opened.common_dir == (repo / ".git").resolve() and opened.git_dir == (repo / ".git").resolve()
    assert len(calls) == 3, calls
