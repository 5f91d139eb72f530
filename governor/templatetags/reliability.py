"""Template filters of the reliability page."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def duration_ms(value: Any) -> str:
    """A duration in milliseconds as people read it: '850 ms', '42 s', '7 min 5 s', '3 h 20 min',
    '2 d 4 h'."""
    ms = float(value)
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = int(ms // 1000)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
