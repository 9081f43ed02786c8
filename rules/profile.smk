# Profiling: the cells the config's `profile:` section selects, each in a run of its own (so
# profiler overhead never reaches the timed cells), then the top-kernels table and the category
# figure. Backend and window are params, so changing them reruns the profiles only.


rule cell_profile:
    input:
        data="results/data/{dataset}/dataset.json",
        store=cell_store("matrix"),
        builds=cell_builds("matrix"),
        code=code("profile"),
    output:
        kernels=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/kernels.csv",
        api=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/api.csv",
        cpu_ops=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/cpu_ops.csv",
        categories=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/categories.csv",
        trace=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/trace.json.gz",
        summary=f"{PROFILE_ROOT}/{{dataset}}/{{cell}}/profile.json",
    log:
        "results/logs/profiles/{dataset}/{cell}.log",
    benchmark:
        "results/benchmarks/profiles/{dataset}/{cell}.tsv"
    priority: AFTER_TRAINING_PRIORITY  # after every training round, before the reports
    conda:
        "../envs/train.yaml"
    threads: job_threads(cell_resource("matrix", "cpus", "profile"))
    resources:
        gpu=cell_resource("matrix", "gpu", "profile"),
        timed=1,
        mem_mb=cell_resource("matrix", "mem_mb", "profile"),
        runtime=cell_resource("matrix", "runtime", "profile"),
        cpus_per_task=job_cpus(cell_resource("matrix", "cpus", "profile")),
    params:
        cell=cell_args("matrix"),
        profile=profile_args,
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
        store=store_option,
    shell:
        "python -m nettebench profiling --data {input.data} --out-dir {params.out_dir}"
        " --threads {threads} {params.profile} {params.store} {params.cell} > {log} 2>&1"


rule profiles_aggregate:
    input:
        summaries=profile_summaries(),
        code=code("profile_aggregate"),
    output:
        categories="results/tables/kernel_categories.csv",
        markdown="results/tables/top_kernels.md",
        html=report(
            "results/tables/top_kernels.html",
            caption="../report/tables/top_kernels.rst",
            category="Profiles",
        ),
    log:
        "results/logs/profiles_aggregate.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.markdown),
    # one line, not every profiled cell's summary (profiles/default/config.yaml)
    message:
        "{rule}: the kernel tables in results/tables/, from every profiled cell (log: {log})"
    shell:
        "python -m nettebench report kernel-tables --out-dir {params.out_dir}"
        " {input.summaries} > {log} 2>&1"


rule profiles_plot:
    input:
        categories="results/tables/kernel_categories.csv",
        code=code("profile_figures"),
    output:
        png=report(
            "results/figures/kernel_categories.png",
            caption="../report/figures/kernel_categories.rst",
            category="Profiles",
        ),
        svg="results/figures/kernel_categories.svg",
    log:
        "results/logs/profiles_plot.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.png),
    shell:
        "python -m nettebench report kernel-figure --categories {input.categories}"
        " --out-dir {params.out_dir} > {log} 2>&1"
