"""Which matrix cells the workflow profiles, and how: the config's ``profile:`` section.

    profile:
      cells: {model: resnet18, precision: [O0, O3]}   # a filter over the matrix
      warmup: 5                                       # untraced steps first
      steps: 20                                       # the profiled window
      backend: torch                                  # torch | nsys | nvprof

``cells`` selects every matrix cell whose parameters match all its keys (a value, or a list
meaning "any of these"); without it every matrix cell is profiled. A key that is no cell
parameter, or a filter that selects nothing, fails at config load, naming what is allowed. Each
selected cell gets ``results/profiles/<its path>/`` (see :mod:`nettebench.profiling`), made by a
run of its own, so the timed cells never carry profiler overhead.

Imports nothing heavy: the workflow builds the plan while it parses the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nettebench.profiling import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_STEPS,
    DEFAULT_WARMUP_STEPS,
    OUTPUT_FILES,
)
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary.cell import PARAMETER_NAMES, CellSpec

PROFILE_ROOT = "results/profiles"
SETTINGS = ("cells", "warmup", "steps", "backend")


@dataclass(frozen=True)
class ProfilePlan:
    cells: tuple[str, ...]  # paths of the profiled matrix cells (<dataset>/model~.../...)
    warmup: int = DEFAULT_WARMUP_STEPS
    steps: int = DEFAULT_STEPS
    backend: str = DEFAULT_BACKEND

    @classmethod
    def from_config(
        cls, section: Mapping[str, Any] | None, matrix: Mapping[str, CellSpec]
    ) -> ProfilePlan | None:
        """The plan for a ``profile:`` section (None when the config has none)."""
        if section is None:
            return None
        unknown = sorted(set(section) - set(SETTINGS))
        if unknown:
            raise ConfigError(
                f"profile: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(SETTINGS)}"
            )
        warmup = section.get("warmup", DEFAULT_WARMUP_STEPS)
        steps = section.get("steps", DEFAULT_STEPS)
        backend = section.get("backend", DEFAULT_BACKEND)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ConfigError(f"profile.warmup must be an integer >= 0, got {warmup!r}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ConfigError(f"profile.steps must be an integer >= 1, got {steps!r}")
        if backend not in BACKENDS:
            raise ConfigError(
                f"profile.backend: {backend!r} is not allowed; allowed: {', '.join(BACKENDS)}"
            )
        selected = select(matrix, section.get("cells") or {})
        return cls(tuple(selected), warmup, steps, backend)

    def output_files(self, name: str | None = None) -> list[str]:
        """Every profiled cell's output files (or only the one called ``name``)."""
        names = [OUTPUT_FILES[name]] if name else list(OUTPUT_FILES.values())
        return [f"{PROFILE_ROOT}/{path}/{file}" for path in self.cells for file in names]

    def cli_args(self) -> str:
        """The profile command's window and backend options."""
        return f"--backend {self.backend} --warmup-steps {self.warmup} --steps {self.steps}"


def select(matrix: Mapping[str, CellSpec], cells_filter: Mapping[str, Any]) -> list[str]:
    """Paths of the matrix cells whose parameters match every key of ``cells_filter``."""
    if not isinstance(cells_filter, Mapping):
        raise ConfigError(
            "profile.cells must be a mapping like {model: resnet18, precision: [O0, O3]}"
        )
    unknown = sorted(set(cells_filter) - set(PARAMETER_NAMES))
    if unknown:
        raise ConfigError(
            f"profile.cells: unknown key(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(PARAMETER_NAMES)}"
        )
    wanted = {
        key: list(value) if isinstance(value, list | tuple) else [value]
        for key, value in cells_filter.items()
    }
    chosen = [
        path
        for path, cell in matrix.items()
        if all(getattr(cell, key) in values for key, values in wanted.items())
    ]
    if not chosen:
        raise ConfigError(
            f"profile.cells {dict(cells_filter)} matches no cell of the matrix; "
            "its keys and values must be ones the matrix has"
        )
    return chosen
