# Every helper of the workflow: config validation, the table of cells, input functions and
# wildcard constraints. Rule files hold rules only.
import glob
import os
import shlex
import sys
import time
from pathlib import Path

from snakemake_interface_executor_plugins.settings import DeploymentMethod

# The rules run the package's code from this checkout (the modules whose digests the rules'
# code manifests hold, so their rerun triggers are honest), also inside conda environments that
# do not install it. Without conda, `python` in a rule is the interpreter running Snakemake, so
# an unactivated virtual environment works too; under --sdm conda it is the rule's own.
SCRIPTS_DIR = Path(workflow.basedir) / "scripts"
if str(SCRIPTS_DIR) not in sys.path:
    sys.path.insert(0, str(SCRIPTS_DIR))

if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    _INTERPRETER_PATH = ""
else:
    _INTERPRETER_PATH = (
        f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
    )
# OpenMP threads wait passively (sleep at a barrier instead of spinning) unless the user chose
# a policy: beside other work a spinning thread holds the core the thread it waits for needs,
# and a training step ran 4x slower (tests/bench_omp_wait.py, docs/honest-numbers.md).
shell.prefix(
    "set -euo pipefail; "
    + _INTERPRETER_PATH
    + f"export PYTHONPATH={shlex.quote(str(SCRIPTS_DIR))}"
    + "${{PYTHONPATH:+:$PYTHONPATH}}; "
    + "export OMP_WAIT_POLICY=${{OMP_WAIT_POLICY:-PASSIVE}}; "
)

from nettebench.vocabulary import outputs
from nettebench.study import inference_cells as inference
from nettebench.study import code_groups, config_file, failures, job_signals, replicates
from nettebench.study import stored as stored_study
from nettebench.study import terminal_answer
from nettebench.study.workflow import Study

# When this Snakemake call began: the end of a run prints only an answer written since.
RUN_STARTED = time.time()

# A bad config ends the run with one line naming the key and what is allowed, not a traceback.
with config_file.one_line_errors():
    # Aggregate-only (profiles/aggregate): the study that made the results (results/study.yaml,
    # stored by the run), with what the command line gives over it; not config.yaml.
    if config.get("aggregate_only"):
        _stored = stored_study.for_aggregate(workflow.config_settings.overwrite_config)
        if _stored is not None:
            config.clear()
            config.update(_stored)
    # The schema (schemas/config.schema.yaml) applied once: its first error in one line (the
    # key, what is allowed), its defaults written into config; then the rules across keys
    # (nettebench.study.grid) as the cells are expanded. Not snakemake.utils.validate, which
    # would apply it a second time and takes 256.0 for an integer (a cell `batch~256.0`).
    STUDY = Study.from_config(config)

TABLES = outputs.TABLE_NAMES
FIGURES = outputs.FIGURE_NAMES
INFERENCE_TABLES = ("inference", "inference_accuracy")


# Ctrl-C / SIGTERM to a local run: passed on to the jobs (a training cell stops before its next
# step, keeping its checkpoint), then Snakemake's graceful exit, so it records every job as it
# ends (nettebench.study.job_signals). Cluster runs keep Snakemake's own handling.
onstart:
    if not workflow.non_local_exec:
        job_signals.forward_interrupts()


# A failed job's own sentence (a JPEG that does not decode, weights that cannot be fetched) at
# the end of the output, where Snakemake shows only its command (nettebench.study.failures).
onerror:
    for line in failures.summary(log):
        print(line, file=sys.stderr)


# A run that trained or aggregated stores the study it ran beside its results, so that
# profiles/aggregate regenerates them with it (nettebench.study.stored).
onsuccess:
    if not STUDY.aggregate_only:
        stored_study.save(config)
    terminal_answer.print_answer(since=RUN_STARTED)


wildcard_constraints:
    dataset=r"[^/]+",
    cell=r"model~[^ ]+",


def code(group):
    """The code a group of rules runs, as one input: the group's manifest (every module's
    sha256, nettebench.study.code_groups), rewritten here only when a module changed, so an
    edit reruns exactly those rules and a job's `input:` line names one file, not fifty.
    """
    path = f"{outputs.CODE_MANIFEST_DIR}/{group}.sha256"
    code_groups.write_manifest(group, path)
    return path


def final_outputs():
    """Every cell's metrics and ceiling (unless only aggregating), the tables, the figures."""
    cells = (
        []
        if STUDY.aggregate_only
        else STUDY.metrics_files() + STUDY.ceiling_files() + STUDY.inference_files()
    )
    tables = [
        f"results/tables/{name}.{ext}" for name in TABLES for ext in ("md", "html")
    ]
    figures = [
        f"results/figures/{name}.{ext}" for name in FIGURES for ext in ("png", "svg")
    ]
    return (
        cells
        + ["results/tables/runs.csv", "results/tables/runs.html", outputs.FRONT_PAGE]
        + [outputs.STEPS_TABLE, outputs.PYPERF_DIR]
        + tables
        + figures
        + profile_outputs()
        + inference_report_outputs()
    )


def dataset_archive(wildcards):
    """A local .tgz is extracted where it lies; everything else is downloaded first."""
    plan = STUDY.plan(wildcards.dataset)
    return (
        plan.archive
        if plan.how == "archive"
        else f"results/downloads/{wildcards.dataset}.tgz"
    )


def checksum_args(plan):
    """--size/--md5/--sha256 options for the checksums known for a dataset."""
    args = []
    for key in ("size", "md5", "sha256"):
        value = getattr(plan, key)
        if value is not None:
            args.append(f"--{key} {value}")
    return " ".join(args)


def bad_images_args(plan):
    """The image check's option for a dataset: nothing for the default (reject)."""
    return " --bad-images skip" if plan.bad_images == "skip" else ""


def synthetic_args(wildcards):
    spec = STUDY.plan(wildcards.dataset).synthetic
    return " ".join(
        f"--{key.replace('_', '-')} {value}" for key, value in sorted(spec.items())
    )


def cell_args(kind):
    """Input function: the trainer's arguments for the cell the wildcards point at."""

    def args(wildcards):
        return STUDY.cell_args(kind, wildcards.dataset, wildcards.cell)

    return args


def cell_dir(wildcards, output):
    return os.path.dirname(output.metrics)


def matrix_cell_outputs():
    """cell_train's outputs: the cell's record and, when the study measures ceilings, the
    ceiling.json its job measures right after the epochs (benchmarks/cell_job.py), so that
    cell and ceiling share machine, device, threads and moment."""
    found = {
        "metrics": "results/runs/{dataset}/{cell}/metrics.json",
        "epochs": "results/runs/{dataset}/{cell}/epochs.csv",
    }
    if STUDY.ceiling:
        found["ceiling"] = f"results/runs/{{dataset}}/{{cell}}/{outputs.CEILING_FILE}"
    return {**found, **matrix_weights_output()}


def cell_job(wildcards, output):
    """The command a training job runs (its words after `python -m nettebench`): with a
    ceiling output, the trainer followed by the ceiling in the same process; otherwise the
    trainer alone."""
    weights = weights_option(wildcards, output)
    if "ceiling" in output.keys():
        return f"benchmarks cell-job --ceiling {output.ceiling} {weights}".strip()
    return f"training {weights}".strip()


# -- the order of the timed jobs (nettebench.study.replicates) ----------------------------------
# Round-robin by replicate: every cell's first seed, then every cell's second, ..., so a drift
# over the run hits every cell alike. The jobs the cells wait on (datasets, stores, builds) come
# before any round, or a cell reading a store built late would run after all rounds of the rest.
TIMED_PRIORITIES = replicates.round_robin_priorities(STUDY.cells)
PREPARATION_PRIORITY = replicates.preparation_priority(TIMED_PRIORITIES)
AFTER_TRAINING_PRIORITY = replicates.AFTER_TRAINING


def timed_priority(kind):
    """Priority function of a training job: higher for a lower replicate rank (the index of its
    seed among its section's seeds), never below 2, so every round runs before the profiles
    and inference (1) and every timed job before a report job (0)."""

    def priority(wildcards):
        return TIMED_PRIORITIES[kind][
            STUDY.cell(kind, wildcards.dataset, wildcards.cell).seed
        ]

    return priority


def cell_store(kind):
    """Input function: the decoded store a `loader: cached` cell reads (none for `pil`)."""

    def store(wildcards):
        cell = STUDY.cell(kind, wildcards.dataset, wildcards.cell)
        if cell.loader != "cached":
            return []
        return f"results/data/{wildcards.dataset}/store/res~{cell.store_resolution()}/store.json"

    return store


def store_option(wildcards, input):
    """--store for cached cells; derived from the input, so it is no rerun trigger of its own
    (pil cells, which have no store, keep their parameters as they were)."""
    return f"--store {os.path.dirname(input.store)}" if input.store else ""


# -- What each job asks for (profiles/slurm; nettebench.study.resources sizes it from the cell) ----
from nettebench.study import resources as job_resources
from nettebench.vocabulary.dataset_catalog import CATALOG


def dataset_images(dataset):
    """(train, val) image counts: dataset.json once it exists, else the config or catalog."""
    entry = CATALOG.get(dataset)
    counts = (entry.train_images, entry.val_images) if entry else None
    return job_resources.dataset_images(
        STUDY.plan(dataset).synthetic, counts, f"results/data/{dataset}/dataset.json"
    )


def cell_resource(kind, name, job="train"):
    """Input function: one value (cpus, mem_mb, runtime, gpu) of a cell's training or ceiling
    job's request, grown with each retry; a cell with `device: cpu` asks for no GPU."""

    def value(wildcards, attempt=1):
        cell = STUDY.cell(kind, wildcards.dataset, wildcards.cell)
        if job == "profile":
            request = job_resources.profile_job(cell, dataset_images(wildcards.dataset))
        else:
            # a matrix cell's job also measures its ceiling
            ceiling = kind == "matrix" and STUDY.ceiling
            request = job_resources.train_job(
                cell, dataset_images(wildcards.dataset), ceiling=ceiling
            )
        return getattr(request.for_attempt(attempt), name)

    return value


def data_resource(name):
    """Input function: one value of the request of a job that prepares a dataset."""

    def value(wildcards, attempt=1):
        request = job_resources.data_job(dataset_images(wildcards.dataset))
        return getattr(request.for_attempt(attempt), name)

    return value


def build_resource(name):
    """Input function: one value of the request of a library_build job."""

    def value(wildcards, attempt=1):
        return getattr(job_resources.build_job().for_attempt(attempt), name)

    return value


def job_threads(cluster_cpus):
    """threads: locally every core (jobs one at a time, so timings do not disturb each other);
    when submitting to a cluster, what the job needs (`cluster_cpus(wildcards)`); inside a
    SLURM job, the CPUs SLURM gave it (the job's `cpus_per_task`, job_cpus)."""

    def threads(wildcards):
        allocated = os.environ.get("SLURM_CPUS_PER_TASK")
        if workflow.remote_exec and allocated:
            return int(allocated)
        if workflow.non_local_exec:
            return cluster_cpus(wildcards)
        return workflow.cores

    return threads


def job_cpus(cluster_cpus):
    """resources.cpus_per_task: the CPUs a SLURM job asks for (snakemake-executor-plugin-slurm
    submits it as --cpus-per-task), which SLURM_CPUS_PER_TASK then gives the job as its threads
    (job_threads). When submitting, the job's threads: `cluster_cpus(wildcards)`, or what
    --set-threads says. Otherwise `cluster_cpus(wildcards)` itself: a dry run holds every job's
    threads to its one core, and still shows what the submission asks for."""

    def cpus_per_task(wildcards, threads):
        if workflow.non_local_exec:
            return threads
        return cluster_cpus(wildcards)

    return cpus_per_task


def cell_message(first_output, more=""):
    """A cell job's text in the terminal, in the fields Snakemake prints for a job but without
    its lists of every input and output file (a cell's paths make those lines 500 characters
    long): the cell, its first output (``more`` says what else it writes), its log, and the
    threads and resources it asks for, which a SLURM dry run is read for (docs/slurm.md).
    """
    return (
        "{rule}: {wildcards.dataset}/{wildcards.cell}\n"
        f"    output: {{output.{first_output}}}{more}\n"
        "    log: {log}\n"
        "    wildcards: dataset={wildcards.dataset}, cell={wildcards.cell}\n"
        "    threads: {threads}\n"
        "    resources: gpu={resources.gpu}, timed={resources.timed}, "
        "mem_mb={resources.mem_mb}, runtime={resources.runtime}, "
        "cpus_per_task={resources.cpus_per_task}"
    )


# -- profiling (the config's `profile:` section; see scripts/nettebench/profiling/plan.py) -------

from nettebench.profiling.plan import PROFILE_ROOT, ProfilePlan

with config_file.one_line_errors():
    PROFILE = ProfilePlan.from_config(config.get("profile"), STUDY.cells["matrix"])


def profile_summaries():
    """profile.json of every profiled cell; in aggregate-only mode, whatever is on disk; and
    every profile in the result trees listed under `merge_results:`."""
    if STUDY.aggregate_only:
        on_disk = sorted(glob.glob(f"{PROFILE_ROOT}/**/profile.json", recursive=True))
        # the study's profiles first, in its order (as a run reads them), then any others
        configured = (
            [f for f in PROFILE.output_files("summary") if f in on_disk]
            if PROFILE
            else []
        )
        found = configured + [f for f in on_disk if f not in configured]
    else:
        found = PROFILE.output_files("summary") if PROFILE else []
    return found + STUDY.merged_files("profiles/**/profile.json")


def profile_outputs():
    """The profiled cells' files, the top-kernels table and the category figure (none when
    nothing is profiled)."""
    summaries = profile_summaries()
    if not summaries:
        return []
    cells = [] if STUDY.aggregate_only else PROFILE.output_files()
    return (
        cells
        + [f"results/tables/top_kernels.{ext}" for ext in ("md", "html")]
        + [f"results/figures/kernel_categories.{ext}" for ext in ("png", "svg")]
    )


def profile_args(wildcards):
    """The profile command's backend and window options (a rerun trigger as a param)."""
    return PROFILE.cli_args() if PROFILE else ""


# -- library builds (rules/builds.smk) ------------------------------------------------------

from nettebench.vocabulary.build_catalog import INSTALL_MANIFEST, LIBRARIES


wildcard_constraints:
    library="|".join(LIBRARIES),
    build=r"[^/]+",
    environment=r"[^/]+",


def cell_builds(kind):
    """Input function: the installed library builds a cell names (none for `installed`), so
    they are built first and a rebuilt library reruns the cells that use it."""

    def builds(wildcards):
        return STUDY.cell_builds(kind, wildcards.dataset, wildcards.cell)

    return builds


def build_param(key):
    """Params function: one setting (repo, ref) of the build the wildcards point at."""

    def param(wildcards):
        return getattr(STUDY.build(wildcards.library, wildcards.build), key)

    return param


def environment_packages(wildcards):
    """Params function: the pinned packages of the environment the wildcards point at."""
    return shlex.join(STUDY.environment(wildcards.environment).packages)


def environment_options(wildcards):
    """The environment's extra pip arguments as options of the install step."""
    plan = STUDY.environment(wildcards.environment)
    return shlex.join(f"--pip-arg={arg}" for arg in plan.pip_args)


def aggregate_options():
    """Options of the tables' aggregation that come from the config (a rerun trigger)."""
    if STUDY.target_top1 is None:
        return ""
    return f"--target-top1 {STUDY.target_top1:g}"


def build_options(wildcards):
    """The build's own environment and pip arguments as library_build options."""
    plan = STUDY.build(wildcards.library, wildcards.build)
    options = [f"--env={key}={value}" for key, value in plan.env]
    options += [f"--pip-arg={arg}" for arg in plan.pip_args]
    return shlex.join(options)


# -- inference cells (the config's `inference:` section; nettebench.study.inference_cells) ------


def inference_cell(wildcards):
    return STUDY.inference[f"{wildcards.dataset}/{wildcards.cell}"]


def inference_args(wildcards):
    """The measure command's cell options: its identity only, defaults implicit."""
    return shlex.join(inference_cell(wildcards).cli_args())


def inference_settings(wildcards):
    """The run settings of the section (a rerun trigger as a param)."""
    settings = STUDY.inference_settings
    return (
        f"--latency-queries {settings['latency_queries']} --warmup {settings['warmup']}"
        f" --max-seconds {settings['max_seconds']:g}"
    )


def accuracy_job(wildcards):
    return STUDY.accuracy[f"{wildcards.dataset}/{wildcards.cell}"]


def accuracy_args(wildcards):
    return accuracy_job(wildcards).cli_args(
        STUDY.inference_settings["accuracy_batch_size"]
    )


def inference_resource(name, accuracy=False):
    """Input function: one value of an inference (or accuracy) job's request."""

    def value(wildcards, attempt=1):
        # an accuracy job asks for the workers it runs with (its --workers), not a default of 4
        cell = accuracy_job(wildcards) if accuracy else inference_cell(wildcards)
        request = inference.job_request(cell, STUDY.inference_settings)
        return getattr(request.for_attempt(attempt), name)

    return value


def matrix_weights_output():
    """cell_train's weights.pt when inference accuracy is on (opt-in: a new output reruns
    every matrix cell once, so a config without it keeps its results valid)."""
    if STUDY.inference_settings.get("accuracy"):
        return {
            "weights": f"results/runs/{{dataset}}/{{cell}}/{inference.WEIGHTS_FILE}"
        }
    return {}


def weights_option(wildcards, output):
    """--weights for a matrix cell that keeps its final weights (inference accuracy), else
    nothing."""
    return f"--weights {output.weights}" if "weights" in output.keys() else ""


def inference_report_outputs():
    """The inference tables and figure, when there are inference records to show."""
    if not any(STUDY.inference_records().values()):
        return []
    tables = [
        f"results/tables/{n}.{ext}" for n in INFERENCE_TABLES for ext in ("md", "html")
    ]
    figure = [
        f"results/figures/inference_latency_throughput.{ext}" for ext in ("png", "svg")
    ]
    return tables + figure


def front_page_extras():
    """Input function of front_page_write: the inference sentence, when there is one."""
    if not inference_report_outputs():
        return []
    return ["results/tables/inference_headline.html"]
