"""The spreader (lab.measure.vllm.spreader, lab.measure.vllm.relay) in front of two fake vLLM servers.

Every wait is on an event (a token the client has seen, a request released by the test); ``WAIT_S``
is only a fuse that ends a test that would otherwise hang, never a time the test needs to pass.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading

import pytest
from fake_vllm import FakeVLLM

from lab import REPO_ROOT, LabError
from lab.measure.vllm.probe import StreamError, stream_completion
from lab.measure.vllm.server import free_port, request
from lab.measure.vllm.spreader import Spreader

WAIT_S = 30.0
MODEL = "fake-model"


def _open_stream(base_url: str, prompt: list[int], max_tokens: int = 4, **extra) -> http.client.HTTPResponse:
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "return_token_ids": True,
            **extra}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    return conn.getresponse()


def _events(resp: http.client.HTTPResponse):
    """Each ``data:`` event of a stream as it arrives (the JSON object), until [DONE]."""
    while True:
        line = resp.readline()
        if not line:
            raise AssertionError("the stream ended without [DONE]")
        if line.startswith(b"data: "):
            data = line[6:].strip()
            if data == b"[DONE]":
                return
            yield json.loads(data)


def _prompts(fake: FakeVLLM) -> list[list[int]]:
    return [r["prompt"] for r in fake.requests]


def _counts(spreader: Spreader, field: str = "requests") -> list[int]:
    assert spreader.wait_idle(WAIT_S)
    return [b[field] for b in spreader.stats()["backends"]]


# --- passing a stream on ---------------------------------------------------------------------------

def test_a_stream_is_passed_on_token_by_token_as_it_arrives():
    """The fake sends token k only once the client has read token k-1 through the spreader: a spreader that
    held chunks back would stall it (the gate then gives up and the test fails)."""
    seen = [threading.Event() for _ in range(6)]
    stalled = []

    def gate(sent):
        if sent and not stalled and not seen[sent - 1].wait(WAIT_S):
            stalled.append(sent)

    with FakeVLLM(before_token=gate, decode_s=0) as fake, FakeVLLM() as other, \
            Spreader([fake.base_url, other.base_url], "round-robin") as spreader:
        resp = _open_stream(spreader.base_url, [5, 6, 7], max_tokens=6, stream_options={"include_usage": True})
        assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
        through = []
        for event in _events(resp):
            through.append(event)
            if event["choices"]:
                seen[sum(1 for e in through if e["choices"]) - 1].set()
        direct = list(_events(_open_stream(fake.base_url, [5, 6, 7], max_tokens=6,
                                           stream_options={"include_usage": True})))
    assert not stalled, f"token {stalled[0]} waited {WAIT_S:.0f} s for the client to see the one before"
    assert through == direct and sum(len(e["choices"]) for e in through) == 6 and "usage" in through[-1]
    assert _prompts(other) == []


def test_round_robin_alternates():
    with FakeVLLM() as a, FakeVLLM() as b, Spreader([a.base_url, b.base_url], "round-robin") as spreader:
        for i in range(5):
            assert stream_completion(spreader.base_url, MODEL, [i], 3).completion_tokens == 3
        assert _prompts(a) == [[0], [2], [4]] and _prompts(b) == [[1], [3]]
        assert _counts(spreader) == [3, 2] and _counts(spreader, "completed") == [3, 2]


def test_least_loaded_sends_to_the_idle_one_and_ties_go_in_turn():
    release = threading.Event()

    def hold(sent):       # every request to `a` stops after its first token until the test releases it
        if sent == 1:
            release.wait(WAIT_S)

    with FakeVLLM(before_token=hold) as a, FakeVLLM() as b, \
            Spreader([a.base_url, b.base_url], "least-loaded") as spreader:
        held = _open_stream(spreader.base_url, [0])
        assert next(_events(held))["choices"]          # `a` has it, and is busy with it
        stream_completion(spreader.base_url, MODEL, [1], 3)
        stream_completion(spreader.base_url, MODEL, [2], 3)   # round-robin would have sent this one to `a`
        assert _prompts(a) == [[0]] and _prompts(b) == [[1], [2]]
        assert [x["in_flight"] for x in spreader.stats()["backends"]] == [1, 0]
        release.set()
        assert sum(len(e["choices"]) for e in _events(held)) == 3
        stream_completion(spreader.base_url, MODEL, [3], 3)   # both idle: the next in turn after `b`
        assert _prompts(a) == [[0], [3]] and _counts(spreader) == [2, 2]


def test_least_loaded_splits_requests_held_at_once_evenly():
    release = threading.Event()
    with FakeVLLM(before_token=lambda sent: sent == 1 and release.wait(WAIT_S)) as a, \
            FakeVLLM(before_token=lambda sent: sent == 1 and release.wait(WAIT_S)) as b, \
            Spreader([a.base_url, b.base_url], "least-loaded") as spreader:
        streams = [_open_stream(spreader.base_url, [i]) for i in range(6)]
        for stream in streams:
            assert next(_events(stream))["choices"]
        assert [x["in_flight"] for x in spreader.stats()["backends"]] == [3, 3]
        release.set()
        for stream in streams:
            list(_events(stream))
        assert _counts(spreader, "completed") == [3, 3]


# --- errors and dead backends ------------------------------------------------------------------------

def test_a_dead_backend_gives_a_502_with_its_reason_and_the_other_still_serves():
    with FakeVLLM() as a:
        b = FakeVLLM().__enter__()
        with Spreader([a.base_url, b.base_url], "round-robin") as spreader:
            stream_completion(spreader.base_url, MODEL, [0], 2)
            stream_completion(spreader.base_url, MODEL, [1], 2)
            b.__exit__()                                   # `b` dies: its port refuses connections
            stream_completion(spreader.base_url, MODEL, [2], 2)
            with pytest.raises(StreamError, match="HTTP 502") as refused:
                stream_completion(spreader.base_url, MODEL, [3], 2)
            assert b.base_url in str(refused.value) and "cannot be reached" in str(refused.value)
            for i in (4, 5):                               # marked down: everything goes to `a` now
                stream_completion(spreader.base_url, MODEL, [i], 2)
            assert _prompts(a) == [[0], [2], [4], [5]]
            state = spreader.stats()["backends"][1]
            assert not state["up"] and state["failed"] == 1 and "cannot be reached" in state["down_reason"]
            status, body = request(spreader.base_url, "/health")
            assert status == 503 and [s["up"] for s in json.loads(body)["backends"]] == [True, False]


def test_a_stream_cut_by_its_backend_reaches_the_client_cut():
    with FakeVLLM(fault="drop") as a, Spreader([a.base_url]) as spreader:
        with pytest.raises(StreamError):
            stream_completion(spreader.base_url, MODEL, [1, 2], 8)
        assert _counts(spreader, "failed") == [1]
        assert "cut its stream" in spreader.stats()["backends"][0]["last_error"]
        assert spreader.stats()["backends"][0]["up"]       # the server itself is still up


def test_error_statuses_and_whole_replies_pass_through_as_they_are():
    with FakeVLLM() as a, FakeVLLM(fault="http500") as b, Spreader([a.base_url, b.base_url], "round-robin") as spreader:
        assert request(spreader.base_url, "/v1/completions", {"model": "nope", "prompt": [1]}) == \
            (404, json.dumps({"error": {"message": "The model `nope` does not exist."}}))
        status, body = request(spreader.base_url, "/v1/completions", {"model": MODEL, "prompt": [1], "stream": True})
        assert status == 500 and "injected" in json.loads(body)["error"]["message"]
        status, body = request(spreader.base_url, "/v1/completions",
                               {"model": MODEL, "prompt": [1, 2], "max_tokens": 3, "stream": False})
        assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 3
        assert _counts(spreader, "http_errors") == [1, 1] and _counts(spreader, "completed") == [1, 0]


class _RawBackend:
    """A backend that answers every request with the same raw bytes and closes (None: never answers)."""

    def __init__(self, raw: bytes | None):
        self.done = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                length = 0
                while (line := self.rfile.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.rfile.read(length)
                if raw is None:
                    outer.done.wait(WAIT_S)
                else:
                    self.wfile.write(raw)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.server.shutdown()
        self.server.server_close()


TEXT_200 = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"


@pytest.mark.parametrize("raw, stream, status, reason", [
    (TEXT_200, True, 502, "answered a streaming request with text/plain, not an event stream"),
    (TEXT_200, False, 502, "answered 200 with a body that is not a JSON object"),
    (b"nonsense\r\n\r\n", True, 502, "sent no valid reply"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\": 1", False, 502,
     "cut its reply (93 bytes missing)"),
    (None, True, 504, "sent no reply within the read timeout"),
    (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbusy", True, 503, "busy"),
])
def test_a_broken_reply_is_checked_where_it_enters(raw, stream, status, reason):
    with _RawBackend(raw) as backend, Spreader([backend.base_url], read_timeout=0.5) as spreader:
        got, body = request(spreader.base_url, "/v1/completions", {"model": MODEL, "prompt": [1], "stream": stream})
        assert got == status and reason in body
        assert spreader.stats()["backends"][0]["up"]       # it answered: not marked down


def test_a_garbled_stream_is_cut_for_the_client_too():
    with FakeVLLM(fault="garbled_chunk") as a, Spreader([a.base_url]) as spreader:
        resp = _open_stream(spreader.base_url, [1])
        assert resp.status == 200
        with pytest.raises((http.client.IncompleteRead, AssertionError)):
            list(_events(resp))
        assert _counts(spreader, "failed") == [1]


def test_models_health_stats_and_unknown_routes():
    with FakeVLLM() as a, FakeVLLM() as b, Spreader([a.base_url, b.base_url]) as spreader:
        status, body = request(spreader.base_url, "/v1/models")
        assert status == 200 and json.loads(body)["data"][0]["id"] == MODEL
        status, body = request(spreader.base_url, "/health")
        assert status == 200 and json.loads(body)["healthy"]
        status, body = request(spreader.base_url, "/spreader/stats")
        stats = json.loads(body)
        assert status == 200 and stats["policy"] == "least-loaded" and [x["url"] for x in stats["backends"]] == \
            [a.base_url, b.base_url]
        assert request(spreader.base_url, "/metrics")[0] == 404
        status, body = request(spreader.base_url, "/start_profile", {})
        assert status == 404 and "it spreads /v1/completions" in body


def test_every_backend_down_gives_a_502_naming_each():
    dead = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    with Spreader(dead) as spreader:
        for _ in range(2):
            status, _ = request(spreader.base_url, "/v1/completions", {"model": MODEL, "prompt": [1]})
            assert status == 502
        status, body = request(spreader.base_url, "/v1/completions", {"model": MODEL, "prompt": [1]})
        assert status == 502 and "every backend is down" in body and all(url in body for url in dead)
        assert request(spreader.base_url, "/v1/models")[0] == 502


@pytest.mark.parametrize("backends, policy, message", [
    (["ftp://127.0.0.1:1"], "round-robin", "expected a base URL"),
    (["http://127.0.0.1"], "round-robin", "expected a base URL"),
    (["http://127.0.0.1:1/v1"], "round-robin", "no path"),
    (["http://127.0.0.1:1", "http://127.0.0.1:1/"], "round-robin", "listed twice"),
    ([], "round-robin", "at least one"),
    (["http://127.0.0.1:1"], "random", "expected one of round-robin, least-loaded"),
])
def test_bad_backends_and_policies_are_refused(backends, policy, message):
    with pytest.raises(LabError, match=message):
        Spreader(backends, policy)


# --- the command -------------------------------------------------------------------------------------

def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.mark.parametrize("argv, message", [
    (["--backends", " , "], "expected comma-separated base URLs"),
    (["--backends", "localhost:8001"], "expected a base URL"),
    (["--backends", "http://127.0.0.1:1,http://127.0.0.1:1"], "listed twice"),
])
def test_the_command_refuses_bad_backends_in_one_line_with_status_2(argv, message, capsys):
    from lab.__main__ import main
    assert main(["vllm-spread", *argv]) == 2
    assert message in _one_error_line(capsys)


@pytest.mark.parametrize("argv, message", [
    (["--backends", "http://127.0.0.1:1", "--policy", "random"], "invalid choice: 'random'"),
    (["--backends", "http://127.0.0.1:1", "--port", "70000"], "expected a port from 0 to 65535"),
    (["--policy", "round-robin"], "the following arguments are required: --backends"),
])
def test_the_command_refuses_bad_options_in_one_line_with_status_2(argv, message, capsys):
    from lab.__main__ import main
    with pytest.raises(SystemExit) as exit_:
        main(["vllm-spread", *argv])
    assert exit_.value.code == 2 and message in _one_error_line(capsys)


def test_the_command_refuses_a_port_in_use(capsys):
    from lab.__main__ import main
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["vllm-spread", "--backends", "http://127.0.0.1:1", "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in _one_error_line(capsys)


def test_the_command_serves_until_sigterm_and_says_how_many_went_where(capsys):
    from lab.__main__ import main
    with pytest.raises(SystemExit):
        main(["vllm-spread", "--help"])
    assert "--policy" in capsys.readouterr().out
    with FakeVLLM() as a, FakeVLLM() as b:
        proc = subprocess.Popen([sys.executable, "-m", "lab", "vllm-spread", "--backends", f"{a.base_url},{b.base_url}",
                                 "--policy", "round-robin", "--port", "0"], cwd=REPO_ROOT, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
        try:
            lines = [proc.stderr.readline() for _ in range(3)]   # two backends up, then where it listens
            assert lines[0].strip().endswith(": up") and lines[2].startswith("spreading over 2 backends (round-robin)")
            url = lines[2].split(" at ")[1].split(";")[0]
            for i in range(3):
                stream_completion(url, MODEL, [i], 2)
        finally:
            proc.send_signal(signal.SIGTERM)
            rest = proc.communicate(timeout=WAIT_S)[1]
    assert proc.returncode == 0
    assert f"requests per backend: {a.base_url} 2, {b.base_url} 1" in rest
