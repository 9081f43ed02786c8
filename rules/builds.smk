# Libraries built from source (the config's `builds:`), for the cells whose `torchvision` or
# `apex` parameter names a build: clone a ref, build a wheel against the installed torch, install
# it into a prefix of its own that the trainer puts first on its import path. Every step is
# cached: a second run with the same repo, ref and options builds nothing. A branch is resolved
# once, when first cloned; `--forcerun library_clone` fetches it again (and rebuilds).


rule library_clone:
    input:
        code=code("builds"),
    output:
        src=directory("results/builds/{library}/{build}/src"),
        source="results/builds/{library}/{build}/source.json",
    log:
        "results/logs/builds/{library}/{build}.clone.log",
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    localrule: True  # fetches from the network: on a cluster, the login node
    conda:
        "../envs/build.yaml"
    params:
        repo=build_param("repo"),
        ref=build_param("ref"),
    shell:
        "python -m nettebench builds clone --library {wildcards.library}"
        " --build {wildcards.build} --repo {params.repo:q} --ref {params.ref:q}"
        " --src {output.src} --manifest {output.source} --log {log}"


rule library_build:
    input:
        src="results/builds/{library}/{build}/src",
        source="results/builds/{library}/{build}/source.json",
        code=code("builds"),
    output:
        wheel=directory("results/builds/{library}/{build}/wheel"),
        manifest="results/builds/{library}/{build}/wheel.json",
    log:
        "results/logs/builds/{library}/{build}.build.log",
    benchmark:
        "results/benchmarks/builds/{library}/{build}.build.tsv"
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    conda:
        "../envs/build.yaml"
    threads: job_threads(build_resource("cpus"))
    resources:
        mem_mb=build_resource("mem_mb"),
        runtime=build_resource("runtime"),
        cpus_per_task=job_cpus(build_resource("cpus")),
    params:
        options=build_options,
    shell:
        "python -m nettebench builds wheel --src {input.src} --source {input.source}"
        " --out-dir {output.wheel} --manifest {output.manifest} --jobs {threads}"
        " {params.options} --log {log}"


rule library_install:
    input:
        wheel="results/builds/{library}/{build}/wheel",
        manifest="results/builds/{library}/{build}/wheel.json",
        code=code("builds"),
    output:
        prefix=directory("results/builds/{library}/{build}/prefix"),
        manifest=f"results/builds/{{library}}/{{build}}/{INSTALL_MANIFEST}",
    log:
        "results/logs/builds/{library}/{build}.install.log",
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    localrule: True
    conda:
        "../envs/build.yaml"
    shell:
        "python -m nettebench builds install --wheel-manifest {input.manifest}"
        " --wheel-dir {input.wheel} --prefix {output.prefix} --manifest {output.manifest}"
        " --log {log}"


# Package environments (the config's `environments:`): exact pins from the registry, installed
# once with `pip install --target` into a prefix that the cells naming the environment put first
# on their import path. Reinstalled when the pins or pip arguments change.
rule environment_install:
    input:
        code=code("environments"),
    output:
        prefix=directory("results/environments/{environment}/prefix"),
        manifest=f"results/environments/{{environment}}/{INSTALL_MANIFEST}",
    log:
        "results/logs/environments/{environment}.install.log",
    benchmark:
        "results/benchmarks/environments/{environment}.install.tsv"
    priority: PREPARATION_PRIORITY  # before every training round (rules/common.smk)
    localrule: True  # fetches from the registry: on a cluster, the login node
    conda:
        "../envs/build.yaml"
    params:
        packages=environment_packages,
        options=environment_options,
    shell:
        "python -m nettebench builds environment --name {wildcards.environment}"
        " --prefix {output.prefix} --manifest {output.manifest} --log {log}"
        " {params.options} -- {params.packages}"
