# From per-cell records to the study's tables, figures and report. Aggregation reads only the
# cells' metrics.json/epochs.csv; figures read only the aggregate.


rule tables_aggregate:
    input:
        **STUDY.aggregate_inputs(),
        code=code("aggregate"),
    output:
        runs="results/tables/runs.csv",
        runs_html=report(
            "results/tables/runs.html",
            caption="../report/tables/runs.rst",
            category="Tables",
        ),
        epochs="results/tables/epochs.csv",
        comparisons=f"results/tables/{outputs.COMPARISONS_CSV}",
        headline=f"results/tables/{outputs.HEADLINE_FILE}",
        answer=f"results/tables/{outputs.ANSWER_FILE}",
        markdown=[f"results/tables/{name}.md" for name in TABLES],
        html=[
            report(
                f"results/tables/{name}.html",
                caption=f"../report/tables/{name}.rst",
                category="Tables",
            )
            for name in TABLES
        ],
        steps=outputs.STEPS_TABLE,
        pyperf=directory(outputs.PYPERF_DIR),
    log:
        "results/logs/tables_aggregate.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.runs),
        options=aggregate_options(),
    # one line, not every cell's records and every table (profiles/default/config.yaml)
    message:
        "{rule}: the tables in results/tables/, from every cell's record (log: {log})"
    shell:
        "python -m nettebench report tables --out-dir {params.out_dir} {params.options}"
        " {input.metrics} > {log} 2>&1"
        " && python -m nettebench report steps --steps {output.steps}"
        " --pyperf-dir {output.pyperf} {input.metrics} >> {log} 2>&1"


rule figures_plot:
    input:
        runs="results/tables/runs.csv",
        epochs="results/tables/epochs.csv",
        code=code("figures"),
    output:
        png=[
            report(
                f"results/figures/{name}.png",
                caption=f"../report/figures/{name}.rst",
                category="Figures",
            )
            for name in FIGURES
        ],
        svg=[f"results/figures/{name}.svg" for name in FIGURES],
    log:
        "results/logs/figures_plot.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.png[0]),
    message:
        "{rule}: the figures in results/figures/, from results/tables/ (log: {log})"
    shell:
        "python -m nettebench report figures --runs {input.runs} --epochs {input.epochs}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule front_page_write:
    input:
        headline=f"results/tables/{outputs.HEADLINE_FILE}",
        figure="results/figures/throughput.png",
        extras=front_page_extras(),
        code=code("front_page"),
    output:
        page=outputs.FRONT_PAGE,
    log:
        "results/logs/front_page_write.log",
    localrule: True
    conda:
        "../envs/report.yaml"
    shell:
        "python -m nettebench report front-page --headline {input.headline}"
        " --figure {input.figure} --out {output.page} --extra {input.extras:q} > {log} 2>&1"
