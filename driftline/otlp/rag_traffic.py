"""The RAG stand-in's traffic (`python -m driftline.otlp.rag_traffic`, run by `driftline up --scenario
rag_topic_shift`): help-desk questions for `--warmup` seconds, then questions the corpus cannot answer, each
request's trace exported as OTLP/protobuf to the receiver's `POST /v1/traces` once a second.

The stand-in's semantic cache is on: a question asked before is answered from it, so the cache-hit rate falls when
the topic moves (new questions), as a real cache's does.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import urllib.error
import urllib.request

from driftline.otlp.rag_standin import OFF_TOPIC, SUPPORT, RagStandin, export_request, questions


def run(url: str, rate: float, warmup_s: float, duration_s: float, token: str | None = None, seed: int = 0) -> int:
    """Send traces until `duration_s` has passed; returns the requests traced."""
    rng, standin = random.Random(seed), RagStandin(seed=seed)
    started = time.monotonic()
    sent = 0
    headers = {"content-type": "application/x-protobuf", **({"authorization": f"Bearer {token}"} if token else {})}
    while (elapsed := time.monotonic() - started) < duration_s:
        topic = SUPPORT if elapsed < warmup_s else OFF_TOPIC
        now_ms = int(time.time() * 1000)
        count = max(1, round(rate))
        spans = [span for i, question in enumerate(questions(topic, count, rng))
                 for span in standin.request(question, now_ms + i * int(1000 / count))]
        body = export_request(spans).SerializeToString()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as answer:
                answer.read()
            sent += count
        except (urllib.error.URLError, OSError) as exc:  # the receiver restarting: the next second retries
            print(f"rag traffic: {url}: {exc}", file=sys.stderr)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))
    return sent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the receiver's /v1/traces")
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of help-desk questions first")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds in all")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import os

    sent = run(args.url, args.rate, args.warmup, args.duration, os.environ.get("DRIFTLINE_RECEIVER_TOKEN"), args.seed)
    print(f"rag traffic: {sent} requests traced", file=sys.stderr)


if __name__ == "__main__":
    main()
