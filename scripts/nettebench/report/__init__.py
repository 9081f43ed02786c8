"""Turning records into what people read: tidy frames, Markdown and HTML tables, figures.

Owns reading the records into frames, the study's tables and their number formatting, the
figures, and the profiled cells' kernel tables and category figure. Reads only the files the
trainer, the ceiling bench and the profiler wrote (never runs them), so it imports pandas,
matplotlib and seaborn but no torch; it may import :mod:`nettebench.study`,
:mod:`nettebench.records` and :mod:`nettebench.profiling`'s torch-free layout and categories.
"""
