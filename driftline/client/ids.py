"""Ids and timestamps the client stamps on events: cheap enough to run once per served request."""
from __future__ import annotations

import random
import time

# uuid4() reads os.urandom on every call, a system call that costs tens of microseconds
# in some sandboxes; ids only need to be unique, so draw them from a PRNG seeded once
# from the OS (128 bits: collisions are out of reach).
_ids = random.Random()
_LOW_62_BITS = (1 << 62) - 1


def new_id() -> str:
    """A 32-hex-digit UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits.

    Time-ordered rather than wholly random because the collector keeps every prediction
    under its request id for the label join: ids that grow with time are appended at the
    right edge of that index instead of landing on a random page of it, so a commit writes
    a few pages instead of most of the index (see docs/collector.md). 74 random bits per
    millisecond keep collisions out of reach.
    """
    random_bits = _ids.getrandbits(74)
    return "%032x" % ((time.time_ns() // 1_000_000) << 80 | 0x7 << 76 | (random_bits >> 62) << 64
                      | 0b10 << 62 | random_bits & _LOW_62_BITS)


# (epoch second, its RFC 3339 text), replaced as one tuple so threads never mix two seconds.
_second_text: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """Now as `driftline.events.rfc3339()` writes it (UTC, milliseconds truncated), several times faster.

    It runs once per served request: the date and time are formatted once a second.
    """
    global _second_text
    now_ns = time.time_ns()
    second = now_ns // 1_000_000_000
    cached_second, text = _second_text
    if second != cached_second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second_text = (second, text)
    return "%s.%03dZ" % (text, now_ns // 1_000_000 % 1000)
