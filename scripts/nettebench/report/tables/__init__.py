"""The study's Markdown tables, one module per table, each also written as HTML, from the frames
of :mod:`nettebench.report.frames`: :mod:`nettebench.report.aggregate` writes the registry's
(``vocabulary/outputs.py:TABLES``), ``inference_tables`` and ``kernel_tables`` those of
:mod:`.inference` and :mod:`.kernels`. A table module only renders: it reads no record and is
no command."""
