"""The report layer: which reports the pipeline runs and what each writes (:mod:`.report_table`), the CPU minutes
of their training stages (:mod:`.stage_minutes`), how a report notebook is set up and executed
(:mod:`.notebook_run`), the notebooks built from their jupytext sources (:mod:`.notebook_build`), and the index of
every report's verdicts (:mod:`.index`).

A report reads runs and writes ``reports/``; its numbers come from :mod:`isogclr.analysis`, which never imports
this package.
"""
