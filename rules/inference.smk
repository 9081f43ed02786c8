# Inference: one job per cell of the config's `inference:` section (Offline img/s on the device
# and through the validation pipeline, SingleStream latency at batch 1, peak memory), and, with
# `accuracy: true`, one job per matrix cell of a measured model and dataset that evaluates its
# final weights in every inference precision. Timed jobs ask for `timed=1`, as training does.


rule inference_measure:
    input:
        data="results/data/{dataset}/dataset.json",
        code=code("inference"),
    output:
        record=f"{inference.ROOT}/{{dataset}}/{{cell}}/{inference.RECORD_FILE}",
    log:
        "results/logs/inference/{dataset}/{cell}.log",
    benchmark:
        "results/benchmarks/inference/{dataset}/{cell}.tsv"
    priority: AFTER_TRAINING_PRIORITY  # after every training round, before the reports
    conda:
        "../envs/train.yaml"
    threads: job_threads(inference_resource("cpus"))
    resources:
        gpu=inference_resource("gpu"),
        timed=1,
        mem_mb=inference_resource("mem_mb"),
        runtime=inference_resource("runtime"),
        cpus_per_task=job_cpus(inference_resource("cpus")),
    params:
        cell=inference_args,
        settings=inference_settings,
    shell:
        "exec python -m nettebench inference measure --data {input.data} --out {output.record}"
        " --threads {threads} {params.settings} {params.cell} > {log} 2>&1"


rule inference_accuracy:
    input:
        data="results/data/{dataset}/dataset.json",
        weights=f"results/runs/{{dataset}}/{{cell}}/{inference.WEIGHTS_FILE}",
        trained="results/runs/{dataset}/{cell}/metrics.json",
        code=code("inference"),
    output:
        record=f"{inference.ACCURACY_ROOT}/{{dataset}}/{{cell}}/{inference.ACCURACY_FILE}",
    log:
        "results/logs/inference_accuracy/{dataset}/{cell}.log",
    priority: AFTER_TRAINING_PRIORITY  # after every training round, before the reports
    conda:
        "../envs/train.yaml"
    threads: job_threads(inference_resource("cpus", accuracy=True))
    resources:
        gpu=inference_resource("gpu", accuracy=True),
        # not timed, but it would take the cores a timed job measures on: one at a time
        timed=1,
        mem_mb=inference_resource("mem_mb", accuracy=True),
        runtime=inference_resource("runtime", accuracy=True),
        cpus_per_task=job_cpus(inference_resource("cpus", accuracy=True)),
    params:
        job=accuracy_args,
    message:
        cell_message("record")
    shell:
        "exec python -m nettebench inference accuracy --data {input.data}"
        " --weights {input.weights} --trained {input.trained} --out {output.record}"
        " --threads {threads} {params.job} > {log} 2>&1"


rule inference_tables:
    input:
        records=STUDY.inference_records()["records"],
        accuracy=STUDY.inference_records()["accuracy"],
        code=code("inference_tables"),
    output:
        cells="results/tables/inference.csv",
        accuracy="results/tables/inference_accuracy.csv",
        headline="results/tables/inference_headline.html",
        markdown=[f"results/tables/{name}.md" for name in INFERENCE_TABLES],
        html=[
            report(
                f"results/tables/{name}.html",
                caption=f"../report/tables/{name}.rst",
                category="Tables",
            )
            for name in INFERENCE_TABLES
        ],
    log:
        "results/logs/inference_tables.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.cells),
    # one line, not every inference cell's record (profiles/default/config.yaml)
    message:
        "{rule}: the inference tables in results/tables/, from every cell's record (log: {log})"
    shell:
        "python -m nettebench report inference-tables --out-dir {params.out_dir}"
        " --records {input.records:q} --accuracy {input.accuracy:q} > {log} 2>&1"


rule inference_figure:
    input:
        cells="results/tables/inference.csv",
        code=code("inference_figure"),
    output:
        png=report(
            "results/figures/inference_latency_throughput.png",
            caption="../report/figures/inference_latency_throughput.rst",
            category="Figures",
        ),
        svg="results/figures/inference_latency_throughput.svg",
    log:
        "results/logs/inference_figure.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.png),
    shell:
        "python -m nettebench report inference-figure --cells {input.cells}"
        " --out-dir {params.out_dir} > {log} 2>&1"
