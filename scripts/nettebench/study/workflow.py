"""The study as the workflow sees it: datasets, the table of cells, and the files they make.

``rules/common.smk`` builds one :class:`Study` from the validated config while Snakemake parses
the workflow, and every rule and input function reads it; nothing else expands the matrix. This
module imports nothing heavy (no torch, no pandas), so a dry run over a large matrix stays fast.
"""

from __future__ import annotations

import glob
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nettebench.datasets.walk import tree_stamp
from nettebench.study import builds as build_plans
from nettebench.study import environments as environment_plans
from nettebench.study import grid, schema
from nettebench.study import inference_cells as inference
from nettebench.study.crossing import ConfigError
from nettebench.vocabulary.build_catalog import BUILDS_ROOT, ENVIRONMENTS_ROOT
from nettebench.vocabulary.cell import CellSpec
from nettebench.vocabulary.dataset_catalog import CATALOG
from nettebench.vocabulary.dataset_errors import DatasetError
from nettebench.vocabulary.outputs import CEILING_FILE

# Where each kind of cell lives under results/.
KIND_ROOTS = {"matrix": "results/runs", "cpu_baseline": "results/cpu"}
# The CPU baseline reproduces the study's CPU run: plain fp32 on the CPU unless it says otherwise.
CPU_BASELINE_OVERRIDES = {"device": "cpu", "precision": "fp32"}


@dataclass(frozen=True)
class DatasetPlan:
    """How one configured dataset is obtained.

    ``how`` is one of: ``download`` (a catalog entry or an http(s)/file URL: fetch, verify,
    extract), ``archive`` (a local .tgz: verify, extract), ``directory`` (a local tree, used in
    place) or ``synthetic`` (generated).
    """

    name: str
    how: str
    url: str | None = None
    archive: str | None = None
    directory: str | None = None
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    synthetic: Mapping[str, Any] | None = None
    from_catalog: bool = False  # fetched from the catalog's own URL
    bad_images: str = "reject"  # images that do not decode: reject the dataset, or skip them

    def folder_stamp(self) -> str | None:
        """A local folder's :func:`nettebench.datasets.walk.tree_stamp` (None for other kinds):
        the ``dataset_register`` rule's parameter, so replacing, adding or touching an image
        reruns the registration, whose dataset.json then records the folder's content. A folder
        the walk refuses (a link in it) or cannot read gets a stamp saying so, and the job runs
        and names the problem in its log."""
        if self.directory is None:
            return None
        try:
            return tree_stamp(self.directory)
        except (OSError, DatasetError) as error:
            return f"unreadable ({type(error).__name__})"

    @property
    def record_kind(self) -> str:
        """What dataset.json calls how the data came: catalog, archive, directory, synthetic."""
        if self.how == "download":
            return "catalog" if self.from_catalog else "archive"
        return self.how


@dataclass
class Study:
    datasets: dict[str, DatasetPlan]
    cells: dict[str, dict[str, CellSpec]] = field(default_factory=dict)  # kind -> path -> cell
    aggregate_only: bool = False
    ceiling: bool = True  # measure every matrix cell's compute ceiling next to it
    # library -> build name -> plan: the source builds the config names (`builds:`)
    builds: dict[str, dict[str, build_plans.BuildPlan]] = field(default_factory=dict)
    # name -> plan: the package environments the config names (`environments:`)
    environments: dict[str, environment_plans.EnvironmentPlan] = field(default_factory=dict)
    machine: str | None = None  # the run's machine/site label (`machine:`), in every cell
    # results/ folders of other runs (copied back from other clusters) aggregated with this one
    merge_results: list[str] = field(default_factory=list)
    target_top1: float | None = None  # validation top-1 (%) whose time to reach is reported
    # the `inference:` section: path -> cell, its run settings, and its accuracy jobs
    inference: dict[str, inference.InferenceSpec] = field(default_factory=dict)
    inference_settings: dict[str, Any] = field(default_factory=dict)
    accuracy: dict[str, inference.AccuracyJob] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Study:
        """The study of a config: the schema's rules first (one line for the first error; its
        defaults are written into ``config``, as Snakemake's ``validate`` would), then those
        across keys, as each section is planned and expanded."""
        schema.apply_schema(config)
        datasets = {name: plan_dataset(name, spec) for name, spec in config["datasets"].items()}
        names = list(datasets)
        builds = build_plans.plan_builds(config.get("builds"))
        environments = environment_plans.plan_environments(config.get("environments"))
        allowed = {
            **build_plans.build_names(builds),
            "environment": environment_plans.environment_names(environments),
        }
        machine = machine_label(config.get("machine"))
        run = {"machine": machine} if machine else {}
        matrix = grid.expand(
            config["matrix"], section="matrix", datasets=names, overrides=run, builds=allowed
        )
        baseline_config = config.get("cpu_baseline") or {}
        baselines = (
            grid.expand(
                baseline_config,
                section="cpu_baseline",
                datasets=names,
                overrides={**CPU_BASELINE_OVERRIDES, **run},
                builds=allowed,
            )
            if baseline_config
            else []
        )
        target = config.get("target_top1")
        study = cls(
            datasets=datasets,
            aggregate_only=bool(config.get("aggregate_only")),
            ceiling=bool(config.get("ceiling", True)),
            builds=builds,
            environments=environments,
            machine=machine,
            merge_results=merge_trees(config.get("merge_results")),
            target_top1=None if target is None else float(target),
        )
        study.cells = {
            "matrix": {cell.path(): cell for cell in matrix},
            "cpu_baseline": {cell.path(): cell for cell in baselines},
        }
        study.plan_inference(config.get("inference"))
        return study

    def plan_inference(self, section: Mapping[str, Any] | None) -> None:
        """The inference cells and, with ``accuracy: true``, the accuracy jobs."""
        if not section:
            return
        cells = inference.expand(section, datasets=list(self.datasets), machine=self.machine)
        self.inference = {cell.path(): cell for cell in cells}
        self.inference_settings = inference.split_section(section)[1]
        if self.inference_settings["accuracy"]:
            jobs = inference.accuracy_jobs(
                cells, list(self.cells["matrix"].values()), self.inference_settings["accuracy"]
            )
            self.accuracy = {job.path(): job for job in jobs}

    def inference_records(self) -> dict[str, list[str]]:
        """The records the inference tables read: the configured cells', or in aggregate-only
        mode whatever is on disk; and those of the trees under ``merge_results:``."""
        cells = f"{Path(inference.ROOT).name}/**/{inference.RECORD_FILE}"
        scores = f"{Path(inference.ACCURACY_ROOT).name}/**/{inference.ACCURACY_FILE}"
        if self.aggregate_only:
            found = {
                "records": sorted(glob.glob(f"results/{cells}", recursive=True)),
                "accuracy": sorted(glob.glob(f"results/{scores}", recursive=True)),
            }
        else:
            files = self.inference_files()
            found = {
                "records": [f for f in files if f.endswith(inference.RECORD_FILE)],
                "accuracy": [f for f in files if f.endswith(inference.ACCURACY_FILE)],
            }
        found["records"] += self.merged_files(cells)
        found["accuracy"] += self.merged_files(scores)
        return found

    def inference_files(self) -> list[str]:
        """Every inference cell's record, then every accuracy job's."""
        return [f"{inference.ROOT}/{p}/{inference.RECORD_FILE}" for p in self.inference] + [
            f"{inference.ACCURACY_ROOT}/{p}/{inference.ACCURACY_FILE}" for p in self.accuracy
        ]

    # -- cells -----------------------------------------------------------------------------

    def cell(self, kind: str, dataset: str, cell_path: str) -> CellSpec:
        """The cell a rule's wildcards point at (``dataset`` and the rest of its path)."""
        try:
            return self.cells[kind][f"{dataset}/{cell_path}"]
        except KeyError:
            raise ConfigError(
                f"{KIND_ROOTS[kind]}/{dataset}/{cell_path} is not a cell of this study's config"
            ) from None

    def cell_args(self, kind: str, dataset: str, cell_path: str) -> str:
        """The trainer's arguments for a cell: its identity only, so defaults stay implicit."""
        return shlex.join(self.cell(kind, dataset, cell_path).cli_args())

    def metrics_files(self, kind: str | None = None) -> list[str]:
        """metrics.json of every configured cell (of one kind, or all)."""
        kinds = [kind] if kind else list(KIND_ROOTS)
        return [f"{KIND_ROOTS[k]}/{path}/metrics.json" for k in kinds for path in self.cells[k]]

    def ceiling_files(self) -> list[str]:
        """ceiling.json beside every matrix cell, when ceilings are measured."""
        if not self.ceiling:
            return []
        return [f"{KIND_ROOTS['matrix']}/{path}/{CEILING_FILE}" for path in self.cells["matrix"]]

    def aggregate_inputs(self) -> dict[str, list[str]]:
        """The files aggregation reads: the configured cells' records, or in aggregate-only
        mode whatever records are on disk, configured or not; and in both modes every record
        in the result trees listed under ``merge_results:``."""
        if self.aggregate_only:
            # the configured cells first, in the study's order, then any others on disk: when
            # the records are the study's own, aggregation reads them as the run did
            found = {
                key: _configured_first(paths, configured)
                for (key, paths), configured in zip(
                    records_in_tree("results").items(),
                    (self.metrics_files(), self.ceiling_files()),
                    strict=True,
                )
            }
        else:
            found = {"metrics": self.metrics_files(), "ceilings": self.ceiling_files()}
        for tree in self.merge_results:
            for key, paths in records_in_tree(tree).items():
                found[key] = found[key] + paths
        return found

    def merged_files(self, pattern: str) -> list[str]:
        """Files matching ``pattern`` (relative to a results/ folder, ``**`` allowed) in every
        result tree listed under ``merge_results:``."""
        return sorted(
            path
            for tree in self.merge_results
            for path in glob.glob(f"{tree}/{pattern}", recursive=True)
        )

    # -- library builds --------------------------------------------------------------------

    def build(self, library: str, name: str) -> build_plans.BuildPlan:
        """The configured build a rule's wildcards point at."""
        try:
            return self.builds[library][name]
        except KeyError:
            raise ConfigError(
                f"{BUILDS_ROOT}/{library}/{name} is not a build of this study's "
                f"config (builds.{library})"
            ) from None

    def cell_builds(self, kind: str, dataset: str, cell_path: str) -> list[str]:
        """The install manifests of the builds and the package environment a cell runs
        against (none for `installed`)."""
        cell = self.cell(kind, dataset, cell_path)
        manifests = [
            self.build(library, getattr(cell, library)).install_manifest
            for library in build_plans.LIBRARIES
            if getattr(cell, library) != build_plans.INSTALLED
        ]
        if cell.environment != build_plans.INSTALLED:
            manifests.append(self.environment(cell.environment).install_manifest)
        return manifests

    def environment(self, name: str) -> environment_plans.EnvironmentPlan:
        """The configured package environment a rule's wildcards point at."""
        try:
            return self.environments[name]
        except KeyError:
            raise ConfigError(
                f"{ENVIRONMENTS_ROOT}/{name} is not a package environment "
                "of this study's config (environments:)"
            ) from None

    # -- datasets --------------------------------------------------------------------------

    def dataset_pattern(self, *hows: str) -> str:
        """A wildcard constraint matching the datasets obtained in one of the ``hows`` ways."""
        names = [re.escape(n) for n, plan in self.datasets.items() if plan.how in hows]
        return "|".join(names) if names else "(?!)"  # (?!) never matches

    def plan(self, dataset: str) -> DatasetPlan:
        return self.datasets[dataset]


def machine_label(value: Any) -> str | None:
    """The config's ``machine:`` as a label (None when unset; the schema checked its
    characters: it is part of result paths)."""
    return None if value is None or value == "" else str(value)


def merge_trees(value: Any) -> list[str]:
    """The config's ``merge_results:``: result folders that exist and hold cell records."""
    found = []
    for index, tree in enumerate(value or ()):  # the schema: a list of strings, or null
        where = f"merge_results[{index}]"
        path = Path(str(tree)).expanduser()
        if not path.is_dir():
            raise ConfigError(f"{where}: {tree!r} is not a directory (a results/ folder)")
        if not any((path / Path(root).name).is_dir() for root in KIND_ROOTS.values()):
            kinds = " or ".join(f"{Path(root).name}/" for root in KIND_ROOTS.values())
            raise ConfigError(
                f"{where}: {tree!r} has no {kinds} folder; point it at the results/ folder "
                "copied back from the other machine"
            )
        found.append(str(path))
    return found


def _configured_first(on_disk: list[str], configured: list[str]) -> list[str]:
    """``on_disk`` reordered: the ``configured`` files among them in their order, then the rest."""
    present = set(on_disk)
    known = [path for path in configured if path in present]
    return known + [path for path in on_disk if path not in set(known)]


def records_in_tree(tree: str) -> dict[str, list[str]]:
    """Every cell's metrics.json and every ceiling.json under a results/ folder."""
    found: dict[str, list[str]] = {"metrics": [], "ceilings": []}
    for root in KIND_ROOTS.values():
        folder = f"{tree}/{Path(root).name}"
        found["metrics"] += glob.glob(f"{folder}/**/metrics.json", recursive=True)
        found["ceilings"] += glob.glob(f"{folder}/**/{CEILING_FILE}", recursive=True)
    return {key: sorted(paths) for key, paths in found.items()}


def plan_dataset(name: str, spec: Mapping[str, Any] | None) -> DatasetPlan:
    """Decide how a configured dataset is obtained; unknown names without a source fail."""
    spec = dict(spec or {})
    entry = CATALOG.get(name)
    # Checksums the user wrote win; otherwise a catalog name brings the catalog's, which also
    # verify a user's own copy (a mirror URL or a local .tgz) of that archive.
    user_checks = {key: spec.get(key) for key in ("size", "md5", "sha256")}
    if entry is None or any(user_checks.values()):
        known = user_checks
    else:
        known = {"size": entry.size, "md5": entry.md5, "sha256": entry.sha256}
    if spec.get("synthetic") is not None:
        return DatasetPlan(name, "synthetic", synthetic=dict(spec["synthetic"]))
    known["bad_images"] = spec.get("bad_images") or "reject"
    source = spec.get("source")
    if source is None:
        if entry is None:
            raise ConfigError(
                f"datasets.{name}: not in the catalog ({', '.join(sorted(CATALOG))}) and has "
                "neither `source:` (a .tgz, a directory, a file:// or http(s):// URL) nor "
                "`synthetic:`"
            )
        return DatasetPlan(name, "download", url=entry.url, from_catalog=True, **known)
    source = str(source)
    if re.match(r"^(https?|file)://", source):
        return DatasetPlan(name, "download", url=source, **known)
    path = Path(source).expanduser()
    if path.is_dir():
        return DatasetPlan(
            name, "directory", directory=str(path.resolve()), bad_images=known["bad_images"]
        )
    if path.is_file():
        return DatasetPlan(name, "archive", archive=str(path.resolve()), **known)
    raise ConfigError(
        f"datasets.{name}.source: {source!r} is neither an existing file or directory nor a "
        "file:// or http(s):// URL"
    )
