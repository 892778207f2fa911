"""The words every report page shares: what "settled" and a precondition mean (one snippet, shown on every page
and in the index, so that no page defines them differently), and the project's terms, explained on the pages that
use them."""

from __future__ import annotations

from ..dataset_specs import SPECS
from .rerun import SETTLED

SETTLED_NOTE = (
    "Settled: a supported or contradicted verdict is settled when a rerun on a machine of another type (another "
    "draw of the training noise at the same seeds) would give the same status with predictive probability at "
    f"least {SETTLED:g} (p_rerun: a posterior predictive that carries the uncertainty of the seeds' spread, "
    "isogclr.analysis.rerun); simulated, 97.5% of the verdicts it calls settled at 7 seeds keep their status, and "
    "no verdict resting on 3 seeds can be settled. An inconclusive verdict says instead how many seeds would "
    "answer it (at the paper's effect, else at the one observed).")
PRECONDITION_NOTE = (
    "Not testable (what happened (measured value, needs the amount)): the runs are outside the regime the claim "
    "speaks of, as "
    "measured on them (isogclr.analysis.preconditions): the knob did not move the state it drives, the runs did "
    "not reach the end state the claim is about, the paper's premise does not hold, or the runs did not learn "
    "(at the no-learning floor) or leave no room for the paper's effect (at the ceiling).")
MULTIPLICITY_NOTE = (
    "Multiplicity: beside each status, the status under a Holm adjustment across every claim tested (each counted "
    "once): a supported or contradicted verdict keeps its status when its p value, times the number of claims "
    "still in play, stays below 0.05 (isogclr.analysis.multiplicity).")

# the project's words a page may use, each explained where it appears (:func:`glossary`): term -> meaning
GLOSSARY = {
    "paired by seed": "two methods run with the same seed share the initial weights, the data order and every "
                      "augmentation draw; a comparison's effect is the mean over seeds of the per-seed difference",
    "keyed": "keyed draws: every augmentation draw is a function of (seed, epoch, sample or pair index, view), so a "
             "sample's views do not depend on the process, the loader workers or where a run resumed "
             "(isogclr.data.keyed)",
    "loss_over_tau": "SogCLR's and iSogCLR's objective divided by tau (each term F_i / tau_i): their gradient on "
                     "SimCLR's scale, so that one learning rate, calibrated on SimCLR, serves all three "
                     "(docs/losses.md, \"The gradient's scale\")",
    "side_seeds": "the seeds of the image-text side methods (CyCLIP, CLIP with individual or large tau), paired by "
                  "seed with the central runs",
    "stage-minutes": "a pipeline stage's wall minutes, summed over stages; two stages run at a time, so the "
                     "schedule takes half of them",
}

_DECIDED = ("supported", "contradicted")


def glossary(text: str) -> str:
    """"Terms: ..." for every :data:`GLOSSARY` term that ``text`` (a page) uses, "" when it uses none."""
    used = [f"{term}: {meaning}" for term, meaning in GLOSSARY.items() if term in text]
    return "Terms. " + "; ".join(used) + "." if used else ""


def number_format(*numbers: object) -> str:
    """One format for an effect and its bounds, by the largest in size: 2 decimals from 1 (points), 3 from 0.01
    (a correlation, a temperature), else 3 significant digits (a slope of tau per log unit: +4.87e-04)."""
    top = max((abs(float(x)) for x in numbers if x != "" and x is not None), default=0.0)
    return "+.2f" if top >= 1 else "+.3f" if top >= 0.01 or top == 0 else "+.2e"


def number(x: float, spec: str | None = None) -> str:
    """A signed effect or bound in ``spec`` (default :func:`number_format` of ``x`` alone)."""
    return format(float(x), spec or number_format(x))


def effect_text(effect: float, low: object = "", high: object = "") -> str:
    """"-1.69 [-3.17, -0.20]": an effect with its interval, the bounds in the effect's format ("" = no bound)."""
    spec = number_format(effect, low, high)
    text = number(effect, spec)
    return text + (f" [{number(low, spec)}, {number(high, spec)}]" if low != "" and high != ""
                   and low is not None and high is not None else "")


def _listed(rows: list, most: int, paper: bool = False) -> str:
    """"claim +1.10 [+0.20, +2.00]; ..." for up to ``most`` rows (the paper's effect after each when ``paper``),
    then "and N more"."""
    def one(r) -> str:  # noqa: ANN001
        runs = f" ({r.runs})" if getattr(r, "runs", "") else ""
        said = f"{r.claim}{runs} {effect_text(r.effect, r.ci_low, r.ci_high)}"
        return said + (f" (paper {number(float(r.paper_effect))})" if paper and r.paper_effect != "" else "")
    shown = "; ".join(one(r) for r in rows[:most])
    return shown + (f"; and {len(rows) - most} more" if len(rows) > most else "")


def bottom_line(verdicts, most: int = 3) -> str:  # noqa: ANN001 (a verdict table, "" where a row has no number)
    """"Bottom line: " and :func:`bottom_sentences`, or "no claim."."""
    return "Bottom line: " + (" ".join(bottom_sentences(verdicts, most)) or "no claim.")


def bottom_sentences(verdicts, most: int = 3) -> list[str]:  # noqa: ANN001 (a verdict table, as bottom_line's)
    """The bottom line of a report in words, from its verdict table (the CSV's columns; ``holm`` when the index
    has adjusted them): what points against the paper and what for it, each with its effect and 95% interval;
    whether the open rows exclude the paper's effect (:func:`~isogclr.analysis.verdicts.outcome`) or could not tell
    it from 0; and why the rest is not testable. E.g. "Against the paper, 4 rows (each interval below 0 and below
    the paper's effect; 0 settled): A -1.69 [-3.17, -0.20]; ... For the paper, 3 rows: ... Open, 5 inconclusive: 0
    exclude the paper's effect; 5 hold both 0 and it, e.g. B -0.30 [-1.92, +1.31] (paper +0.19). Not testable, 5:
    3 no learning, 2 the runs did not learn."."""
    rows = list(verdicts.itertuples())
    said: list[str] = []
    holm = [r for r in rows if getattr(r, "holm", "") and r.holm != r.status and r.status in _DECIDED]
    for status, head in (("contradicted", "Against the paper"), ("supported", "For the paper")):
        mine = [r for r in rows if r.status == status]
        if not mine:
            continue
        settled = sum(r.qualifier == "settled" for r in mine)
        below = all(r.outcome == "excluded" and r.paper_effect != "" for r in mine)  # each has a paper number
        why = ("each interval below 0" + (" and below the paper's effect" if below else "") if status == "contradicted"
               else "each interval above 0")
        kept = len(mine) - sum(r in holm for r in mine)
        holm_said = f"; {kept} of {len(mine)} {status} under Holm's adjustment" if kept < len(mine) else ""
        said.append(f"{head}, {len(mine)} row{'s' * (len(mine) != 1)} ({why}; {settled} settled{holm_said}): "
                    f"{_listed(mine, max(most, 4))}.")
    open_ = [r for r in rows if r.status == "inconclusive"]
    if open_:
        excluded = [r for r in open_ if r.outcome == "excluded"]
        neither = [r for r in open_ if r.outcome != "excluded"]
        parts = ([f"{len(excluded)} exclude{'s' * (len(excluded) == 1)} the paper's effect "
                  f"({_listed(excluded, 2, paper=True)})"] if excluded
                 else ["none excludes the paper's effect"])
        paper = [r for r in neither if r.paper_effect != ""]
        if paper:
            parts.append(f"{len(paper)} {'holds' if len(paper) == 1 else 'hold'} both 0 and the paper's effect, "
                         f"e.g. {_listed(paper, 2, paper=True)}")
        if len(paper) < len(neither):
            rest = [r for r in neither if r.paper_effect == ""]
            parts.append(f"{len(rest)} without a paper number {'holds' if len(rest) == 1 else 'hold'} 0, "
                         f"e.g. {_listed(rest, 1)}")
        said.append(f"Open, {len(open_)} inconclusive: " + "; ".join(parts) + ".")
    untestable = [r for r in rows if r.status == "not testable"]
    if untestable:
        reasons: dict[str, int] = {}
        for r in untestable:
            reason = (r.qualifier or "see its evidence").split(" (")[0]
            reasons[reason] = reasons.get(reason, 0) + 1
        said.append(f"Not testable, {len(untestable)}: " + ", ".join(f"{n} {why}" for why, n in reasons.items()) + ".")
    return said


def train_images(params: dict, dataset: str) -> tuple[int, int, int]:
    """``(training images, classes, pixels per side)`` of a generated or mini dataset of ``params`` (``data:``):
    synth10 / synth100 take ``per_class`` images of each class, fashion_mnist_mini its ``per_class``; a long-tailed
    variant (:data:`isogclr.dataset_specs.SPECS`) keeps int(n (1/ratio)^(r / (C - 1))) of the r-th class, as
    :func:`isogclr.data.base.long_tailed_positions` does."""
    data = params.get("data") or {}
    long_tailed = SPECS[dataset] if dataset in SPECS and SPECS[dataset].balanced else None
    base = dataset if long_tailed is None else long_tailed.balanced
    if base in SPECS and SPECS[base].classes is not None:  # a generated set keyed by its class count
        classes = SPECS[base].classes
        per_class, side = int(data["synthetic"]["per_class"][classes][0]), int(data["synthetic"]["image_size"])
    elif base == "fashion_mnist_mini":
        classes, per_class = 10, int(data["fashion_mnist_mini"]["per_class"][0])
        side = int(data["fashion_mnist_mini"]["image_size"])
    else:
        raise ValueError(f"no image count for dataset {dataset!r}")
    if long_tailed is not None:
        ratio = 1.0 / long_tailed.imbalance_ratio
        return sum(int(per_class * ratio ** (r / (classes - 1))) for r in range(classes)), classes, side
    return per_class * classes, classes, side


def minutes_clause(minutes: float | None, commit: str = "") -> str:
    """"; N CPU minutes of training (...)" for a sentence of scale: ``minutes`` the wall minutes of the page's
    training stages in the forced repro at ``commit`` that made its runs (:func:`isogclr.reports.stage_minutes.
    training_minutes`), two stages at a time on 2 cores, so about one core each; "" when None (not timed)."""
    if minutes is None:
        return ""
    shown = f"{minutes:.0f}" if minutes >= 10 else f"{minutes:.1f}"
    at = f" of {commit}" if commit else ""
    return f"; {shown} CPU minutes of training (its training stages in the forced repro{at} that made these runs, " \
           "two at a time on 2 cores)"


def scale_sentence(params: dict, epochs: dict[str, int], seeds: int, extra: str = "", minutes: float | None = None,
                   commit: str = "") -> str:
    """One sentence of scale, "Scale: ...": per dataset its training images, classes, pixels and epochs, the encoder
    (``model.encoder``: arch and width), the seeds; ``extra`` is appended (e.g. a study's batch sizes), then the
    training's CPU minutes (:func:`minutes_clause`)."""
    encoder = (params.get("model") or {}).get("encoder") or {}
    sets = "; ".join(f"{d}: {n:,} training images of {c} classes, {side}x{side} pixels, {e} epochs"
                     for d, e in epochs.items() for n, c, side in [train_images(params, d)])
    return (f"Scale: {sets}; encoder {encoder.get('arch', '?')} width {encoder.get('width', '?')} trained from "
            f"scratch on CPU; {seeds} seeds{'; ' + extra if extra else ''}{minutes_clause(minutes, commit)}.")


def pairs_scale_sentence(params: dict, epochs: int, batch: int, seeds: int, minutes: float | None = None,
                         commit: str = "") -> str:
    """The image-text reports' sentence of scale: the generated pairs (``data.synthetic_pairs``) and the image
    encoder (``bimodal.image_encoder``), then the training's CPU minutes (:func:`minutes_clause`)."""
    pairs = (params.get("data") or {}).get("synthetic_pairs") or {}
    encoder = ((params.get("bimodal") or {}).get("image_encoder")) or {}
    init = "pre-trained with labels on synth100" if encoder.get("init") else "from scratch"
    return (f"Scale: {int(pairs.get('num_pairs', 0)):,} generated image-text pairs of {pairs.get('num_clusters')} "
            f"semantic clusters, {pairs.get('image_size')}x{pairs.get('image_size')} pixels; image encoder "
            f"{encoder.get('arch', '?')} width {encoder.get('width', '?')} {init}; {epochs} epochs at batch {batch} "
            f"on CPU; {seeds} seeds{minutes_clause(minutes, commit)}.")
