"""A local stand-in of OpenAI's chat-completions API (`POST /v1/chat/completions`) for the real `openai` client.

An http.server on 127.0.0.1 in a thread that answers as the API does: a `chat.completion` object with `usage`,
or, with `"stream": true`, server-sent events of `chat.completion.chunk` objects (the role first, then one chunk
a word, the finish reason, with `stream_options.include_usage` a last chunk holding only the usage) and
`data: [DONE]`. The answer is fixed (`ANSWER`), its tokens are its words; the first chunk comes after
`FIRST_TOKEN_S`, so a streamed call has a time to first token to measure. A request without the bearer token or
without a model and messages gets OpenAI's error object, and so do the next `rate_limited` requests (429). Every request body is kept (`requests`).
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-test-standin"
ANSWER = "Open settings, choose Security and press Reset password."
SNAPSHOT = "-2024-07-18"  # the snapshot that answers: the requested model plus this
FIRST_TOKEN_S = 0.05  # before the first streamed chunk
CHUNK_S = 0.002  # between the next ones
FINGERPRINT = "fp_standin01"
RATE_LIMITED = "Rate limit reached for requests. Please try again in 20ms."


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Words of the messages' text plus 4 a message, as the stand-in counts a prompt."""
    return sum(4 + len(str(m.get("content") or "").split()) for m in messages)


class OpenAIStandin:
    """`start()` then `base_url` (…/v1) for `openai.OpenAI(base_url=..., api_key=API_KEY)`; `stop()`."""

    def __init__(self, answer: str = ANSWER, finish_reason: str = "stop") -> None:
        self.answer, self.finish_reason = answer, finish_reason
        self.requests: list[dict[str, Any]] = []
        self.rate_limited = 0  # the next this many requests are answered 429, as the API answers a spent quota
        self._server: ThreadingHTTPServer | None = None
        self._count = 0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def completion_tokens(self) -> int:
        return len(self.answer.split())

    def start(self) -> "OpenAIStandin":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._json(404, _error(f"Unknown request URL: POST {self.path}", "invalid_request_error"))
                if self.headers.get("authorization") != f"Bearer {API_KEY}":
                    return self._json(401, _error("Incorrect API key provided.", "invalid_request_error",
                                                  "invalid_api_key"))
                try:
                    request = json.loads(body)
                except ValueError:
                    return self._json(400, _error("We could not parse the JSON body of your request.",
                                                  "invalid_request_error"))
                if not isinstance(request, dict) or not request.get("model") or not request.get("messages"):
                    return self._json(400, _error("'model' and 'messages' are required.", "invalid_request_error"))
                with standin._lock:
                    standin.requests.append(request)
                    standin._count += 1
                    completion_id = f"chatcmpl-standin{standin._count:06d}"
                    limited, standin.rate_limited = standin.rate_limited > 0, max(0, standin.rate_limited - 1)
                if limited:
                    return self._json(429, _error(RATE_LIMITED, "requests", "rate_limit_exceeded"))
                if request.get("stream"):
                    return self._stream(completion_id, request)
                self._json(200, standin.completion(completion_id, request))

            def _json(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", "req_standin")
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, completion_id: str, request: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                time.sleep(FIRST_TOKEN_S)
                for chunk in standin.chunks(completion_id, request):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                    time.sleep(CHUNK_S)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def usage(self, request: dict[str, Any]) -> dict[str, int]:
        prompt = prompt_tokens(request["messages"])
        return {"prompt_tokens": prompt, "completion_tokens": self.completion_tokens,
                "total_tokens": prompt + self.completion_tokens}

    def completion(self, completion_id: str, request: dict[str, Any]) -> dict[str, Any]:
        return {"id": completion_id, "object": "chat.completion", "created": int(time.time()),
                "model": request["model"] + SNAPSHOT, "system_fingerprint": FINGERPRINT,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.answer, "refusal": None},
                             "logprobs": None, "finish_reason": self.finish_reason}],
                "usage": self.usage(request)}

    def chunks(self, completion_id: str, request: dict[str, Any]) -> list[dict[str, Any]]:
        head = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": request["model"] + SNAPSHOT, "system_fingerprint": FINGERPRINT}
        with_usage = bool((request.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if with_usage:
                out["usage"] = None
            return out

        words = self.answer.split(" ")
        out = [chunk({"role": "assistant", "content": "", "refusal": None})]
        out += [chunk({"content": word if i == 0 else " " + word}) for i, word in enumerate(words)]
        out.append(chunk({}, self.finish_reason))
        if with_usage:
            out.append({**head, "choices": [], "usage": self.usage(request)})
        return out


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
