"""The few things gep asks a Prefect server without importing Prefect (1-2 s of import, ~100 MB).

Which API is configured (``PREFECT_API_URL`` in the environment or in the active profile of
``$PREFECT_HOME/profiles.toml``), whether it answers, and the flow runs behind recorded cycles, each with
one plain HTTP request (Prefect's REST API) and a short timeout, so a command that only reads the store
never waits for a server that is not there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from uuid import UUID

from pydantic import BaseModel

from gep.core.stored_path import StoredPath

TIMEOUT_S = 1.0  # a local server answers in milliseconds; one that does not is treated as absent
PAGE = 200  # Prefect's default page limit for filter requests


class FlowRunInfo(BaseModel):
    """A flow run as `gep history` shows it."""

    id: str
    name: str
    state_type: str | None = None
    state: str = "?"
    message: str | None = None
    duration_s: float | None = None
    tags: list[str] = []
    start: datetime | None = None
    workspace: StoredPath | None = None  # the run's `workspace` parameter
    link: str | None = None

    def tag(self, prefix: str) -> str | None:
        """The value of the run's ``prefix:value`` tag (``outcome``, ``workspace``), if any."""
        return next((t.split(":", 1)[1] for t in self.tags if t.startswith(prefix + ":")), None)


# ------------------------------------------------------------------ how a workspace is named in Prefect


def workspace_key(path: Path | str, workspace_id: str | None = None) -> str:
    """A stable slug for the workspace's concurrency limit, artifact keys and deployment names.

    Keyed by the workspace's identity, not the path as typed: its id when the store has given it one
    (kept in the git common dir, survives moves; ``workspace_id`` when the caller has it), else its resolved
    real path."""
    real = Path(path).expanduser().resolve()
    name = re.sub(r"[^a-z0-9]+", "-", real.name.lower()).strip("-")[:30] or "ws"
    digest = hashlib.sha1((workspace_id or _workspace_id(real) or str(real)).encode()).hexdigest()[:8]
    return f"{name}-{digest}"


def _workspace_id(real: Path) -> str | None:
    try:
        from gep.core.errors import WorkspaceError
        from gep.core.workspace_id import workspace_identity
    except ImportError:
        return None
    try:
        return str(workspace_identity(real).id)
    except (WorkspaceError, OSError):  # no id (not a directory, unreadable): the real path still identifies it
        return None


def workspace_slot_name(path: Path | str, key: str | None = None) -> str:
    """The name of the workspace's concurrency limit (one cycle at a time: flows/slot.py); ``key``: its
    :func:`workspace_key`, when the caller has it."""
    return f"gep-workspace-{key or workspace_key(path)}"


def workspace_tag(path: Path | str) -> str:
    """The readable tag on every run of the workspace (`gep history --all` filters on it)."""
    return f"workspace:{Path(path).expanduser().resolve().name}"


# ------------------------------------------------------------------ settings, read like Prefect reads them


def prefect_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("PREFECT_HOME") or "~/.prefect").expanduser()


def profile_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of the active Prefect profile (PREFECT_PROFILE, else the file's ``active``); {} if none."""
    env = os.environ if env is None else env
    path = Path(env.get("PREFECT_PROFILES_PATH") or prefect_home(env) / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    name = env.get("PREFECT_PROFILE") or data.get("active")
    profile = data.get("profiles", {}).get(name, {}) if isinstance(name, str) else {}
    return {k: str(v) for k, v in profile.items()} if isinstance(profile, dict) else {}


def setting(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """A Prefect setting as Prefect resolves it here: the environment first, then the active profile."""
    env = os.environ if env is None else env
    return env.get(name) or profile_settings(env).get(name) or None


def configured_api_url(env: Mapping[str, str] | None = None) -> str | None:
    url = setting("PREFECT_API_URL", env)
    return url.rstrip("/") if url else None


def ui_url(api_url: str, env: Mapping[str, str] | None = None) -> str:
    """The UI the server serves by default: PREFECT_UI_URL, else the API URL without its ``/api``."""
    ui = setting("PREFECT_UI_URL", env)
    if ui:
        return ui.rstrip("/")
    return api_url[: -len("/api")] if api_url.endswith("/api") else api_url


def run_link(api_url: str, run_id: str, env: Mapping[str, str] | None = None) -> str:
    return f"{ui_url(api_url, env)}/runs/flow-run/{run_id}"


def _headers(env: Mapping[str, str] | None) -> dict[str, str]:
    """Credentials for Prefect Cloud or a server with basic auth, as Prefect's own client sends them."""
    key = setting("PREFECT_API_KEY", env)
    if key:
        return {"Authorization": f"Bearer {key}"}
    auth = setting("PREFECT_API_AUTH_STRING", env)
    if auth:
        return {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}
    return {}


# ------------------------------------------------------------------ requests


def healthy(api_url: str, timeout_s: float = TIMEOUT_S, env: Mapping[str, str] | None = None) -> bool:
    """Whether the API at ``api_url`` answers its health check within ``timeout_s``."""
    answer = _request(f"{api_url}/health", None, timeout_s, _headers(env))
    return answer is not None


def _filter(api_url: str, body: dict[str, object], timeout_s: float,
            env: Mapping[str, str] | None) -> list[FlowRunInfo] | None:
    """POST /flow_runs/filter; None when the server does not answer (or answers with an error)."""
    rows = _request(f"{api_url}/flow_runs/filter", body, timeout_s, _headers(env))
    if not isinstance(rows, list):
        return None
    # JSON edge: Prefect's FlowRun objects; only the fields history shows are read
    return [_info(row, api_url, env) for row in rows if isinstance(row, dict)]


def _request(url: str, body: dict[str, object] | None, timeout_s: float, headers: dict[str, str]) -> object:
    """GET (or POST ``body`` as JSON) and the decoded JSON answer; None on no answer, an error status or
    a body that is not JSON. Plain http (a local server) goes through urllib: importing httpx costs a
    store-only command ~0.13 s. https keeps httpx, which verifies certificates as Prefect's own client does."""
    data = None if body is None else json.dumps(body).encode()
    if url.lower().startswith("https:"):
        import httpx

        try:
            r = httpx.request("GET" if body is None else "POST", url, content=data, timeout=timeout_s,
                              headers={**headers, "Content-Type": "application/json"})
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError):
            return None
    import http.client
    import urllib.request

    req = urllib.request.Request(url, data=data, headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read())
    except (OSError, http.client.HTTPException, ValueError):  # URLError, HTTPError, timeouts: OSError
        return None


def _info(row: dict[str, object], api_url: str, env: Mapping[str, str] | None) -> FlowRunInfo:
    raw_state, raw_params, tags = row.get("state"), row.get("parameters"), row.get("tags")
    state = raw_state if isinstance(raw_state, dict) else {}
    params = raw_params if isinstance(raw_params, dict) else {}
    run_id = str(row.get("id"))
    total = row.get("total_run_time")
    return FlowRunInfo(
        id=run_id, name=str(row.get("name") or ""), state_type=_str(row.get("state_type")),
        state=_str(row.get("state_name")) or "?", message=_str(state.get("message")),
        duration_s=float(total) if isinstance(total, int | float) else None,
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        start=row.get("start_time") or row.get("expected_start_time"),
        workspace=_str(params.get("workspace")), link=run_link(api_url, run_id, env))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def read_flow_runs(api_url: str, run_ids: Sequence[str], timeout_s: float = TIMEOUT_S,
                   env: Mapping[str, str] | None = None) -> dict[str, FlowRunInfo] | None:
    """The flow runs with these ids, by id: one request per 200 ids; None when the server does not answer."""
    ids = sorted({i for i in run_ids if _is_uuid(i)})
    out: dict[str, FlowRunInfo] = {}
    for start in range(0, len(ids), PAGE):
        page = ids[start:start + PAGE]
        runs = _filter(api_url, {"flow_runs": {"id": {"any_": page}}, "limit": len(page)}, timeout_s, env)
        if runs is None:
            return None
        out.update({r.id: r for r in runs})
    return out


def workspace_runs(api_url: str, workspace_tag: str, limit: int, timeout_s: float = TIMEOUT_S,
                   env: Mapping[str, str] | None = None) -> list[FlowRunInfo] | None:
    """The newest flow runs tagged ``workspace_tag`` (skipped ticks and refused runs included)."""
    body = {"flow_runs": {"tags": {"all_": [workspace_tag]}}, "sort": "EXPECTED_START_TIME_DESC",
            "limit": min(limit, PAGE)}
    return _filter(api_url, body, timeout_s, env)


def _is_uuid(value: str | None) -> bool:
    try:
        UUID(str(value))
        return True
    except ValueError:
        return False


def resume_run(api_url: str, run_id: str, run_input: dict[str, object], timeout_s: float = 10.0,
               env: Mapping[str, str] | None = None) -> str | None:
    """Resume a paused flow run with ``run_input`` (what its pause waits for); None when the server accepted
    it, else why not in a few words. POST /flow_runs/{id}/resume, as Prefect's resume_flow_run sends it."""
    if not _is_uuid(run_id):
        return f"{run_id!r} is not a flow run id"
    answer = _request(f"{api_url}/flow_runs/{run_id}/resume", {"run_input": run_input}, timeout_s,
                      _headers(env))
    if not isinstance(answer, dict):  # JSON edge: Prefect's OrchestrationResult
        return f"the Prefect server at {api_url} did not answer"
    if answer.get("status") == "ACCEPT":
        return None
    details = answer.get("details")
    reason = details.get("reason") if isinstance(details, dict) else None
    return str(reason or f"the server said {answer.get('status')}")


# ------------------------------------------------------------------ workspace slots this machine holds
# flows/slot.py notes each slot lease it takes in a file (``<pid>-<lease>.json`` in a folder of the user's,
# mode 0700) and removes it when it gives the slot back. A cycle stopped by SIGINT or SIGTERM
# (gep/cycle/interrupt.py) gives its own back at once; `gep recover` and a cycle about to wait for its slot give
# back those of a process that is gone (SIGKILL), instead of waiting out the lease (5 minutes).

RELEASE_TIMEOUT_S = 2.0
_GONE = (404, 410)  # the server no longer knows the lease: nothing is held by it


class HeldSlot(BaseModel):
    """A workspace slot a process of this machine holds (or held, when the process is gone)."""

    name: str
    lease_id: str
    api_url: str
    pid: int


def slots_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"gep-slots-{os.getuid()}"


def _own_dir(create: bool) -> Path | None:
    """The records' folder when it is this user's alone (another user's folder of that name is never read)."""
    d = slots_dir()
    try:
        if create:
            d.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return None
    return d if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077 else None


def record_slot(name: str, lease_id: str, api_url: str) -> Path | None:
    """Note that this process holds ``name``'s slot by ``lease_id``; the record's path (None: not written)."""
    d = _own_dir(create=True)
    if d is None:
        return None
    path = d / f"{os.getpid()}-{lease_id}.json"
    held = HeldSlot(name=name, lease_id=lease_id, api_url=api_url.rstrip("/"), pid=os.getpid())
    try:
        path.with_suffix(".tmp").write_text(held.model_dump_json(), encoding="utf-8")
        os.replace(path.with_suffix(".tmp"), path)
    except OSError:
        return None
    return path


def forget_slot(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)


def held_slots() -> list[tuple[Path, HeldSlot]]:
    """Every record in the folder (unreadable ones left out)."""
    d = _own_dir(create=False)
    out: list[tuple[Path, HeldSlot]] = []
    for p in sorted(d.glob("*.json")) if d is not None else []:
        try:
            out.append((p, HeldSlot.model_validate_json(p.read_bytes()[:4096])))
        except (OSError, ValueError):
            continue
    return out


def release_lease(slot: HeldSlot, timeout_s: float = RELEASE_TIMEOUT_S) -> bool:
    """Give the slot of ``slot``'s lease back (one POST); True when the server took it or no longer knows it."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{slot.api_url}/v2/concurrency_limits/decrement-with-lease", method="POST",
                                 data=json.dumps({"lease_id": slot.lease_id}).encode(),
                                 headers={**_headers(None), "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return 200 <= r.status < 300
    except urllib.error.HTTPError as exc:
        return exc.code in _GONE
    except (OSError, ValueError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def release_own_slots(budget_s: float = 3.0) -> int:
    """Give back the slots this process holds (a signal stops it); how many were given back."""
    return _release([(p, s) for p, s in held_slots() if s.pid == os.getpid()], budget_s)


def release_dead_slots(name: str | None = None, budget_s: float = 5.0) -> int:
    """Give back the slots (of ``name`` only, when given) held by processes that are gone; how many."""
    return _release([(p, s) for p, s in held_slots() if not _alive(s.pid) and name in (None, s.name)], budget_s)


def _release(found: Sequence[tuple[Path, HeldSlot]], budget_s: float) -> int:
    deadline = time.monotonic() + budget_s
    done = 0
    for path, slot in found:
        left = deadline - time.monotonic()
        if left <= 0.05:
            break
        if release_lease(slot, min(RELEASE_TIMEOUT_S, left)):
            forget_slot(path)
            done += 1
    return done
