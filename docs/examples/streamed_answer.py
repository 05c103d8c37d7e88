"""Log a streamed (LLM) answer with driftline's client: time to first token, time per output token, token counts.

`logged_stream` wraps any token iterator: it hands each token on as it comes (stream it to your user) and, when
the stream ends, logs one event whose `latency_ms` holds "total", "ttft" (request start to first token) and
"tpot" (time per output token after the first: (total - ttft) / (tokens_out - 1)), with `tokens_in` and
`tokens_out`. `fake_model` stands in for a real model's token stream.

    python docs/examples/streamed_answer.py --bootstrap-servers 127.0.0.1:9092 --tokens 40
"""
from __future__ import annotations

import argparse
import time
from typing import Iterable, Iterator, Mapping

from driftline.client import InferenceLogger


def fake_model(prompt: str, tokens: int = 40, first_token_s: float = 0.05, per_token_s: float = 0.01) -> Iterator[str]:
    """A model's token stream: the prompt is read (prefill) before the first token, then one token at a time."""
    time.sleep(first_token_s)
    for i in range(tokens):
        if i:
            time.sleep(per_token_s)
        yield f"word{i} "


def logged_stream(logger: InferenceLogger, tokens: Iterable[str], *, prompt_tokens: int,
                  features: Mapping[str, object], request_id: str | None = None,
                  started: float | None = None) -> Iterator[str]:
    """Yield `tokens` as they come; when they end (or the consumer stops early), log the answer's event.

    `started`: `time.perf_counter()` when the request arrived (default: now), so queueing counts in ttft.
    """
    started = time.perf_counter() if started is None else started
    first: float | None = None
    count = 0
    finish, error = "stop", None
    try:
        for token in tokens:
            if first is None:
                first = time.perf_counter()
            count += 1
            yield token
    except GeneratorExit:  # the caller stopped reading (a client hung up): log what was generated
        finish = "cancelled"
        raise
    except Exception as exc:  # the model failed: an error event, then the caller sees the exception
        error = f"{type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        ended = time.perf_counter()
        latency = {"total": (ended - started) * 1000.0}
        if first is not None:
            latency["ttft"] = (first - started) * 1000.0
            if count > 1:  # a one-token answer has no time between tokens
                latency["tpot"] = (ended - first) * 1000.0 / (count - 1)
        if count and error is None:
            logger.log(features, prediction=finish, latency_ms=latency, request_id=request_id,
                       tokens_in=prompt_tokens, tokens_out=count)
        else:
            logger.log(features, prediction=None, latency_ms=latency, request_id=request_id, status="error",
                       error=error or "the model generated no token", tokens_in=prompt_tokens, tokens_out=count)


def main(argv: list[str] | None = None) -> str:
    """Answer one prompt with `fake_model`, streaming it to stdout, and log it; returns the request id."""
    parser = argparse.ArgumentParser(description="Answer one prompt with a stand-in model and log it.")
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--model", default="chat")
    parser.add_argument("--version", default="1")
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--request-id", default="streamed-answer-1")
    args = parser.parse_args(argv)
    prompt = "Why is the sky blue?"
    with InferenceLogger(args.bootstrap_servers, model=args.model, version=args.version) as logger:
        started = time.perf_counter()
        stream = logged_stream(logger, fake_model(prompt, tokens=args.tokens), prompt_tokens=len(prompt.split()),
                               features={"prompt_chars": len(prompt), "language": "en"}, request_id=args.request_id,
                               started=started)
        for token in stream:
            print(token, end="", flush=True)
        print()
    return args.request_id


if __name__ == "__main__":
    main()
