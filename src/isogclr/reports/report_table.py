"""The table of the report notebooks the pipeline runs (:data:`REPORTS`): what each is given (papermill ``-p``),
reads and writes. One list: the pipeline's report stages, the index and the command line read it. The minutes
of a report's training stages are read by :mod:`isogclr.reports.stage_minutes`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Report:
    """A report notebook ``notebooks/src/<name>.py``: what it is given (papermill ``-p``), reads and writes.

    Code dependencies are not listed: they are the ``isogclr`` imports of its source. Studies are not listed
    either: a study names its report (``studies.<name>.report``). ``tables`` and ``figures`` are the stems its
    ``write_table`` / ``save_figure`` calls write (``reports/tables/<stem>.{md,csv}``, ``reports/figures/<stem>.png``),
    in the order it writes them (``tests/test_pipeline_reports.py`` checks them against the source).
    """

    comment: str
    papermill: dict[str, str]
    reads: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    paper: tuple[str, ...] = ()  # transcribed paper tables (src/isogclr/analysis/paper/<name>.csv)
    selection: str | None = None  # the selection section it shows (tuning/<m>/ of its methods), if params has it
    tables: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    trains: tuple[str, ...] = ()  # the training stage families whose runs it reads (its CPU minutes: STAGE_RECORD)

    def outputs(self) -> tuple[list[str], list[str]]:
        """``(tables, figures)`` relative to ``reports/``: each table as its ``.md`` and ``.csv``."""
        return ([f"tables/{stem}.{ext}" for stem in self.tables for ext in ("md", "csv")],
                [f"figures/{stem}.png" for stem in self.figures])


_TABLE1_RUNS = ("references", "train", "train_table3", "train_real", "train_references", "study_ladder_synth10_lt")
_RUNS = {"params_path": "params.yaml", "runs_dir": "runs", "reports_dir": "reports"}
REPORTS: dict[str, Report] = {
    "table1_unimodal": Report(
        "iSogCLR Tables 1, 3/4, 10; Table 1 on Fashion-MNIST",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),
        params=("profile", "table1", "table1_real", "table3", "references", "train.epochs", "train.epochs_by_dataset",
                "data.fashion_mnist_mini"),
        paper=("isogclr_table1", "isogclr_table34"),
        tables=("table1_unimodal", "table1_real", "table3_all_methods", "table34_epochs"),
        figures=("table1_unimodal", "table34_epochs"), trains=_TABLE1_RUNS),
    "temperature_vs_frequency": Report(
        "iSogCLR Sec. 6.3, Figure 5: learned tau vs semantic frequency", _RUNS, reads=("runs",),
        params=("profile", "temperatures", "table1.seeds"),
        tables=("temperature_vs_frequency",),
        figures=("temperature_vs_frequency",), trains=("train",)),
    "feature_tsne": Report(
        "iSogCLR Figures 4-5: t-SNE of frozen features (first three Table 1 seeds)", _RUNS, reads=("runs",),
        params=("profile", "table1.datasets", "table1.seeds", "temperatures.datasets"),
        tables=("feature_tsne",),
        figures=("feature_tsne", "tau_tsne"), trains=("train",)),
    "rgcl_analysis": Report(
        "iSogCLR Figures 2-3, computed exactly (no training)",
        {"reports_dir": "reports", "params_path": "params.yaml"},  # rho and tau of the untuned runs
        params=("methods.isogclr", "methods.simclr"),
        tables=("rgcl_optimum",),
        figures=("rgcl_contours", "rgcl_optimal_p")),
    "ablations": Report(
        "iSogCLR Tables 8/9, Figures 7-9; SogCLR Table 8",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),  # Table 1's seed spread is the noise yardstick
        params=("profile", "table1", "methods.isogclr", "methods.sogclr"),
        paper=("isogclr_table8", "isogclr_table9", "sogclr_table8"),
        tables=("ablation_rho", "ablation_tau", "ablation_tau_distributions", "ablation_gamma"),
        figures=("ablation_tau_rho", "ablation_tau_distributions"),
        trains=("study_rho", "study_tau", "study_tau_init", "study_gamma")),
    "small_batch": Report(
        "SogCLR Tables 2/3/6; EMC2 curves and burn-in",
        {**_RUNS, "studies_dir": "studies"}, reads=("runs",),  # runs: the no-learning floor (references)
        params=("profile", "references"), paper=("sogclr_batch",),
        tables=("batch_size", "batch_headline", "small_batch", "standard_batch", "emc2_burn_in"),
        figures=("emc2_curves",),
        trains=("study_batch_size", "study_small_batch", "study_standard_batch", "study_burn_in", "study_batch_headline",
                "study_batch_headline_steps")),
    "emc2_convergence": Report(
        "EMC2 Fig. 7 (exact gradient norm) and Fig. 3 (pre-computed views): reads emc2_convergence_runs",
        {"params_path": "params.yaml", "runs_dir": "runs_convergence", "reports_dir": "reports"},
        reads=("runs_convergence",), params=("profile", "emc2_convergence"),
        tables=("emc2_convergence", "emc2_augmentations"),
        figures=("emc2_convergence",), trains=("emc2_convergence_runs",)),
    "budget_ladder": Report(
        "iSogCLR Table 1 and Sec. 6.3 against the budget: the ladders (studies with report: budget_ladder), "
        "and the selection on the validation split",
        {**_RUNS, "studies_dir": "studies", "tuning_dir": "tuning"}, reads=("runs",), selection="tuning",
        params=("profile", "table1", "table1_real", "references", "methods", "train.epochs",
                "train.epochs_by_dataset"),
        paper=("isogclr_table1",),
        tables=("budget_ladder", "budget_ladder_references", "tuning_selection"),
        figures=("budget_ladder",), trains=("tune", "study_ladder_synth10_lt")),
    "bimodal": Report(
        "iSogCLR Tables 2/5-7, Figures 1 (right), 6/10/11, appendix C.3; SogCLR Table 4",
        {"params_path": "params.yaml", "runs_dir": "runs_bimodal", "studies_dir": "studies", "reports_dir": "reports",
         "tuning_dir": "tuning"},
        reads=("runs_bimodal", "data/synthetic_pairs.json"),  # the images of the tau-extremes figure
        selection="bimodal_tuning",
        params=("profile", "bimodal", "methods.clip_individual_tau", "methods.clip_large_tau"),
        paper=("isogclr_table2", "sogclr_table4"),
        tables=("tuning_selection_bimodal", "bimodal_retrieval", "bimodal_zeroshot", "sogclr_table4_epochs",
                "bimodal_tau_frequency", "bimodal_tau_bounds", "bimodal_rho_sweep"),
        figures=("sogclr_table4_epochs", "bimodal_convergence", "bimodal_individual_tau", "bimodal_tau_extremes",
                 "bimodal_rho_sweep"),
        trains=("train_pretrain", "tune_bimodal", "train_bimodal", "train_bimodal_side", "study_bimodal_epochs",
                "study_rho_pairs", "study_rho_pairs_objects")),
    "testbed": Report(
        "How much the mini runs learn (reference rows, the calibration's thresholds) and the central verdicts "
        "before and after the calibration, SogCLR/iSogCLR at SimCLR's gradient scale, the seeds allocated by power, "
        "keyed draws, the testbed switch (LARS lr 1.2 with the clip) against e51a3ce's verdicts at lr 2.0, and what "
        "pairing by seed buys",
        {**_RUNS, "studies_dir": "studies"},
        reads=("runs", "studies", "reports/benchmarks/calibration.csv",
               "reports/testbed",  # the historical verdicts_<commit>.csv and the stage record, read from their folder
               *(f"reports/verdicts/{name}.csv" for name in ("table1_unimodal", "temperature_vs_frequency",
                                                              "budget_ladder", "bimodal", "ablations", "small_batch",
                                                              "emc2_convergence", "feature_tsne", "rgcl_analysis"))),
        params=("profile", "references", "table1", "table1_real", "studies"),
        tables=("testbed_references", "testbed_verdicts_before_after", "testbed_verdicts_gradient_scale",
                "testbed_verdicts_nine_seeds", "testbed_verdicts_hour", "testbed_verdicts_keyed",
                "testbed_verdicts_one_seed", "testbed_verdicts_rules", "testbed_status_moved",
                "testbed_verdicts_last_repro", "testbed_pairing"),
        figures=("testbed_references",)),
}

