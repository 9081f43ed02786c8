"""The study's Markdown tables, one module per table; :mod:`nettebench.report.aggregate` writes
them (and each as HTML) from the frames of :mod:`nettebench.report.frames`. A table module only
renders: it reads no record and is no command."""
