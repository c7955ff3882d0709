"""Spread OpenAI-API requests over several vLLM servers: a small HTTP proxy for the two-replica study.

Two one-GPU servers of one model need one address in front and a pick of a copy per request. A
threaded ``http.server`` (the standard library only) does it::

    python -m lab vllm-spread --backends http://127.0.0.1:8001,http://127.0.0.1:8002 --policy least-loaded --port 8000

or in-process (:mod:`lab.measure.vllm.replicas`): ``with Spreader([url1, url2], "least-loaded") as s:``
send requests to ``s.base_url``; ``s.stats()`` (or GET ``/spreader/stats``) says how many went where.

Policies: ``round-robin`` (the next backend in turn) and ``least-loaded`` (the fewest requests in
flight through the spreader; ties in round-robin order). Routes: POST ``/v1/completions`` and
``/v1/chat/completions`` (spread); GET ``/v1/models`` (from the first backend up), ``/health`` (200
only when every backend answers 200, since N-1 replicas are not N; it marks each up or down again)
and ``/spreader/stats``. How a reply passes through, and what is checked where it enters (a backend
that refuses the connection is marked down and skipped; the request gets a 502 naming it):
:mod:`lab.measure.vllm.relay`.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass
from http.server import ThreadingHTTPServer

from lab import LabError
from lab.cli import positive_number
from lab.measure.vllm.relay import BadGateway, RelayHandler, get, os_reason

POLICIES = ("round-robin", "least-loaded")
#: What a finished request counts as (one counter each in :class:`Backend`).
OUTCOMES = ("completed", "http_errors", "failed", "client_gone")


def parse_backend_url(text: str) -> tuple[str, str, int]:
    """``http://host:port`` -> (the URL without a trailing slash, host, port); LabError for anything else."""
    url = text.strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    port = parts.netloc.rpartition(":")[2]
    if parts.scheme != "http" or not parts.hostname or not port.isdigit() or not 0 < int(port) < 65536 \
            or parts.path or parts.query:
        raise LabError(f"backend {text!r}: expected a base URL such as http://127.0.0.1:8001 "
                       "(http, a host and a port, no path)")
    return url, parts.hostname, int(port)


@dataclass
class Backend:
    """One vLLM server behind the spreader and what went to it."""

    url: str
    host: str
    port: int
    up: bool = True
    down_reason: str | None = None
    in_flight: int = 0
    requests: int = 0      # sent to it
    completed: int = 0     # a success status, passed on whole
    http_errors: int = 0   # it answered an error status (passed on as it was)
    failed: int = 0        # no usable reply: a 502 or 504 from the spreader, or a stream cut short
    client_gone: int = 0   # the client hung up before the reply was passed on
    last_error: str | None = None


class Spreader:
    """The proxy: pick a backend per request, pass its reply on, count what went where (see the module docstring)."""

    def __init__(self, backends: list[str], policy: str = "least-loaded", *, host: str = "127.0.0.1", port: int = 0,
                 connect_timeout: float = 10.0, read_timeout: float = 600.0):
        if policy not in POLICIES:
            raise LabError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
        if not backends:
            raise LabError("no backend: give at least one base URL")
        self.backends = [Backend(*parse_backend_url(url)) for url in backends]
        urls = [b.url for b in self.backends]
        twice = sorted({u for u in urls if urls.count(u) > 1})
        if twice:
            raise LabError(f"backend {twice[0]} is listed twice; give every backend once")
        self.policy, self.host, self.port = policy, host, port
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.base_url: str | None = None
        self.started_at: float | None = None
        self._changed = threading.Condition()   # guards the counts; notified when a request ends
        self._next = 0                          # where the round-robin order starts
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- choosing a backend and counting ------------------------------------------------------------
    def pick(self) -> Backend | None:
        """The backend for the next request (None when every one is down); counts it as in flight."""
        with self._changed:
            count = len(self.backends)
            order = [self.backends[(self._next + i) % count] for i in range(count)]
            candidates = [b for b in order if b.up]
            if not candidates:
                return None
            # min() keeps the first of equals: ties go in round-robin order
            chosen = candidates[0] if self.policy == "round-robin" else min(candidates, key=lambda b: b.in_flight)
            self._next = (self.backends.index(chosen) + 1) % count
            chosen.in_flight += 1
            chosen.requests += 1
            return chosen

    def release(self, backend: Backend) -> None:
        """``backend`` no longer has the request in flight: called just before its reply's last bytes go to the
        client, so a client that sends its next request on seeing them finds the count already down."""
        with self._changed:
            backend.in_flight -= 1

    def finish(self, backend: Backend, outcome: str, reason: str | None = None) -> None:
        """Count how the request ended; ``outcome`` is one of :data:`OUTCOMES`."""
        assert outcome in OUTCOMES, outcome
        with self._changed:
            setattr(backend, outcome, getattr(backend, outcome) + 1)
            if reason:
                backend.last_error = reason
            self._changed.notify_all()

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until every request sent has been counted as ended; False if some have not after ``timeout`` s."""
        def counted() -> bool:
            return all(b.requests == sum(getattr(b, o) for o in OUTCOMES) for b in self.backends)

        with self._changed:
            return self._changed.wait_for(counted, timeout)

    def mark(self, backend: Backend, up: bool, reason: str | None = None) -> None:
        with self._changed:
            backend.up, backend.down_reason = up, None if up else reason

    def stats(self) -> dict:
        """How many requests went where, and how each ended."""
        with self._changed:
            backends = [asdict(b) for b in self.backends]
        return {"policy": self.policy, "base_url": self.base_url, "requests": sum(b["requests"] for b in backends),
                "in_flight": sum(b["in_flight"] for b in backends), "backends": backends,
                "uptime_s": None if self.started_at is None else round(time.monotonic() - self.started_at, 1)}

    def probe_health(self) -> list[dict]:
        """Ask every backend's /health now: one {url, up, reason} each (up: it answered 200)."""
        states = []
        for backend in self.backends:
            try:
                status, _ = get(backend, "/health", connect_timeout=self.connect_timeout,
                                timeout=min(self.read_timeout, 5.0))
                up, reason = status == 200, None if status == 200 else f"/health answered {status}"
            except BadGateway as exc:
                up, reason = False, exc.reason
            states.append({"url": backend.url, "up": up, "reason": reason})
        return states

    def check_health(self) -> tuple[bool, list[dict]]:
        """:meth:`probe_health`, and every backend marked up or down by it; True when all are up."""
        states = self.probe_health()
        for backend, state in zip(self.backends, states, strict=True):
            self.mark(backend, state["up"], state["reason"])
        return all(s["up"] for s in states), states

    # --- lifecycle ---------------------------------------------------------------------------------
    def bind(self) -> None:
        handler = type("Handler", (RelayHandler,), {"spreader": self})
        try:
            self._httpd = _HTTPServer((self.host, self.port), handler)
        except OSError as exc:
            raise LabError(f"cannot listen on {self.host}:{self.port} ({os_reason(exc)}); choose another --port") from None
        self.port = self._httpd.server_address[1]
        self.base_url = f"http://{self.host}:{self.port}"
        self.started_at = time.monotonic()

    def start(self) -> Spreader:
        """Listen and serve from a thread of this process."""
        self.bind()
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="spreader", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Listen (unless :meth:`bind` did) and serve in this thread until Ctrl-C or SIGTERM (the command)."""
        if self._httpd is None:
            self.bind()
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()
            self._httpd = None

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            if self._thread is not None:
                httpd.shutdown()
                self._thread.join()
            httpd.server_close()

    def __enter__(self) -> Spreader:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # the capacity point opens hundreds of connections at once; the default backlog of 5 would drop some
    # of their first packets and add a second's retransmission to their TTFT
    request_queue_size = 1024


# --- the command -----------------------------------------------------------------------------------

def port_number(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    value = int(text) if text.strip().isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def add_arguments(parser) -> None:
    parser.add_argument("--backends", required=True,
                        help="comma-separated base URLs of the vLLM servers, e.g. http://127.0.0.1:8001,http://127.0.0.1:8002")
    parser.add_argument("--policy", choices=POLICIES, default="least-loaded",
                        help="round-robin, or least-loaded: fewest requests in flight, ties in turn (default)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (default 8000; 0: any free one)")
    parser.add_argument("--connect-timeout", type=positive_number, default=10.0,
                        help="seconds to connect to a backend before it counts as down (default 10)")
    parser.add_argument("--read-timeout", type=positive_number, default=600.0,
                        help="seconds a backend may stay silent before the request gets a 504 (default 600)")


def main(args) -> int:
    urls = [u for u in args.backends.split(",") if u.strip()]
    if not urls:
        raise LabError(f"--backends {args.backends!r}: expected comma-separated base URLs such as http://127.0.0.1:8001")
    spreader = Spreader(urls, args.policy, host=args.host, port=args.port, connect_timeout=args.connect_timeout,
                        read_timeout=args.read_timeout)
    spreader.bind()   # a port in use is refused before anything else is said
    for state in spreader.probe_health():   # one not up yet is tried anyway: it may be starting
        print(f"  {state['url']}: {'up' if state['up'] else 'not up yet: ' + state['reason']}", file=sys.stderr, flush=True)
    print(f"spreading over {len(urls)} backends ({args.policy}) at {spreader.base_url}; "
          f"what went where: {spreader.base_url}/spreader/stats", file=sys.stderr, flush=True)
    try:
        spreader.serve_forever()
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM: how a server ends
        pass
    backends = spreader.stats()["backends"]
    print("stopped; requests per backend: " + ", ".join(f"{b['url']} {b['requests']}" for b in backends),
          file=sys.stderr)
    return 0
