"""The report layer: which reports the pipeline runs and what each writes (:mod:`.registry`), how a report
notebook is set up and executed (:mod:`.notebook`), the notebooks built from their jupytext sources
(:mod:`.notebooks`), and the index of every report's verdicts (:mod:`.index`).

A report reads runs and writes ``reports/``; its numbers come from :mod:`isogclr.analysis`, which never imports
this package.
"""
