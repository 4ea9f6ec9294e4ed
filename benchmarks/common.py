"""Shared helpers for the benchmark scripts: timing statistics and a provider that marks the moment
the send path hands the request over."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from hearth.providers.base import StreamEvent, Usage


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median_ms": round(statistics.median(ordered), 3), "p99_ms": round(p99, 3), "n": len(ordered)}


@dataclass
class StopwatchProvider:
    """Answers instantly and records when each request arrived (perf_counter seconds)."""

    name: str = "stopwatch"
    model: str = "stopwatch"
    arrivals: list[float] = field(default_factory=list)

    def stream(self, request):
        self.arrivals.append(time.perf_counter())
        yield StreamEvent("text", text="ok")
        yield StreamEvent("usage", usage=Usage(1, 1))
