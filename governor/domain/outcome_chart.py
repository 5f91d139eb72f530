"""The timeline's outcome chart: one per metric, drawn on the server as SVG coordinates the
template renders. It is readable without colour: the target is a dashed line, the baseline a
dotted one, the window's edges solid, each observation a filled circle when the target or
guardrail on it held and a hollow square when it did not, every line labelled in words — and
the same numbers are in a table beside it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40


class ChartLine(TypedDict):
    label: str
    value: float
    style: str  # target | guardrail


def compact(value: float) -> str:
    """A tick label short enough for the axis's room (LEFT): three significant digits, with k,
    M or G from a thousand on ("12.5k", "1.23M", "0.031")."""
    rounded = float(f"{value:.3g}")
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(rounded) >= scale:
            return f"{rounded / scale:.3g}{suffix}"
    return f"{rounded:.3g}"


def _scale(low: float, high: float, size: int, flip: bool) -> Callable[[float], float]:
    span = (high - low) or 1.0

    def place(value: float) -> float:
        share = (value - low) / span
        return round((1 - share if flip else share) * size, 1)

    return place


def metric_chart(*, metric: str, unit: str, contract: dict[str, Any],
                 observations: list[dict[str, Any]]) -> dict[str, object]:
    """The chart of `metric` over the outcome window: observed values by observation time,
    the baseline, the target (for a `delta-*` target: baseline + value) and the window."""
    profile = contract["profile"]
    baseline = ((contract.get("baseline") or {}).get("metrics") or {}).get(metric)
    predicates = [profile["target"], *profile["guardrails"]]
    mine = [p for p in predicates if p["metric"] == metric]
    lines: list[ChartLine] = []
    for predicate in mine:
        value = predicate["value"]
        if predicate["operator"].startswith("delta-"):
            if baseline is None:
                continue
            value = baseline + value
        role = "target" if predicate is profile["target"] else "guardrail"
        lines.append({"label": f"{role} {predicate['id']}: {value:g}", "value": value,
                      "style": "target" if role == "target" else "guardrail"})
    points = []
    for observation in observations:
        result = observation.get("result") or {}
        if not result.get("passed") or metric not in result.get("metrics", {}):
            continue
        rows = observation.get("evaluation", {}).get("predicates", [])
        held = [row["holds"] for row in rows if row["id"] in {p["id"] for p in mine}]
        points.append({"at": observation["observedAt"], "value": result["metrics"][metric],
                       "holds": bool(held) and all(held), "number": observation["observation"]})
    values = [p["value"] for p in points] + [line["value"] for line in lines]
    if baseline is not None:
        values.append(baseline)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.1 or abs(high) * 0.1 or 1.0
    low, high = low - pad, high + pad
    start, end = contract["startedAt"], contract["deadlineAt"]
    x = _scale(start, end, WIDTH - LEFT - RIGHT, flip=False)
    y = _scale(low, high, HEIGHT - TOP - BOTTOM, flip=True)
    plot = {"width": WIDTH - LEFT - RIGHT, "height": HEIGHT - TOP - BOTTOM}
    return {
        "metric": metric, "unit": unit, "width": WIDTH, "height": HEIGHT, "left": LEFT,
        "top": TOP, "plot": plot,
        "lines": [{**line, "y": y(line["value"])} for line in lines],
        "baseline": None if baseline is None else {"value": baseline, "y": y(baseline),
                                                    "label": f"baseline: {baseline:g}"},
        "window": [{"x": x(contract["notBeforeAt"]), "label": "window opens"},
                   {"x": x(end), "label": "deadline"}],
        "points": [{**point, "x": x(min(max(point["at"], start), end)), "y": y(point["value"])}
                   for point in points],
        "polyline": " ".join(f"{x(min(max(p['at'], start), end))},{y(p['value'])}"
                             for p in points),
        "low": compact(low), "high": compact(high),
        "description": (f"{metric} over the outcome window: {len(points)} observation(s)"
                        + (f", baseline {baseline:g}" if baseline is not None else "")
                        + "".join(f", {line['label']}" for line in lines)),
    }


def outcome_charts(contract: dict[str, Any], observations: list[dict[str, Any]]
                   ) -> list[dict[str, object]]:
    return [metric_chart(metric=m["name"], unit=m["unit"], contract=contract,
                         observations=observations) for m in contract["profile"]["metrics"]]
