# Getting each dataset once: download + verify, extract, generate, or register a local tree.
# Every way ends in results/data/<name>/dataset.json, which the training rules read. Cells with
# `loader: cached` also read the dataset decoded once into a uint8 store per resolution.


rule dataset_download:
    output:
        archive="results/downloads/{dataset}.tgz",
        manifest="results/downloads/{dataset}.tgz.json",
    log:
        "results/logs/datasets/{dataset}.download.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}.download.tsv"
    wildcard_constraints:
        dataset=STUDY.dataset_pattern("download"),
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    localrule: True
    conda:
        "../envs/data.yaml"
    params:
        url=lambda wildcards: STUDY.plan(wildcards.dataset).url,
        checks=lambda wildcards: checksum_args(STUDY.plan(wildcards.dataset)),
    shell:
        "python -m nettebench datasets fetch --url {params.url:q} --out {output.archive}"
        " {params.checks} > {log} 2>&1"


rule dataset_extract:
    input:
        archive=dataset_archive,
    output:
        info="results/data/{dataset}/dataset.json",
    log:
        "results/logs/datasets/{dataset}.extract.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}.extract.tsv"
    wildcard_constraints:
        dataset=STUDY.dataset_pattern("download", "archive"),
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    conda:
        "../envs/data.yaml"
    # the processes that decode every image once (Snakemake exports them as OMP_NUM_THREADS)
    threads: job_threads(data_resource("cpus"))
    resources:
        mem_mb=data_resource("mem_mb"),
        runtime=data_resource("runtime"),
        cpus_per_task=job_cpus(data_resource("cpus")),
    params:
        # A local archive is verified here; a downloaded one was verified when fetched. Also
        # what to do with images that do not decode (nothing added for the default, reject).
        checks=lambda wildcards: (
            checksum_args(STUDY.plan(wildcards.dataset))
            if STUDY.plan(wildcards.dataset).how == "archive"
            else ""
        )
        + bad_images_args(STUDY.plan(wildcards.dataset)),
        kind=lambda wildcards: STUDY.plan(wildcards.dataset).record_kind,
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    shell:
        "python -m nettebench datasets extract --archive {input.archive} --out-dir {params.out_dir}"
        " --name {wildcards.dataset} --kind {params.kind} {params.checks} > {log} 2>&1"


rule dataset_synthesize:
    output:
        info="results/data/{dataset}/dataset.json",
    log:
        "results/logs/datasets/{dataset}.synthesize.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}.synthesize.tsv"
    wildcard_constraints:
        dataset=STUDY.dataset_pattern("synthetic"),
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    conda:
        "../envs/data.yaml"
    threads: job_threads(data_resource("cpus"))
    resources:
        mem_mb=data_resource("mem_mb"),
        runtime=data_resource("runtime"),
        cpus_per_task=job_cpus(data_resource("cpus")),
    params:
        spec=synthetic_args,
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
    shell:
        "python -m nettebench datasets synthetic --out-dir {params.out_dir}"
        " --name {wildcards.dataset} --jobs {threads} {params.spec} > {log} 2>&1"


rule dataset_register:
    output:
        info="results/data/{dataset}/dataset.json",
    log:
        "results/logs/datasets/{dataset}.register.log",
    wildcard_constraints:
        dataset=STUDY.dataset_pattern("directory"),
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    localrule: True
    conda:
        "../envs/data.yaml"
    threads: job_threads(data_resource("cpus"))
    params:
        source=lambda wildcards: STUDY.plan(wildcards.dataset).directory,
        out_dir=lambda wildcards, output: os.path.dirname(output.info),
        checks=lambda wildcards: bad_images_args(STUDY.plan(wildcards.dataset)),
        # every image's path, size, mtime and ctime (one stat each): a replaced, added or
        # touched image reruns this job, whose dataset.json records the folder's content
        stamp=lambda wildcards: STUDY.plan(wildcards.dataset).folder_stamp(),
    shell:
        "python -m nettebench datasets local --source {params.source:q}"
        " --out-dir {params.out_dir} --name {wildcards.dataset} {params.checks} > {log} 2>&1"


rule store_build:
    input:
        data="results/data/{dataset}/dataset.json",
        code=code("store"),
    output:
        store="results/data/{dataset}/store/res~{resolution}/store.json",
    log:
        "results/logs/datasets/{dataset}.store-res~{resolution}.log",
    benchmark:
        "results/benchmarks/datasets/{dataset}.store-res~{resolution}.tsv"
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    conda:
        "../envs/data.yaml"
    threads: job_threads(data_resource("cpus"))
    resources:
        mem_mb=data_resource("mem_mb"),
        runtime=data_resource("runtime"),
        cpus_per_task=job_cpus(data_resource("cpus")),
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.store),
    shell:
        # 3>&2: an image that does not decode is named in the terminal as it fails, with the
        # step that gets it back (nettebench.datasets.repair); the rest goes to the log
        "NETTEBENCH_TERMINAL_FD=3 python -m nettebench data store --data {input.data}"
        " --out-dir {params.out_dir} --resolution {wildcards.resolution} --jobs {threads}"
        " 3>&2 > {log} 2>&1"
