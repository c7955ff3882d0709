"""lab.measure.capture: window orchestration against a fake vLLM server, trimming, in-process capture."""

from __future__ import annotations

import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lab import LabError
from lab.measure import capture, census
from lab.measure.census.synthetic import write_synthetic
from lab.measure.vllm.server import post


class FakeVllm:
    """Answers /v1/completions (plain and streamed), /start_profile and /stop_profile like vLLM does.

    /stop_profile writes an engine trace (kernels, synthetic) and a small front-end CPU-only trace.
    Records the order of events so a test can check when profiling started and stopped.
    """

    #: A stream longer than this pauses after its first token until /start_profile arrives: profiling then
    #: starts at exactly one token, however slowly this machine runs (events, not sleeps, order the test).
    HOLD_LONGER_THAN = 8

    def __init__(self, folder: Path):
        self.folder = folder
        self.log: list[str] = []
        self.tokens_sent = 0
        self.profiling = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path == "/v1/completions":
                    fake.log.append(f"request {len(body['prompt'])} {body['max_tokens']}"
                                    f"{' stream' if body.get('stream') else ''}")
                    if body.get("stream"):
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.end_headers()
                        for i in range(body["max_tokens"]):
                            fake.tokens_sent += 1
                            chunk = {"choices": [{"token_ids": [7], "text": ""}]}
                            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                            self.wfile.flush()
                            if i == 0 and body["max_tokens"] > fake.HOLD_LONGER_THAN:
                                assert fake.profiling.wait(timeout=60), "the client never started profiling"
                        self.wfile.write(b"data: [DONE]\n\n")
                        return
                    answer = json.dumps({"choices": [{"token_ids": [7] * body["max_tokens"]}]}).encode()
                elif self.path == "/start_profile":
                    fake.log.append(f"start at token {fake.tokens_sent}")
                    fake.profiling.set()
                    answer = b"{}"
                elif self.path == "/stop_profile":
                    fake.log.append(f"stop at token {fake.tokens_sent}")
                    fake.profiling.clear()
                    stamp = time.time_ns()
                    write_synthetic(fake.folder / f"rank0.{stamp}.pt.trace.json.gz", 0.3)
                    (fake.folder / f"async_llm.{stamp}.pt.trace.json").write_text(
                        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1,
                                                     "dur": 1, "pid": 1, "tid": 1}]}))
                    answer = b"{}"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.model_name = "fake"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def post(self, path, payload=None, timeout=600.0):
        return post(self.base_url, path, payload, timeout)

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def fake(tmp_path):
    server = FakeVllm(tmp_path / "raw")
    (tmp_path / "raw").mkdir()
    yield server
    server.close()


def test_parse_windows_and_errors():
    assert capture.parse_windows("prefill:2048, decode:28672") == [capture.Window("prefill", 2048),
                                                                   capture.Window("decode", 28672)]
    assert [w.name for w in capture.parse_windows(capture.DEFAULT_WINDOWS)][-1] == "decode-naive-28672"
    for bad in ("prefill", "prefill:2k", "warmup:10", "decode:0", ""):
        with pytest.raises(LabError):
            capture.parse_windows(bad)


def test_capture_offers_every_known_arm_by_its_label(tmp_path, capsys):
    from lab.measure.vllm.arms import ARMS

    code, err = _run(["capture", "vllm", "--arm", "FA3", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.count("\n") == 1 and all(f"'{label}'" in err for label in ARMS)
    assert not (tmp_path / "o").exists()


def test_prompts_are_deterministic_and_salted():
    assert capture.prompt_ids(5) == capture.prompt_ids(5)
    assert capture.prompt_ids(5, salt=1) != capture.prompt_ids(5, salt=2)
    assert len(capture.prompt_ids(1000, salt=3)) == 1000


def test_prefill_window_is_one_max_tokens_1_request_after_a_warm_one(fake, tmp_path):
    folder = capture._TraceFolder(tmp_path / "raw")
    raw = capture.capture_window(fake, folder, capture.Window("prefill", 64))
    assert raw.name.startswith("rank0.")           # the engine trace, not the front-end one
    assert fake.log == ["request 64 1 stream", "start at token 1", "request 64 1 stream", "stop at token 2"]


def test_decode_window_starts_after_the_first_token_and_spans_the_asked_tokens(fake, tmp_path):
    folder = capture._TraceFolder(tmp_path / "raw")
    capture.capture_window(fake, folder, capture.Window("decode", 32), decode_tokens=10)
    assert fake.log[0] == "request 32 4 stream" and fake.log[1] == "request 32 74 stream"
    start = int(fake.log[2].split()[-1]) - 4        # tokens of this request when profiling started
    stop = int(fake.log[3].split()[-1]) - 4
    assert fake.log[2].startswith("start") and start == 1   # the fake holds the stream at token 1 until then
    assert fake.log[3].startswith("stop") and stop - start >= 10


def test_the_decode_window_is_ordered_by_events_even_on_a_loaded_machine(fake, tmp_path, monkeypatch):
    # a client that reads slowly (a busy machine): the window must still span the asked tokens
    real = capture.stream_chunks

    def slow(*args, **kwargs):
        for chunk in real(*args, **kwargs):
            time.sleep(0.005)
            yield chunk
    monkeypatch.setattr(capture, "stream_chunks", slow)
    folder = capture._TraceFolder(tmp_path / "raw")
    capture.capture_window(fake, folder, capture.Window("decode", 32), decode_tokens=10)
    start, stop = (int(line.split()[-1]) - 4 for line in fake.log[2:4])
    assert start == 1 and stop - start >= 10


def test_keep_trace_trims_over_the_limit_and_the_census_reproduces(fake, tmp_path):
    folder = capture._TraceFolder(tmp_path / "raw")
    raw = capture.capture_window(fake, folder, capture.Window("decode-naive", 64))
    full = census.census(raw)
    kept = capture.keep_trace(raw, tmp_path / "arm" / "decode-naive-64.trace.json.gz", max_mb=0.01)
    stored = kept["trace"]
    assert stored is not None and stored.stat().st_size < raw.stat().st_size
    saved = json.loads((tmp_path / "arm" / "decode-naive-64.census.json").read_text())
    assert saved["capture"]["trimmed"]["dropped"] > 0
    again = census.census(stored)
    for fam in census.FAMILIES:
        assert again["families"][fam]["ms"] == pytest.approx(full["families"][fam]["ms"])
        assert saved["families"][fam]["ms"] == pytest.approx(full["families"][fam]["ms"])
    assert again["steps"]["decode"] == full["steps"]["decode"]


def test_keep_trace_drops_a_trace_that_stays_too_big(tmp_path):
    raw = tmp_path / "raw.json"
    write_synthetic(raw, 0.5)
    kept = capture.keep_trace(raw, tmp_path / "out" / "prefill-1.trace.json.gz", max_mb=0.001)
    assert kept["trace"] is None and not (tmp_path / "out" / "prefill-1.trace.json.gz").exists()
    assert (tmp_path / "out" / "prefill-1.census.json").exists()


def test_census_rows_are_long_format():
    raw = {"kernel_ms": 10.0, "families": {"attention": {"ms": 4.0, "share": 0.4}, "matmul": {"ms": 5.0, "share": 0.5},
                                            "other": {"ms": 1.0, "share": 0.1}},
           "steps": {"kernel_ms_by_phase": {"prefill": 9.0, "decode": 1.0}}}
    rows = {r["metric"]: r["value"] for r in capture.census_rows(raw, "decode-naive", 28672, "FLEX_ATTENTION")}
    assert rows == {"window_ms": 10.0, "attention_ms": 4.0, "attention_share_pct": 40.0, "matmul_ms": 5.0,
                    "matmul_share_pct": 50.0, "other_ms": 1.0, "other_share_pct": 10.0,
                    "steps_prefill_ms": 9.0, "steps_decode_ms": 1.0}


def test_capture_callable_writes_a_gzipped_chrome_trace(tmp_path):
    torch = pytest.importorskip("torch")
    a = torch.ones(64, 64)
    out = capture.capture_callable(lambda: a @ a, tmp_path / "mm.json.gz")
    with gzip.open(out, "rt") as fh:
        trace = json.load(fh)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "aten::mm" in names
    if not torch.cuda.is_available():   # a CPU run has no GPU kernels: the census says so in one line
        with pytest.raises(LabError, match="no GPU kernel events"):
            census.census(out)
    with pytest.raises(LabError, match="json.gz"):
        capture.capture_callable(lambda: None, tmp_path / "x.json")


def test_unknown_arm_is_a_clear_error(tmp_path):
    with pytest.raises(LabError, match="unknown arm"):
        capture.capture_vllm("FLASH", tmp_path, [capture.Window("prefill", 8)], model="m", max_model_len=4096,
                             max_num_batched_tokens=None)


def test_rows_round_trip_through_csv(tmp_path):
    import csv

    rows = [{"phase": "prefill", "tokens": 2048, "arm": "FLEX_ATTENTION", "metric": "attention_ms",
             "value": 12.5, "unit": "ms"}]
    path = capture.write_rows(tmp_path / "census.csv", rows)
    with open(path) as fh:
        assert list(csv.DictReader(fh)) == [{k: str(v) for k, v in rows[0].items()}]


def test_stored_census_verifies_and_a_tampered_one_does_not(tmp_path, capsys):
    from lab.__main__ import main as lab_main

    raw = tmp_path / "raw.json"
    write_synthetic(raw, 0.1)
    folder = tmp_path / "arm"
    capture.keep_trace(raw, folder / "prefill-2048.trace.json.gz")
    assert lab_main(["census", "--verify", str(folder)]) == 0
    assert "ok" in capsys.readouterr().out
    stored = folder / "prefill-2048.census.json"
    saved = json.loads(stored.read_text())
    saved["families"]["matmul"]["ms"] += 1.0
    stored.write_text(json.dumps(saved))
    assert lab_main(["census", "--verify", str(folder)]) == 1
    assert "MISMATCH: matmul" in capsys.readouterr().out
    assert lab_main(["census", "--verify", str(tmp_path / "empty")]) == 2


class _RecordingClocks:
    def __init__(self, log):
        self.log = log

    def start(self):
        self.log.append("clocks on")

    def stop(self):
        self.log.append("clocks off")


@pytest.mark.parametrize("window", [capture.Window("prefill", 64), capture.Window("decode", 32),
                                    capture.Window("decode-naive", 32)])
def test_clocks_are_sampled_inside_the_profiled_part_only(fake, tmp_path, window):
    folder = capture._TraceFolder(tmp_path / "raw")
    capture.capture_window(fake, folder, window, decode_tokens=10, clocks=_RecordingClocks(fake.log))
    marks = [line.split(" at ")[0] if " at " in line else line for line in fake.log if not line.startswith("request")]
    assert marks == ["start", "clocks on", "clocks off", "stop"]


# --- faults: trimming onto itself, bad sources, bad numbers (issue 18) ------------------------------

def _run(argv, capsys):
    from lab.__main__ import main as lab_main

    try:
        code = lab_main(argv)
    except SystemExit as exc:   # argparse's refusals
        code = exc.code
    err = capsys.readouterr().err
    return code, err


def test_trim_onto_its_own_source_is_refused_and_the_trace_is_untouched(tmp_path, capsys):
    src = tmp_path / "w.json.gz"
    write_synthetic(src, 0.05)
    before = src.read_bytes()
    code, err = _run(["capture", "trim", str(src), "--out", str(src)], capsys)
    assert code == 2 and err.count("\n") == 1 and "is the trace being trimmed" in err
    assert src.read_bytes() == before


@pytest.mark.parametrize("make", [lambda p: p.write_text("step,ms\n1,2\n"), lambda p: None,
                                  lambda p: p.write_bytes(b"\x1f\x8b\x08\x00broken")])
def test_trim_of_a_bad_source_leaves_the_output_as_it_was(tmp_path, capsys, make):
    src, out = tmp_path / "bad.json", tmp_path / "kept.json.gz"
    make(src)
    out.write_bytes(b"an earlier trimmed trace")
    code, err = _run(["capture", "trim", str(src), "--out", str(out)], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert out.read_bytes() == b"an earlier trimmed trace"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["kept.json.gz"] + (["bad.json"] if src.exists() else []))


def test_trim_writes_a_trace_with_the_same_census(tmp_path, capsys):
    src, out = tmp_path / "w.json.gz", tmp_path / "t.json.gz"
    write_synthetic(src, 0.05)
    code, _ = _run(["capture", "trim", str(src), "--out", str(out)], capsys)
    assert code == 0 and census.census(out)["families"] == census.census(src)["families"]


@pytest.mark.parametrize("flag, value", [("--max-model-len", "0"), ("--max-model-len", "-5"), ("--decode-tokens", "0"),
                                         ("--max-trace-mb", "nan"), ("--max-trace-mb", "-1")])
def test_capture_vllm_refuses_bad_numbers_before_starting(tmp_path, capsys, flag, value):
    code, err = _run(["capture", "vllm", "--arm", "FLEX_ATTENTION", "--out", str(tmp_path / "o"), flag, value], capsys)
    assert code == 2 and err.count("\n") == 1 and f"argument {flag}: expected a positive" in err
    assert not (tmp_path / "o").exists()


def test_keep_trace_keeps_the_whole_trace_when_trimming_fails(tmp_path, monkeypatch):
    from lab.measure import trace_store

    raw = tmp_path / "raw.json"
    write_synthetic(raw, 0.1)

    def broken(src, dst):
        raise LabError("disk full")
    monkeypatch.setattr(trace_store, "trim_trace", broken)
    dest = tmp_path / "arm" / "prefill-8.trace.json.gz"
    with pytest.raises(LabError, match="disk full"):
        capture.keep_trace(raw, dest, max_mb=0.001)
    assert census.census(dest)["stats"]["kernels"] == census.census(raw)["stats"]["kernels"]
    assert sorted(p.name for p in dest.parent.iterdir()) == ["prefill-8.trace.json.gz"]
