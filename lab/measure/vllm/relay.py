"""One request through the spreader (:mod:`lab.measure.vllm.spreader`): to a backend, and its reply back, checked.

A streamed reply (``text/event-stream``) goes on as it arrives: each read from the backend (whatever
has come, never waiting for more) is written to the client at once, Nagle's algorithm off on both
sockets, so the time between tokens a client measures through the spreader is the server's. Any
other reply (an error status, a non-streamed completion) is complete when vLLM sends it: it is read
whole, checked, and passed on with its status and headers.

Checks where a reply enters: a backend that refuses the connection gets marked down (the spreader
sends later requests to the others) and the request a 502 naming it; no valid status line, a reply
cut short, a streaming request's 200 that is not an event stream, or a non-streamed 200 that is
not a JSON object: a 502 with the reason; a backend silent past the read timeout: a 504. A stream
cut after its first bytes can no longer change its status: the client's connection is closed
without the last chunk, as a dying vLLM leaves it. Errors are in vLLM's shape
(``{"error": {"message", "type", "code"}}``), so a client reads them as it reads vLLM's.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from http.server import BaseHTTPRequestHandler

SPREAD_PATHS = ("/v1/completions", "/v1/chat/completions")
#: The largest request or non-streamed reply body passed on (a 128k-token prompt as text is ~1 MB).
MAX_BODY_BYTES = 64 << 20
#: The most one read from a backend's stream takes: whatever has arrived, never waiting for more.
READ_SIZE = 1 << 16
#: Headers not passed on from a backend's reply: hop-by-hop ones (RFC 9110, 7.6.1) and those written here.
_NOT_PASSED = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
               "content-length", "server", "date"}
#: Request headers passed on to a backend (Content-Length is set from the body).
_PASSED_ON = ("content-type", "accept", "authorization", "user-agent")


class BadGateway(Exception):
    """A backend gave no usable reply; ``status`` is what the client gets (502, or 504 for a timeout);
    ``down``: the backend cannot be reached at all."""

    def __init__(self, reason: str, status: int = 502, down: bool = False):
        super().__init__(reason)
        self.reason, self.status, self.down = reason, status, down


def os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def send(backend, method: str, path: str, body: bytes | None = None, headers: dict | None = None, *,
         connect_timeout: float, timeout: float) -> http.client.HTTPConnection:
    """Connect to ``backend`` (url, host, port) and send one request; BadGateway (down) if it cannot be reached."""
    conn = http.client.HTTPConnection(backend.host, backend.port, timeout=connect_timeout)
    try:
        conn.connect()
    except OSError as exc:
        conn.close()
        raise BadGateway(f"backend {backend.url} cannot be reached ({os_reason(exc)})", down=True) from None
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sock.settimeout(timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
    except OSError as exc:
        conn.close()
        raise BadGateway(f"backend {backend.url} dropped the request ({os_reason(exc)})") from None
    return conn


def reply(backend, conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
    """The backend's status line and headers, checked as they enter (BadGateway when there are none)."""
    try:
        return conn.getresponse()
    except TimeoutError:
        raise BadGateway(f"backend {backend.url} sent no reply within the read timeout", status=504) from None
    except (OSError, http.client.HTTPException) as exc:
        raise BadGateway(f"backend {backend.url} sent no valid reply ({os_reason(exc)})") from None


def get(backend, path: str, *, connect_timeout: float, timeout: float) -> tuple[int, bytes]:
    """One short GET to ``backend``: (status, body); BadGateway when there is no whole reply."""
    conn = send(backend, "GET", path, connect_timeout=connect_timeout, timeout=timeout)
    try:
        resp = reply(backend, conn)
        data = resp.read(MAX_BODY_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise BadGateway(f"backend {backend.url} cut its reply to GET {path} ({os_reason(exc)})") from None
    finally:
        conn.close()
    return resp.status, data


class RelayHandler(BaseHTTPRequestHandler):
    """The spreader's request handler; a subclass sets ``spreader`` (pick, release, finish, mark, stats,
    check_health, backends, connect_timeout, read_timeout)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # a token's few bytes go out at once, not after the previous one's ACK
    spreader = None
    _holding = None                  # the backend whose request this handler has in flight

    def log_message(self, *args) -> None:  # what went where is in the stats, not on the console
        pass

    # --- routes ----------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/spreader/stats":
            self._send_json(200, self.spreader.stats())
        elif path == "/health":
            ok, states = self.spreader.check_health()
            self._send_json(200 if ok else 503, {"healthy": ok, "backends": states})
        elif path == "/v1/models":
            self._models()
        else:
            self._error(404, f"spreader: no route GET {path} (it serves /v1/models, /health, /spreader/stats)")

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path not in SPREAD_PATHS:
            self._error(404, f"spreader: no route POST {path} (it spreads {', '.join(SPREAD_PATHS)})")
            return
        body = self._read_body()
        if body is None:
            return
        backend = self.spreader.pick()
        if backend is None:
            reasons = "; ".join(f"{b.url}: {b.down_reason}" for b in self.spreader.backends)
            self._error(502, f"spreader: every backend is down ({reasons})")
            return
        outcome, reason, self._holding = "failed", None, backend
        try:
            outcome, reason = self._relay(backend, body, streaming=_asks_stream(body))
        finally:
            self._let_go()
            self.spreader.finish(backend, outcome, reason)

    def _let_go(self) -> None:
        """The request is no longer in flight (before the last bytes of its reply are written)."""
        if self._holding is not None:
            self.spreader.release(self._holding)
            self._holding = None

    # --- one request -----------------------------------------------------------------------------------
    def _read_body(self) -> bytes | None:
        """The request's body (None after an error reply: no length, too long, or the client left)."""
        text = self.headers.get("Content-Length", "0").strip()
        length = int(text) if text.isdigit() else -1
        refusal = ((411, "send the body with a Content-Length") if "chunked" in self.headers.get("Transfer-Encoding", "")
                   else (400, f"Content-Length {text!r} is not a length") if length < 0
                   else (413, f"a body of {length} bytes is over {MAX_BODY_BYTES}") if length > MAX_BODY_BYTES else None)
        if refusal:
            self._error(refusal[0], f"spreader: {refusal[1]}")
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def _relay(self, backend, body: bytes, streaming: bool) -> tuple[str, str | None]:
        """Send the request to ``backend`` and pass its reply on; returns (outcome, reason) for the counts."""
        headers = {k: v for k, v in self.headers.items() if k.lower() in _PASSED_ON}
        conn = None
        try:
            conn = send(backend, "POST", self.path, body, headers, connect_timeout=self.spreader.connect_timeout,
                        timeout=self.spreader.read_timeout)
            resp = reply(backend, conn)
            if resp.status == 200 and _is_event_stream(resp):
                return self._stream(backend, resp)
            if resp.status == 200 and streaming:
                raise BadGateway(f"backend {backend.url} answered a streaming request with "
                                 f"{resp.getheader('Content-Type') or 'no content type'}, not an event stream")
            return self._pass_whole(backend, resp, check_json=resp.status == 200)
        except BadGateway as exc:
            if exc.down:
                self.spreader.mark(backend, False, exc.reason)
            self._error(exc.status, f"spreader: {exc.reason}")
            return "failed", exc.reason
        except OSError as exc:   # the client went away while a whole reply was written to it
            self.close_connection = True
            return "client_gone", f"client gone ({os_reason(exc)})"
        finally:
            if conn is not None:
                conn.close()    # after a client gone mid-stream, this cancels the request in vLLM

    def _stream(self, backend, resp: http.client.HTTPResponse) -> tuple[str, str | None]:
        """Pass an event stream on as it arrives: each read from the backend is one chunk to the client."""
        self._start_reply(resp)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            try:
                data = resp.read1(READ_SIZE)
            except (OSError, ValueError, http.client.HTTPException) as exc:
                data, cut = b"", f"backend {backend.url} cut its stream ({os_reason(exc)})"
            else:
                cut = f"backend {backend.url} closed its stream early" if not data and resp.length else None
            if cut:
                self.close_connection = True   # no last chunk: the client sees the stream cut, as it was
                return "failed", cut
            if not data:
                self._let_go()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if data else b"0\r\n\r\n")
            except OSError as exc:
                self.close_connection = True
                return "client_gone", f"client gone ({os_reason(exc)})"
            if not data:
                return "completed", None

    def _pass_whole(self, backend, resp: http.client.HTTPResponse, check_json: bool) -> tuple[str, str | None]:
        """Read a whole reply (an error status, a non-streamed completion), check it, pass it on."""
        try:
            data = resp.read(MAX_BODY_BYTES + 1)
        except TimeoutError:
            raise BadGateway(f"backend {backend.url} stopped sending for {self.spreader.read_timeout:g} s",
                             status=504) from None
        except (OSError, http.client.HTTPException) as exc:
            raise BadGateway(f"backend {backend.url} cut its reply ({os_reason(exc)})") from None
        if resp.length:   # fewer bytes than its Content-Length said
            raise BadGateway(f"backend {backend.url} cut its reply ({resp.length} bytes missing)")
        if len(data) > MAX_BODY_BYTES:
            raise BadGateway(f"backend {backend.url} sent a reply over {MAX_BODY_BYTES} bytes")
        if check_json and not _is_json_object(data):
            raise BadGateway(f"backend {backend.url} answered 200 with a body that is not a JSON object")
        self._start_reply(resp)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._let_go()
        self.wfile.write(data)
        return ("completed", None) if resp.status < 400 else ("http_errors", f"HTTP {resp.status}")

    def _models(self) -> None:
        """The model list of the first backend up that answers with one."""
        reasons = []
        for backend in [b for b in self.spreader.backends if b.up]:
            try:
                status, data = get(backend, "/v1/models", connect_timeout=self.spreader.connect_timeout,
                                   timeout=min(self.spreader.read_timeout, 30.0))
            except BadGateway as exc:
                reasons.append(exc.reason)
                continue
            if status == 200 and _is_json_object(data) and isinstance(json.loads(data).get("data"), list):
                self._send_json(200, data)
                return
            reasons.append(f"{backend.url}/v1/models answered {status} without a model list")
        self._error(502, "spreader: no backend listed its models (" + ("; ".join(reasons) or "every backend is down") + ")")

    # --- writing replies -------------------------------------------------------------------------------
    def _start_reply(self, resp: http.client.HTTPResponse) -> None:
        self.send_response(resp.status, resp.reason)
        for name, value in resp.getheaders():
            if name.lower() not in _NOT_PASSED:
                self.send_header(name, value)

    def _send_json(self, status: int, obj) -> None:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._let_go()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        kind = {502: "BadGateway", 504: "GatewayTimeout"}.get(status, "SpreaderError")
        try:
            self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})
        except OSError:
            self.close_connection = True


def _asks_stream(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return False    # the backend will refuse it; its error is passed on
    return isinstance(request, dict) and request.get("stream") is True


def _is_event_stream(resp: http.client.HTTPResponse) -> bool:
    return (resp.getheader("Content-Type") or "").split(";")[0].strip().lower() == "text/event-stream"


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return False
