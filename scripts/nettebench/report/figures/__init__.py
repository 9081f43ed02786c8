"""The figures, one module per figure: each draws a :class:`matplotlib.figure.Figure` from the
frames it names, reads no file and is no command (the commands: :mod:`nettebench.report.draw` for
the registry's figures, ``vocabulary/outputs.py:FIGURES``; ``report/inference_figure.py`` and
``report/kernel_figure.py`` for theirs).

A figure draws one panel per setup (:mod:`nettebench.report.setups`), so two machines are never
averaged as seeds, and says what its table says: over each bar the table cell's marks (``~``,
``†``, ``‡``, ``§``, ...), in a bar's place the table's word for it (``OOM``, ``✗``, ``not
reached``), under the panels the table's notes for every mark drawn (:func:`.plotting.finish`).
An empty or missing input gives a panel saying "no data", never an exception. Figures are drawn
on Agg canvases directly (:mod:`.plotting`), never through pyplot's global state. No torch.
"""
