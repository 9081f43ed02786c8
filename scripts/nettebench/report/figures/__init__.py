"""The figures, one module per figure: each draws a :class:`matplotlib.figure.Figure` from the
frames it names (``runs``, ``epochs``), reads no file and is no command. The registry
(``vocabulary/outputs.py:FIGURES``) names the study's; ``python -m nettebench report figures``
(:mod:`nettebench.report.draw`) reads runs.csv and epochs.csv and writes each as PNG and SVG.
The inference and kernel figures have commands of their own (``report/inference_figure.py``,
``report/kernel_figure.py``).

Every figure draws one panel per setup (machine label and environment,
:mod:`nettebench.report.setups`), so two machines are never averaged as seeds; bars are means
over seeds with their 95 % confidence interval as whiskers. A figure says what its table says:
over each bar the marks its table gives that cell (``~``, ``†``, ``‡``, ``§``, ...), in a bar's
place the table's word for it (``OOM``, ``✗``, ``not reached``), and under the panels the
table's own notes for every mark drawn (:func:`.plotting.finish`), kept clear of the bars,
their whiskers and each other.

A partial study must never break the workflow, so every figure renders something: an empty or
missing input gives a panel saying "no data" instead of an exception.

Figures are drawn on :class:`~matplotlib.figure.Figure` objects with the Agg canvas directly
(:mod:`.plotting`), never through pyplot's global state, so importing them does not change the
backend of whoever imports them. No torch.
"""
