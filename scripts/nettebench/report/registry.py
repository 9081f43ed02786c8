"""The registry's one dispatcher: an entry of ``vocabulary/outputs.py``'s ``TABLES`` or
``FIGURES`` (``module:function`` under ``nettebench.report``) imported and called with the frames
its parameters name, so a new table or figure is its function and one registry line."""

from __future__ import annotations

import importlib
import inspect
from typing import Any


def render(target: str, frames: dict[str, Any]) -> Any:
    """``tables.time:time_markdown`` (or ``figures.time:plot_time``) from ``nettebench.report``,
    called with the ``frames`` its parameters name (``runs``; some also ``epochs`` or
    ``compared``)."""
    module, _, function = target.partition(":")
    draw = getattr(importlib.import_module(f"nettebench.report.{module}"), function)
    wanted = inspect.signature(draw).parameters
    return draw(**{name: frames[name] for name in wanted if name in frames})
