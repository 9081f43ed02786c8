"""The study's Markdown tables, one module per table; :mod:`nettebench.report.aggregate` writes
them (and each as HTML) from the frames of :mod:`nettebench.report.collect`."""
