"""gep.prefect_api against a real HTTP server on 127.0.0.1: what it sends, and every way a server can fail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from live_prefect import free_port

from gep import prefect_api as api

RUN = "6f1c0a4e-3d7b-4d0e-9a43-6f3c2b1e0d9a"


class Fake(BaseHTTPRequestHandler):
    answer: tuple[int, bytes] = (200, b"true")
    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def _reply(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Fake.seen.append((self.command, self.path, dict(self.headers), body))
        status, payload = Fake.answer
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _reply

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Fake.seen = []
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/api"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_runs_are_asked_in_one_post_with_the_credentials(server: str) -> None:
    Fake.answer = (200, json.dumps([{"id": RUN, "name": "brave-fox", "state_name": "Completed",
                                     "state_type": "COMPLETED", "tags": ["gep"], "total_run_time": 1.5,
                                     "parameters": {"workspace": "/w"}}]).encode())
    runs = api.read_flow_runs(server, [RUN, "not-a-uuid"], env={"PREFECT_API_KEY": "k-123"})
    assert runs is not None and runs[RUN].state == "Completed" and runs[RUN].duration_s == 1.5
    assert runs[RUN].workspace == Path("/w")
    ((method, path, headers, body),) = Fake.seen
    assert (method, path) == ("POST", "/api/flow_runs/filter")
    assert json.loads(body) == {"flow_runs": {"id": {"any_": [RUN]}}, "limit": 1}
    assert headers["Authorization"] == "Bearer k-123" and headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(("answer", "healthy"), [((500, b"{}"), False), ((200, b"<html>not json"), False),
                                               ((404, b"null"), False), ((200, b"{}"), True)])
def test_a_server_that_answers_wrongly_is_no_answer(server: str, answer: tuple[int, bytes], healthy: bool) -> None:
    Fake.answer = answer  # a page that is not Prefect's (a proxy's error page) is not a healthy Prefect API
    assert api.read_flow_runs(server, [RUN]) is None
    assert api.healthy(server) == healthy


def test_no_server_is_no_answer_at_once() -> None:
    url = f"http://127.0.0.1:{free_port()}/api"
    assert not api.healthy(url) and api.read_flow_runs(url, [RUN]) is None
    assert api.workspace_runs(url, "gep-ws:x", 20) is None
