# Training: one job per cell of the study's matrix, and the CPU baselines; and each matrix
# cell's compute ceiling (its training step on batches already on the device). Threads are a runtime
# knob (--set-threads, profiles/), not study config; the trainer records what it used.


rule cell_train:
    input:
        data="results/data/{dataset}/dataset.json",
        store=cell_store("matrix"),
        builds=cell_builds("matrix"),
        code=code("train"),
    output:
        metrics="results/runs/{dataset}/{cell}/metrics.json",
        epochs="results/runs/{dataset}/{cell}/epochs.csv",
    log:
        "results/logs/runs/{dataset}/{cell}.log",
    benchmark:
        "results/benchmarks/runs/{dataset}/{cell}.tsv"
    conda:
        "../envs/train.yaml"
    threads: job_threads(cell_resource("matrix", "cpus"))
    resources:
        gpu=cell_resource("matrix", "gpu"),
        mem_mb=cell_resource("matrix", "mem_mb"),
        runtime=cell_resource("matrix", "runtime"),
        cpus_per_task=cpus_per_task,
    params:
        cell=cell_args("matrix"),
        kind="matrix",
        out_dir=cell_dir,
        store=store_option,
    shell:
        # exec: the job's process is the trainer, so a signal to the job reaches it (bash would
        # die of a SIGTERM at once and leave it running unseen)
        "exec python -m nettebench.training --kind {params.kind} --data {input.data}"
        " --out-dir {params.out_dir} --threads {threads} {params.store} {params.cell}"
        " > {log} 2>&1"


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
    threads: job_threads(cell_resource("cpu_baseline", "cpus"))
    resources:
        gpu=cell_resource("cpu_baseline", "gpu"),
        mem_mb=cell_resource("cpu_baseline", "mem_mb"),
        runtime=cell_resource("cpu_baseline", "runtime"),
        cpus_per_task=cpus_per_task,
    params:
        cell=cell_args("cpu_baseline"),
        kind="cpu_baseline",
        out_dir=cell_dir,
        store=store_option,


rule cell_bench:
    input:
        data="results/data/{dataset}/dataset.json",
        builds=cell_builds("matrix"),
        code=code("bench"),
    output:
        ceiling=f"results/runs/{{dataset}}/{{cell}}/{outputs.CEILING_FILE}",
    log:
        "results/logs/runs/{dataset}/{cell}.bench.log",
    benchmark:
        "results/benchmarks/runs/{dataset}/{cell}.bench.tsv"
    conda:
        "../envs/train.yaml"
    threads: job_threads(cell_resource("matrix", "cpus", "bench"))
    resources:
        gpu=cell_resource("matrix", "gpu", "bench"),
        mem_mb=cell_resource("matrix", "mem_mb", "bench"),
        runtime=cell_resource("matrix", "runtime", "bench"),
        cpus_per_task=cpus_per_task,
    params:
        cell=cell_args("matrix"),
    shell:
        "python -m nettebench.benchmarks.ceiling --data {input.data} --out {output.ceiling}"
        " --threads {threads} {params.cell} > {log} 2>&1"
