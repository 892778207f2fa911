"""A run file that cannot be read (cut short, a wrong column, a non-finite value) is named with its line and what was
expected, and stops ``python -m isogclr report`` before its notebook runs; every committed run file passes."""

from __future__ import annotations

import json
import shutil

import pytest

from isogclr.cli import main
from isogclr.reports.notebook_build import notebook_text
from isogclr.reports.report_table import REPORTS
from isogclr.reports.runfiles import RunFileError, check_paths, report_paths, run_files

from .conftest import ROOT

RUN = "isogclr-synth10_lt-s3"  # a committed image run with per-sample temperatures
PAIRS_RUN = "isogclr_bimodal-s0"  # a committed image-text run with per-pair temperatures


@pytest.fixture
def runs(tmp_path):
    """A copy of two committed run folders and the convergence study, in ``tmp_path/runs``."""
    shutil.copytree(ROOT / "runs" / RUN, tmp_path / "runs" / RUN)
    shutil.copytree(ROOT / "runs_bimodal" / PAIRS_RUN, tmp_path / "runs" / PAIRS_RUN)
    shutil.copytree(ROOT / "runs_convergence", tmp_path / "runs" / "convergence")
    return tmp_path / "runs"


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def _problems(*paths) -> str:
    with pytest.raises(RunFileError) as err:
        check_paths(paths)
    return str(err.value)


def test_a_valid_copy_passes(runs):
    checked = check_paths([runs])
    names = {p.relative_to(runs).as_posix() for p in run_files([runs])}
    assert checked == len(names) and {f"{RUN}/artifacts/tau.csv", f"{PAIRS_RUN}/artifacts/tau.csv",
                                      f"{RUN}/metrics.json", "convergence/convergence.csv"} <= names
    assert not any("/dvclive/" in name for name in names)  # reports do not read DVCLive's curves


def test_the_issues_tau_csv_cut_short_with_a_stray_line_is_named_with_its_line(runs):
    tau = runs / RUN / "artifacts" / "tau.csv"
    lines = _lines(tau)
    cut = lines[631][:lines[631].rindex(",") + 4]  # line 632 cut inside its temperature, a line appended
    tau.write_text("".join(lines[:631]) + cut + "a,b,c,d\n")
    message = _problems(runs)
    assert f"{tau}:632: expected 5 fields (index,source_index,label,superclass,tau), found 8" in message
    assert message.startswith("1 run file cannot be read")


def test_a_file_cut_short_mid_line_is_named_at_its_last_line(runs):
    tau = runs / RUN / "artifacts" / "tau.csv"
    text = tau.read_text()
    tau.write_text(text[:text.index("\n", 5000) + 4])  # a row cut after its first characters, no line end
    last = tau.read_text().count("\n") + 1
    message = _problems(tau)
    assert f"{tau}:{last}: expected 5 fields" in message
    assert f"{tau}:{last}: expected a line end at the end of the file, found none (the file is cut short)" in message


def test_a_missing_row_shows_in_the_counted_index(runs):
    tau = runs / RUN / "artifacts" / "tau.csv"
    lines = _lines(tau)
    tau.write_text("".join(lines[:100] + lines[101:]))  # data row 99 (line 101) removed
    assert f"{tau}:101: column index: expected 99 (the rows are numbered 0, 1, 2, ...), found 100" in _problems(tau)


@pytest.mark.parametrize(("run", "file", "old", "missing"), [
    (RUN, "artifacts/tau.csv", "tau", "tau"),
    (PAIRS_RUN, "artifacts/tau.csv", "tau_text", "tau_text"),
    (RUN, "train_log.csv", "loss", "loss"),
])
def test_a_renamed_column_names_the_column_expected(runs, run, file, old, missing):
    path = runs / run / file
    lines = _lines(path)
    header = lines[0].rstrip("\n").split(",")
    header[header.index(old)] = f"{old}_renamed"
    path.write_text(",".join(header) + "\n" + "".join(lines[1:]))
    message = _problems(path)
    assert f"{path}:1: expected the columns " in message and f"(missing {missing})" in message


def test_a_dropped_column_leaves_every_row_with_one_field_too_many_named_once_per_file(runs):
    log = runs / RUN / "train_log.csv"
    lines = _lines(log)
    log.write_text(lines[0].replace("lr,", "") + "".join(lines[1:]))  # the header lost a column, the rows did not
    message = _problems(log)
    assert f"{log}:1: expected the columns epoch,step,samples_seen,loss,lr,grad_norm (and maybe more)" in message
    assert "(missing lr)" in message and f"{log}:2:" not in message  # rows are not read against a wrong header


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5", "x"])
def test_a_non_finite_or_non_positive_temperature_names_its_line(runs, value):
    tau = runs / RUN / "artifacts" / "tau.csv"
    lines = _lines(tau)
    lines[9] = lines[9].rsplit(",", 1)[0] + f",{value}\n"
    tau.write_text("".join(lines))
    assert f"{tau}:10: column tau: expected a finite positive number, found '{value}'" in _problems(tau)


def test_a_non_finite_loss_in_the_log_names_its_line(runs):
    log = runs / RUN / "train_log.csv"
    lines = _lines(log)
    fields = lines[3].split(",")
    fields[lines[0].split(",").index("loss")] = "nan"
    lines[3] = ",".join(fields)
    log.write_text("".join(lines))
    assert f"{log}:4: column loss: expected a finite number, found 'nan'" in _problems(log)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "31.2"])
def test_a_metric_that_is_not_a_finite_number_names_its_key_and_line(runs, value):
    path = runs / RUN / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["top1"] = value
    path.write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    line = next(i for i, text in enumerate(_lines(path), 1) if '"top1":' in text)
    assert line > 1 and f"{path}:{line}: key 'top1': expected a finite number" in _problems(path)


def test_a_missing_metric_and_a_missing_config_key_are_named(runs):
    metrics, config = runs / RUN / "metrics.json", runs / RUN / "artifacts" / "config.json"
    data = json.loads(metrics.read_text())
    del data["top1"]
    metrics.write_text(json.dumps(data, indent=2) + "\n")
    data = json.loads(config.read_text())
    del data["method"]["kwargs"]
    config.write_text(json.dumps(data, indent=2) + "\n")
    message = _problems(runs)
    assert message.startswith("2 run files cannot be read")  # every bad file, not the first only
    assert f"{metrics}:1: expected the key 'top1' of an image run's metrics" in message
    assert f"{config}:1: expected the key 'method.kwargs' of a run's resolved config" in message


def test_a_json_file_cut_short_is_named_with_its_line(runs):
    knobs = runs / PAIRS_RUN / "knobs.json"
    text = knobs.read_text()
    knobs.write_text(text[:len(text) // 2])
    message = _problems(runs)
    assert f"{knobs}:" in message and "expected JSON" in message and "(the file is cut short)" in message


def test_a_file_without_a_schema_is_checked_for_its_shape(tmp_path):
    table = tmp_path / "verdicts.csv"
    table.write_text('claim,verdict\n"a quoted, two-line\nclaim",holds\nb,fails,extra\n')  # lines as an editor counts
    assert f"{table}:4: expected 2 fields (claim,verdict), found 3" in _problems(tmp_path)


def test_many_bad_lines_of_one_file_are_counted_not_listed(runs):
    tau = runs / RUN / "artifacts" / "tau.csv"
    lines = _lines(tau)
    tau.write_text(lines[0] + "".join(line.replace(",", ";") for line in lines[1:11]) + "".join(lines[11:]))
    message = _problems(tau)
    assert [n for n in range(1, 12) if f"{tau}:{n}:" in message] == [2, 3, 4]
    assert f"{tau}: ... and 7 more problems" in message


def test_report_paths_follow_the_papermill_folders_and_the_studies_naming_the_report(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("studies:\n  s1: {report: ablations}\n  s2: {report: [bimodal, ablations]}\n"
                      "  s3: {report: small_batch}\n")
    paths = report_paths("ablations", {"params_path": str(params), "runs_dir": str(tmp_path / "r"),
                                       "studies_dir": str(tmp_path / "st")})
    assert paths[0] == tmp_path / "r" and {tmp_path / "st" / "s1", tmp_path / "st" / "s2"} <= set(paths)
    assert tmp_path / "st" / "s3" not in paths and report_paths("not_a_report", {}) == []


def test_every_committed_run_file_passes(monkeypatch):
    """Every run file the committed reports read passes (its time is a benchmark's business, not a test's)."""
    monkeypatch.chdir(ROOT)
    paths = {p for name, report in REPORTS.items() for p in report_paths(name, dict(report.papermill))}
    assert check_paths(sorted(paths)) > 1000


def test_an_image_text_candidates_validation_metrics_are_read_as_such(tmp_path):
    """The image-text selection's candidates (tuning/<method>/runs/, present after a smoke or fresh repro) report
    recall on held-out training pairs, not top-1: read as that kind of metrics, a non-finite value still named."""
    run = tmp_path / "tuning" / "clip" / "runs" / "c0-s0"
    run.mkdir(parents=True)
    keys = ("validation_ir_r1", "validation_ir_r10", "validation_ir_r5", "validation_tr_r1", "validation_tr_r10",
            "validation_tr_r5")
    (run / "metrics.json").write_text(json.dumps(dict.fromkeys(keys, 2.3256), indent=2) + "\n")
    assert check_paths([tmp_path / "tuning"]) == 1
    (run / "metrics.json").write_text(json.dumps({**dict.fromkeys(keys, 2.3256), "validation_tr_r1": None}) + "\n")
    with pytest.raises(RunFileError, match="validation_tr_r1"):
        check_paths([tmp_path / "tuning"])


def test_the_report_command_stops_before_its_notebook_runs(tmp_path, runs, monkeypatch, capsys):
    """A bad run file: exit 1 naming it, no notebook run and no reports folder; the valid copy: the notebook runs."""
    import isogclr.commands
    import isogclr.reports.notebook_run

    name = "temperature_vs_frequency"
    notebooks = tmp_path / "notebooks"
    (notebooks / "src").mkdir(parents=True)
    (notebooks / "src" / f"{name}.py").write_text("# %%\nx = 1\n")
    (notebooks / f"{name}.ipynb").write_text(notebook_text(notebooks / "src" / f"{name}.py"))
    executed = []
    monkeypatch.setattr(isogclr.reports.notebook_run, "execute_report", lambda *args: executed.append(args))
    monkeypatch.setattr(isogclr.commands, "_restore_generated_data", lambda params_path: None)
    argv = ["report", name, "--notebooks", str(notebooks), "--reports", str(tmp_path / "reports"),
            "-p", "params_path", str(ROOT / "params.yaml"), "-p", "runs_dir", str(runs)]

    tau = runs / RUN / "artifacts" / "tau.csv"
    tau.write_text("".join(_lines(tau)[:631]) + "stray,line\n")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"error: report {name} not run: 1 run file cannot be read:\n  {tau}:632: expected 5 fields" in err
    assert executed == [] and not (tmp_path / "reports").exists()

    shutil.copy(ROOT / "runs" / RUN / "artifacts" / "tau.csv", tau)
    assert main(argv) == 0 and len(executed) == 1 and executed[0][2]["runs_dir"] == str(runs)
