"""A stand-in for ``vllm serve`` that needs no GPU: the streaming completions protocol, /health and real log lines.

Two uses:
- in-process: ``FakeVLLM(...)`` serves on a free port from a thread (probe tests);
- as an executable: ``python tests/fake_vllm.py serve MODEL --port P ...`` behaves like the vLLM CLI
  for the lifecycle tests. ``FAKE_VLLM_MODE`` picks the behaviour: ok, never (never ready), die
  (exits with a traceback in its log), stubborn (ignores SIGTERM), wrong_backend, die_midstream.
  ``FAKE_VLLM_FAULT`` injects one of :data:`FAULTS` into replies (at the prompt lengths listed in
  ``FAKE_VLLM_FAULT_LENGTHS``, default every length) while the server itself stays healthy.
  ``FAKE_VLLM_START_S`` spreads its start over that many seconds, logging vLLM's start phases on the way.
  ``FAKE_VLLM_CHILD_PID_FILE`` makes it start a child process (like vLLM's engine process) and
  write the child's pid there.

The SSE events copy vLLM's shape: ``data: {...}`` lines with ``choices[0].token_ids`` (when the
request asks ``return_token_ids``), the prompt ids in the first event, a final usage event with no
choices, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Faults a reply can carry (``fault=``): an error status, a stream cut or stalled, malformed events, wrong types.
FAULTS = {
    "http500": "answers 500 with a JSON error",
    "http500_text": "answers 500 with a plain-text body",
    "drop": "streams two tokens, then closes the connection without [DONE] (the server stays up)",
    "silent": "sends the headers, then nothing until the client gives up",
    "malformed_sse": "a data: line that is not JSON",
    "event_not_object": "a data: line that is JSON but not an object (42)",
    "garbled_chunk": "a chunk of the chunked body whose size is not hexadecimal",
    "prompt_tokens_zero": "usage.prompt_tokens is 0",
    "prompt_tokens_text": "usage.prompt_tokens is a string",
    "completion_tokens_negative": "usage.completion_tokens is -1",
    "usage_not_object": "usage is a list",
    "choices_not_list": "choices is a string",
    "choice_not_object": "choices holds a number",
    "token_ids_text": "token_ids is a string",
    "finish_reason_number": "finish_reason is a number",
    "no_tokens": "the stream ends without one generated token",
}


class FakeVLLM:
    """A threaded HTTP server speaking the part of vLLM's OpenAI API the probe uses."""

    def __init__(self, *, model="fake-model", prefill_s_per_token=2e-6, decode_s=0.002, tokens_per_chunk=1,
                 die_after_tokens=None, die_from_request=1, fail_lengths=(), oom_lengths=(), never_ready=False, on_death=None,
                 max_running=None, fault=None, fault_lengths=None, before_token=None, host="127.0.0.1", port=0):
        assert fault is None or fault in FAULTS, fault
        self.fault = fault                    # one of FAULTS, injected into replies...
        self.fault_lengths = None if fault_lengths is None else set(fault_lengths)  # ...at these prompt lengths (all)
        self.released = threading.Event()     # ends a "silent" reply (set when the server shuts down)
        self.model = model
        self.prefill_s_per_token = prefill_s_per_token
        self.decode_s = decode_s
        self.tokens_per_chunk = tokens_per_chunk
        self.before_token = before_token      # called with the tokens sent so far before each chunk (a test's gate)
        self.die_after_tokens = die_after_tokens
        self.die_from_request = die_from_request  # the first request (1-based) that dies mid-stream
        self.fail_lengths = set(fail_lengths)
        self.oom_lengths = set(oom_lengths)
        self.never_ready = never_ready
        self.on_death = on_death
        self.dead = False
        self.requests: list[dict] = []
        # like vLLM's KV-cache limit: at most max_running requests generate, the rest wait for a slot
        # (a finished or disconnected request frees one); /metrics reports both counts
        self.slots = threading.Semaphore(max_running) if max_running else None
        self.running = self.waiting = 0
        self.counts_lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                if self.path == "/metrics":
                    text = (f"vllm:num_requests_running{{engine=\"0\"}} {fake.running}.0\n"
                            f"vllm:num_requests_waiting{{engine=\"0\"}} {fake.waiting}.0\n").encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(text)))
                    self.end_headers()
                    return self.wfile.write(text)
                if self.path == "/v1/models":
                    return self._json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
                if self.path != "/health":
                    return self._json(404, {"error": {"message": "not found"}})
                if fake.never_ready or fake.dead:
                    return self._json(503, {"error": {"message": "not ready"}})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path in ("/start_profile", "/stop_profile"):
                    return self._json(200, {})
                if self.path != "/v1/completions":
                    return self._json(404, {"error": {"message": "not found"}})
                fake.requests.append(body)
                prompt = body.get("prompt")
                if isinstance(prompt, str) and all(w.isdigit() for w in prompt.split()):
                    prompt = [int(w) for w in prompt.split()]   # text of the synthetic vocabulary: id i is "i"
                if body.get("model") != fake.model:
                    return self._json(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                if not isinstance(prompt, list) or not all(isinstance(t, int) for t in prompt):
                    return self._json(400, {"error": {"message": "prompt must be a list of token ids or their text"}})
                fault = fake.fault_at(len(prompt))
                if fault in ("http500", "http500_text"):
                    return self._fault_status(fault)
                if len(prompt) in fake.fail_lengths:
                    return self._json(400, {"error": {"message": f"This model's maximum context length is 8 tokens. "
                                                      f"However, you requested {len(prompt)} tokens.",
                                                      "type": "BadRequestError", "code": 400}})
                fake._count(waiting=1)
                if fake.slots is not None:
                    fake.slots.acquire()
                fake._count(waiting=-1, running=1)
                try:
                    if fault is not None:
                        self._fault_stream(fault, body, prompt)
                    else:
                        self._stream(body, prompt)
                except OSError:
                    pass  # the client went away: a cancelled request
                finally:
                    fake._count(running=-1)
                    if fake.slots is not None:
                        fake.slots.release()

            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _fault_status(self, fault):
                if fault == "http500":
                    return self._json(500, {"error": {"message": "Internal Server Error: injected\nsecond line",
                                                      "type": "InternalServerError", "code": 500}})
                data = b"Internal Server Error\n<html>injected</html>"
                self.send_response(500)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _fault_stream(self, fault, body, prompt):
                """A 200 stream carrying ``fault``: good tokens first where the fault comes later in a real reply."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if fault == "silent":   # until the client hangs up (or the server shuts down)
                    while not fake.released.wait(0.05):
                        readable, _, _ = select.select([self.connection], [], [], 0)
                        if readable and not self.connection.recv(1, socket.MSG_PEEK):
                            return
                    return
                good = {"index": 0, "text": "", "logprobs": None, "finish_reason": None, "token_ids": [7]}
                usage = {"prompt_tokens": len(prompt), "completion_tokens": 2, "total_tokens": len(prompt) + 2}
                bad_event = {
                    "prompt_tokens_zero": {"choices": [], "usage": {**usage, "prompt_tokens": 0}},
                    "prompt_tokens_text": {"choices": [], "usage": {**usage, "prompt_tokens": "many"}},
                    "completion_tokens_negative": {"choices": [], "usage": {**usage, "completion_tokens": -1}},
                    "usage_not_object": {"choices": [], "usage": [1, 2]},
                    "choices_not_list": {"choices": "abc"},
                    "choice_not_object": {"choices": [1]},
                    "token_ids_text": {"choices": [{**good, "token_ids": "abc"}]},
                    "finish_reason_number": {"choices": [{**good, "finish_reason": 5}]},
                }.get(fault)
                if fault != "no_tokens":
                    for _ in range(2):
                        self._event({"id": "cmpl-1", "object": "text_completion", "model": fake.model, "choices": [good]})
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if fault == "garbled_chunk":
                    self.wfile.write(b"zz\r\ndata: {}\r\n")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if fault in ("malformed_sse", "event_not_object"):
                    self._chunk('data: {"choices": [{"token_ids": [7\n\n' if fault == "malformed_sse" else "data: 42\n\n")
                elif bad_event is not None:
                    self._event({"id": "cmpl-1", "object": "text_completion", "model": fake.model, **bad_event})
                elif fault == "no_tokens":
                    self._event({"id": "cmpl-1", "object": "text_completion", "model": fake.model, "choices": [],
                                 "usage": usage})
                self._chunk("data: [DONE]\n\n")
                self._chunk("")

            def _chunk(self, text: str):
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _event(self, obj):
                self._chunk(f"data: {json.dumps(obj)}\n\n")

            def _whole(self, body, prompt):
                """A non-streamed reply ("stream": false): every token at once, as one JSON object."""
                n = int(body.get("max_tokens", 16))
                time.sleep(fake.prefill_s_per_token * len(prompt) + fake.decode_s * (n - 1))
                self._json(200, {"id": "cmpl-1", "object": "text_completion", "model": fake.model,
                                 "choices": [{"index": 0, "text": "", "token_ids": [7] * n, "finish_reason": "length"}],
                                 "usage": {"prompt_tokens": len(prompt), "completion_tokens": n,
                                           "total_tokens": len(prompt) + n}})

            def _stream(self, body, prompt):
                if body.get("stream") is False:
                    return self._whole(body, prompt)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                with_ids = bool(body.get("return_token_ids"))
                if len(prompt) in fake.oom_lengths:
                    self._event({"error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB", "code": 500}})
                    self._chunk("data: [DONE]\n\n")
                    self._chunk("")
                    return
                time.sleep(fake.prefill_s_per_token * len(prompt))
                max_tokens = int(body.get("max_tokens", 16))
                sent = 0
                while sent < max_tokens:
                    count = min(fake.tokens_per_chunk, max_tokens - sent)
                    if (fake.die_after_tokens is not None and len(fake.requests) >= fake.die_from_request
                            and sent >= fake.die_after_tokens):
                        fake.dead = True
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        if fake.on_death:
                            fake.on_death()
                        return
                    if fake.before_token is not None:
                        fake.before_token(sent)
                    if sent:
                        time.sleep(fake.decode_s * count)
                    choice = {"index": 0, "text": " 7" * count, "logprobs": None,
                              "finish_reason": "length" if sent + count == max_tokens else None, "stop_reason": None}
                    if with_ids:
                        choice["token_ids"] = [7] * count
                        if sent == 0:
                            choice["prompt_token_ids"] = prompt
                    self._event({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": fake.model,
                                 "choices": [choice]})
                    sent += count
                if (body.get("stream_options") or {}).get("include_usage"):
                    self._event({"id": "cmpl-1", "object": "text_completion", "created": 0, "model": fake.model,
                                 "choices": [], "usage": {"prompt_tokens": len(prompt), "completion_tokens": sent,
                                                          "total_tokens": len(prompt) + sent}})
                self._chunk("data: [DONE]\n\n")
                self._chunk("")  # end of the chunked body

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def fault_at(self, length: int) -> str | None:
        """The fault a reply to a prompt of ``length`` tokens carries, or None."""
        if self.fault is None or (self.fault_lengths is not None and length not in self.fault_lengths):
            return None
        return self.fault

    def _count(self, running=0, waiting=0):
        with self.counts_lock:
            self.running += running
            self.waiting += waiting

    # the probe's Endpoint protocol
    @property
    def model_name(self) -> str:
        return self.model

    def alive(self) -> bool:
        return not self.dead

    def died_message(self, when: str) -> str:
        return f"fake server died {when}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


# --- the executable: `python fake_vllm.py serve MODEL --port P ...` ---------------------------------

def _arg(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def _log(process: str, text: str) -> None:
    print(f"({process} pid={os.getpid()}) INFO 11-30 05:01:50 [fake.py:1] {text}", flush=True)


def main(argv: list[str]) -> int:
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    assert argv[0] == "serve", argv
    model, port = argv[1], int(_arg(argv, "--port", 8000))
    backend = _arg(argv, "--attention-backend") or os.environ.get("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    modern = "--attention-backend" in argv
    fa = _arg(argv, "--attention-config.flash_attn_version") or os.environ.get("VLLM_FLASH_ATTN_VERSION") or "3"
    chunk = int(_arg(argv, "--max-num-batched-tokens", 8192))
    pid_file = os.environ.get("FAKE_VLLM_CHILD_PID_FILE")
    if pid_file:  # an "engine" process in the same process group, as vLLM has
        child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
        with open(pid_file, "w") as fh:
            fh.write(str(child.pid))
    _log("APIServer", "vLLM API server version 0.26.0")
    _log("APIServer", f"Using max model len {_arg(argv, '--max-model-len', 32768)}")
    _log("APIServer", f"Chunked prefill is enabled with max_num_batched_tokens={chunk:,}.")
    kv_dtype = "fp8" if mode == "wrong_kv_dtype" else _arg(argv, "--kv-cache-dtype", "auto")
    if kv_dtype.startswith("fp8"):  # vLLM names a quantized KV cache only
        _log("APIServer", f"Using {kv_dtype} data type to store kv cache. It reduces the GPU memory footprint and "
                          "boosts the performance. Meanwhile, it may cause accuracy drop without a proper scaling factor")
    if mode == "die":
        print("(EngineCore pid=2) ERROR 11-30 05:01:55 [core.py:700] EngineCore failed to start.", flush=True)
        print("Traceback (most recent call last):\n  File \"core.py\", line 1, in <module>", flush=True)
        print("ValueError: Free memory on device (10.0/139.8 GiB) on startup is less than desired GPU memory "
              "utilization (0.85, 118.8 GiB).", flush=True)
        print("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
              flush=True)
        return 1
    shown = "FLEX_ATTENTION" if mode == "wrong_backend" else backend
    if modern:
        _log("EngineCore", f"Using AttentionBackendEnum.{shown} backend.")
    else:
        old = {"FLASH_ATTN": "Flash Attention", "FLEX_ATTENTION": "FlexAttention", "TRITON_ATTN": "Triton"}
        _log("EngineCore_DP0", f"Using {old.get(shown, shown)} backend on V1 engine.")
    if shown == "FLASH_ATTN":
        _log("EngineCore", f"Using FlashAttention version {fa}")
    start_s = float(os.environ.get("FAKE_VLLM_START_S", "0"))  # a slow start, phase by phase, like vLLM's
    for line in ("Loading model from scratch...", "Dynamo bytecode transform time: 5.90 s"):
        _log("EngineCore", line)
        time.sleep(start_s / 3)
    _log("EngineCore", "GPU KV cache size: 1,451,760 tokens")
    print(f"(EngineCore pid={os.getpid()}) Capturing CUDA graphs (PIECEWISE):   0%|  | 0/51", flush=True)
    time.sleep(start_s / 3)
    if mode == "never":
        while True:
            time.sleep(1)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    lengths = os.environ.get("FAKE_VLLM_FAULT_LENGTHS")
    fake = FakeVLLM(model=model, port=port, decode_s=0.001,
                    die_after_tokens=3 if mode == "die_midstream" else None, die_from_request=3,
                    on_death=lambda: os._exit(1), fault=os.environ.get("FAKE_VLLM_FAULT") or None,
                    fault_lengths=[int(n) for n in lengths.split(",")] if lengths else None)
    _log("APIServer", f"Starting vLLM API server 0 on http://127.0.0.1:{port}")
    print(f"(APIServer pid={os.getpid()}) INFO:     Application startup complete.", flush=True)
    with fake:
        while True:
            time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
