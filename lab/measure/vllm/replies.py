"""A vLLM server's reply, checked where it enters: every streamed event before anything counts it.

A reply of the wrong shape (``usage.prompt_tokens`` 0 or text, ``choices`` not a list, a token-id list
of strings, an unreadable event) is a :class:`StreamError` naming the field, so the request is a failed
measurement with its reason: it never reaches a summary as a number that divides by zero or a string
that sorts among times. ``lab.measure.vllm.probe``, ``lab.measure.vllm.concurrency`` and
``lab.measure.capture`` read every stream through these functions.
"""

from __future__ import annotations

import json


class StreamError(Exception):
    """A request that did not complete. ``kind``: http, timeout, disconnected, server_error, protocol."""

    def __init__(self, kind: str, message: str, chunks: list | None = None):
        super().__init__(message)
        self.kind = kind
        self.chunks = chunks or []


def error_message(body: bytes | str) -> str:
    """The message of an OpenAI-style error body (vLLM has used both shapes), or any other reply (an HTML page, a
    traceback), as one line of at most 300 characters: a reply never adds lines to an error."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return _one_line(body.decode("utf-8", "replace") if isinstance(body, bytes) else body)
    error = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(error, dict):
        return _one_line(str(error.get("message") or error))
    return _one_line(str(error))


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def parse_event(data: bytes, chunks: list | None = None) -> dict:
    """One ``data:`` payload as an event; StreamError for an unreadable one or an error the server streamed."""
    try:
        event = json.loads(data)
    except (ValueError, RecursionError):
        raise StreamError("protocol", f"unreadable stream event: {data[:120]!r}", chunks) from None
    if not isinstance(event, dict):
        raise StreamError("protocol", f"unexpected stream event: {data[:120]!r}", chunks)
    if event.get("error") or event.get("object") == "error":
        raise StreamError("server_error", error_message(data), chunks)
    return event


def _count_field(where: str, value, least: int) -> int:
    """A token count as the server sent it: an integer of at least ``least`` (not a bool, a string or a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise StreamError("protocol", f"bad reply: {where} is {json.dumps(value)[:40]}; expected an integer "
                          f"of at least {least}")
    return value


def check_usage(usage, chunks: list | None = None) -> dict | None:
    """The ``usage`` object of a streamed event, checked: prompt_tokens > 0, completion_tokens >= 0."""
    if usage is None:
        return None
    try:
        if not isinstance(usage, dict):
            raise StreamError("protocol", f"bad reply: 'usage' is {json.dumps(usage)[:40]}; expected an object")
        if "prompt_tokens" in usage:
            _count_field("'usage.prompt_tokens'", usage["prompt_tokens"], 1)
        if usage.get("completion_tokens") is not None:
            _count_field("'usage.completion_tokens'", usage["completion_tokens"], 0)
    except StreamError as exc:
        exc.chunks = chunks or []
        raise
    return usage


def event_tokens(event: dict, chunks: list | None = None) -> tuple[int, str | None]:
    """(tokens, finish reason) of one streamed event, its ``choices`` checked where the reply enters.

    ``choices`` must be a list of objects; a choice's ``token_ids`` (when present) a list of integers,
    else the chunk counts as one token; ``finish_reason`` text or null. A StreamError("protocol") names
    the field that is wrong, so a bad reply is a failed request with its reason, never a crash later.
    """
    choices = event.get("choices")
    if choices is None:
        return 0, None
    if not isinstance(choices, list):
        raise StreamError("protocol", f"bad reply: 'choices' is {json.dumps(choices)[:40]}; expected a list", chunks)
    tokens, finish = 0, None
    for choice in choices:
        if not isinstance(choice, dict):
            raise StreamError("protocol", f"bad reply: a choice is {json.dumps(choice)[:40]}; expected an object",
                              chunks)
        ids = choice.get("token_ids")
        if ids is not None and (not isinstance(ids, list)
                                or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids)):
            raise StreamError("protocol", f"bad reply: 'token_ids' is {json.dumps(ids)[:40]}; expected a list of "
                              "token ids", chunks)
        reason = choice.get("finish_reason")
        if reason is not None and not isinstance(reason, str):
            raise StreamError("protocol", f"bad reply: 'finish_reason' is {json.dumps(reason)[:40]}; expected "
                              "text or null", chunks)
        tokens += len(ids) if ids is not None else 1  # one token per chunk when ids are not returned
        finish = reason or finish
    return tokens, finish


def queue_counts(metrics: str) -> tuple[int, int] | None:
    """(running, waiting) requests from the text of a vLLM ``/metrics`` page, summed over its engines;
    None when it has neither gauge or a value that is not a number (a garbled page says nothing)."""
    counts = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    seen = False
    for line in metrics.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in counts:
            try:
                counts[name] += float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None
            seen = True
    return (int(counts["vllm:num_requests_running"]), int(counts["vllm:num_requests_waiting"])) if seen else None
