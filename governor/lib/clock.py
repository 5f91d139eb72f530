"""The server's clock, in milliseconds since the epoch: the time of the events it writes, of an
export's header, and of the outcome windows (which take it as a parameter, so tests move it)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
