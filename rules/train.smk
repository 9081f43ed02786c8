# Training: one job per cell of the study's matrix, and the CPU baselines. A matrix cell's job also
# measures the cell's compute ceiling (its training step on batches already on the device) right
# after the epochs, in the same process, so the two are measured in the same conditions. Threads
# are a runtime knob (--set-threads, profiles/), not study config; the trainer records what it
# used. Every timed job asks for `timed=1`: the local profiles allow one at a time. They run
# round-robin by replicate (a cell's seeds are its replicates, each a process): every cell's
# first seed, then every cell's second, ..., so a drift over the run hits every cell alike
# (priority: higher for a lower rank of the seed, timed_priority in rules/common.smk). Every
# round runs before any report job that is ready beside it (priority 0): the report jobs then
# share the cores at the end instead of holding up the next timed job one core at a time.


rule cell_train:
    input:
        data="results/data/{dataset}/dataset.json",
        store=cell_store("matrix"),
        builds=cell_builds("matrix"),
        code=code("matrix_train"),
    output:
        **matrix_cell_outputs(),
    log:
        "results/logs/runs/{dataset}/{cell}.log",
    benchmark:
        "results/benchmarks/runs/{dataset}/{cell}.tsv"
    priority: timed_priority("matrix")  # round-robin by replicate (above)
    conda:
        "../envs/train.yaml"
    threads: job_threads(cell_resource("matrix", "cpus"))
    resources:
        gpu=cell_resource("matrix", "gpu"),
        timed=1,
        mem_mb=cell_resource("matrix", "mem_mb"),
        runtime=cell_resource("matrix", "runtime"),
        cpus_per_task=job_cpus(cell_resource("matrix", "cpus")),
    params:
        job=cell_job,
        cell=cell_args("matrix"),
        kind="matrix",
        out_dir=cell_dir,
        store=store_option,
    message:
        cell_message("metrics", " (and the cell's other files beside it)")
    shell:
        # exec: the job's process is the trainer, so a signal to the job reaches it (bash would
        # die of a SIGTERM at once and leave it running unseen). --depends-on {input}: every
        # declared input goes into the key a restore or resume is matched on, so neither can
        # be looser than this rule (training/validity.py); the options are the rest of it.
        # 3>&2: the terminal's copy, for the lines the run shows as it goes (a resume, an image
        # that does not decode: nettebench.vocabulary.terminal); the rest goes to the log.
        "NETTEBENCH_TERMINAL_FD=3 exec python -m nettebench {params.job} --kind {params.kind}"
        " --data {input.data} --out-dir {params.out_dir} --threads {threads} {params.store}"
        " {params.cell} --depends-on {input} 3>&2 > {log} 2>&1"


use rule cell_train as cpu_baseline_train with:
    input:
        data="results/data/{dataset}/dataset.json",
        store=cell_store("cpu_baseline"),
        builds=cell_builds("cpu_baseline"),
        code=code("train"),
    output:
        metrics="results/cpu/{dataset}/{cell}/metrics.json",
        epochs="results/cpu/{dataset}/{cell}/epochs.csv",
    log:
        "results/logs/cpu/{dataset}/{cell}.log",
    benchmark:
        "results/benchmarks/cpu/{dataset}/{cell}.tsv"
    priority: timed_priority("cpu_baseline")  # in the matrix's rounds
    threads: job_threads(cell_resource("cpu_baseline", "cpus"))
    resources:
        gpu=cell_resource("cpu_baseline", "gpu"),
        timed=1,
        mem_mb=cell_resource("cpu_baseline", "mem_mb"),
        runtime=cell_resource("cpu_baseline", "runtime"),
        cpus_per_task=job_cpus(cell_resource("cpu_baseline", "cpus")),
    params:
        job=cell_job,
        cell=cell_args("cpu_baseline"),
        kind="cpu_baseline",
        out_dir=cell_dir,
        store=store_option,
