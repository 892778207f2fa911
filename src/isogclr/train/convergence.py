"""EMC2's convergence study (Yau et al., 2024, Sec. 4.5 / Figure 7) and its pre-computed augmentation study (Figure 3).

A pipeline stage (``python -m isogclr convergence --out runs_convergence``, :func:`write_study`) trains the
study's runs and writes their curves; the report ``emc2_convergence`` only reads them. Its settings are
``emc2_convergence`` in params.yaml (:func:`isogclr.config.convergence.convergence_config`). Each run is a
:class:`_ConvergenceTask` trained by the project's one engine, :func:`isogclr.train.engine.fit`
(checkpointed at every epoch's end and resumable).

**The finite problem.** Take the first ``num_images`` images of a dataset (EMC2: the first 500
of STL-10) and pre-compute ``num_augmentations`` = A fixed augmented views of each, once, from a
keyed generator (EMC2: A = 2). The positive pairs are two distinct views of one image, the
negatives of an anchor are all views of every other image. On this finite set the global
contrastive objective and its gradient can be computed exactly by full passes:

    F(w) = 1/(nA) sum_{i,a} [ -mean_{a' != a} z_ia . z_ia'
                              + tau log( 1/((n-1)A) sum_{j != i, b} exp(z_ia . z_jb / tau) ) ]

which is :func:`isogclr.eval.convergence.global_contrastive_loss` for A = 2 (that function pairs view
a with view a+1 mod A, the same thing when A = 2); for A > 2 the positive term averages over every
other view, matching the training sampler below (:func:`isogclr.eval.convergence.all_pairs_contrastive_loss`).

**Scale convention.** EMC2 writes the loss with an inverse temperature beta (its eq. 1),
L(w) = E[-beta z.z+ + log sum_neg exp(beta z.z)], so L = F / tau + log((n-1)A) with tau = 1/beta and
||grad L||^2 = ||grad F||^2 / tau^2. We report F and ||grad F||^2 (the project's
:mod:`isogclr.eval.convergence`), column ``grad_norm_sq``; ratios between methods are the same on
either scale. Every method is trained on the *same* scale, L's: SimCLR (1/tau) and EMC2 (beta) already
are; SogCLR's value is F-scaled (tau log g), so its loss is multiplied by 1/tau (``loss_scale``).
Otherwise SogCLR would take steps tau = 0.2 times smaller at the same learning rate.

**Training.** Every method starts from the same initial weights (``seed``) and sees the same
sequence of batches and view pairs: each step takes ``batch_size`` images (a fresh permutation
per epoch, the last incomplete batch dropped) and for each image two distinct views out of its A
pre-computed ones, uniformly; the two views are passed in increasing view-id order, so SogCLR's
per-(sample, view-slot) moving average u tracks one fixed view per slot when A = 2. EMC2 gets each
view's augmentation id (one Markov chain per (image, view), its finite-augmentation mode). Plain SGD
(EMC2's Table 3 for the STL-10 subset: batch 4, learning rate 1e-3, weight decay 1e-4, beta 5, P = 3;
we use batch 8 and a larger rate to move within a CPU budget, see :class:`ConvergenceConfig`;
EMC2's burn-in is the loss's default P = b - 1, its R = 2b - 2) at a constant learning rate. BatchNorm trains in
train mode; F and its gradient are evaluated in eval mode (running statistics), so F is a
deterministic function of the weights. The weight decay is not part of F.

**Infinite augmentation** (Figure 3's reference): EMC2 in its default mode, two fresh SimCLR views of
each batch image at every step (keyed by (seed, step, image, view), so the run is reproducible) and one Markov chain per
image. Its F is evaluated on the same fixed A-view problem as the others; in the tables its
``num_augmentations`` is 0 (:data:`FRESH_VIEWS`).

Negative Cache is not run here: its objective uses one cached feature per image (EMC2's variant
with un-augmented negatives), which is not F, and refreshing the cache at EMC2's rate (rho = 0.1,
50 images per step for n = 500) would cost several times a training step.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .. import epoch_times, machine
from ..config.convergence import (
    AUGMENTATION_METHODS,
    CONVERGENCE_METHODS,
    FRESH_VIEWS,
    REFERENCE_METHODS,
    ConvergenceConfig,
    augmentation_runs,
    convergence_config,
    convergence_run_name,
    convergence_study,
)
from ..data import keyed, load_dataset
from ..data.augment import SIMCLR_DRAWS, AugmentConfig, simclr_augmentation, to_float
from ..eval.convergence import exact_objective
from ..eval.knn import knn_accuracy
from ..eval.linear_probe import extract_features
from ..io import save_json, save_text
from ..losses.loss_table import build_loss
from ..models import ContrastiveModel
from .engine import fit
from .optim import OptimConfig, build_optimizer

CURVE_COLUMNS = ["method", "num_augmentations", "epoch", "step", "samples_seen", "objective", "grad_norm_sq"]


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` (0: unchanged) for the block, then restored."""
    previous = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class _Projection(nn.Module):
    """images -> projections (what the losses and F see) of a :class:`ContrastiveModel`."""

    def __init__(self, model: ContrastiveModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)[1]


def precompute_views(images: torch.Tensor, num_augmentations: int, augment: AugmentConfig,
                     seed: int) -> torch.Tensor:
    """(n, A, 3, H, W) float views: A SimCLR augmentations of each uint8 image, drawn once: view ``a`` of image
    ``i`` from the key ``(seed, epoch 0, i, a)`` (:mod:`isogclr.data.keyed`), so the first A views of a larger A
    are the views of A."""
    transform = simclr_augmentation(augment, images.shape[-1])
    x, index = to_float(images), range(len(images))
    with torch.no_grad():
        views = torch.stack([transform(x, keyed.uniforms(seed, 0, index, a, SIMCLR_DRAWS))
                             for a in range(num_augmentations)], dim=1)
    return views.contiguous()


def build_method(method: str, cfg: ConvergenceConfig, num_images: int,
                 num_augmentations: int) -> tuple[nn.Module, float, bool]:
    """(loss, loss_scale, takes_augmentation_ids): every method's gradient estimates grad L = grad F / tau.

    ``num_augmentations`` = :data:`FRESH_VIEWS`: EMC2 with one chain per image (fresh views every step).
    """
    if method == "emc2" and num_augmentations == FRESH_VIEWS:
        return build_loss("emc2", num_images, beta=cfg.beta, seed=cfg.seed), 1.0, False
    if method == "simclr":
        return build_loss("simclr", num_images, tau=cfg.tau), 1.0, False
    if method == "sogclr":  # value tau log g - z.z+: F's scale; 1/tau puts it on L's
        return build_loss("sogclr", num_images, tau=cfg.tau, gamma=cfg.gamma), cfg.beta, False
    if method == "emc2":
        return build_loss("emc2", num_images, beta=cfg.beta, num_augmentations=num_augmentations,
                          seed=cfg.seed), 1.0, True
    raise ValueError(f"methods: unknown method {method!r} (known: {CONVERGENCE_METHODS})")


def _view_pairs(generator: torch.Generator, count: int, num_augmentations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two distinct view ids per image, uniformly over unordered pairs, returned in increasing order."""
    first = torch.randint(0, num_augmentations, (count,), generator=generator)
    second = (first + 1 + torch.randint(0, num_augmentations - 1, (count,), generator=generator)) % num_augmentations
    return torch.minimum(first, second), torch.maximum(first, second)


def _fresh_pair(transform: nn.Module, images: torch.Tensor, index: torch.Tensor, seed: int,
                step: int) -> torch.Tensor:
    """Two new views of each image, (2B, 3, H, W): view ``v`` of image ``i`` at step ``s`` from the key
    ``(seed, s + 1, i, v)`` (:mod:`isogclr.data.keyed`; 0 is the pre-computed views' epoch)."""
    x = to_float(images)
    with torch.no_grad():
        return torch.cat([transform(x, keyed.uniforms(seed, step + 1, index, v, SIMCLR_DRAWS)) for v in (0, 1)])


class _ConvergenceTask:
    """One method's run of the study as an engine :class:`~isogclr.train.engine.Task`.

    Builds the model from ``cfg.seed`` (the same initial weights for every method), the method's loss
    (:func:`build_method`) and plain SGD, run by :func:`~isogclr.train.engine.fit` at a constant rate. Each
    epoch draws a permutation of the n images and each step two distinct view ids per batch image from one
    seeded generator (or, ``fresh_from``, two fresh views of the batch images). Its columns are the exact
    ``objective`` F and ``grad_norm_sq`` ||grad F||^2 on the fixed ``views``: at epoch 0 (``initial_columns``),
    every ``eval_every`` epochs and at the last. Its checkpointed state is the generator's and torch's RNG
    state, so a run resumed at an epoch's end gives the curve of an uninterrupted run.
    """

    def __init__(self, method: str, views: torch.Tensor, cfg: ConvergenceConfig, eval_every: int,
                 record_views: bool, fresh_from: torch.Tensor | None) -> None:
        n, a = views.shape[:2]
        self.method, self.views, self.cfg, self.eval_every, self.fresh_from = method, views, cfg, eval_every, fresh_from
        self.num_augmentations = a if fresh_from is None else FRESH_VIEWS
        self.run_id, self.epochs, self.batch_size = f"convergence {self.name}", cfg.epochs, cfg.batch_size
        self.steps_per_epoch = n // cfg.batch_size  # the last incomplete batch is dropped
        torch.manual_seed(cfg.seed)  # the same initial weights for every method
        self.model = ContrastiveModel(cfg.encoder, cfg.head)
        self.projection = _Projection(self.model)
        self.loss_fn, self.scale, self.takes_ids = build_method(method, cfg, n, self.num_augmentations)
        self.transform = simclr_augmentation(cfg.augment, views.shape[-1]) if fresh_from is not None else None
        self.optimizer = build_optimizer(self.model, OptimConfig(
            name="sgd", lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum, warmup_epochs=0.0),
            cfg.batch_size)
        self.scaler = torch.amp.GradScaler("cpu", enabled=False)
        self.generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 17)  # batches and view pairs
        self.view_ids: list[tuple[torch.Tensor, ...]] | None = [] if record_views else None

    @property
    def name(self) -> str:
        """``<method>-A<num_augmentations>-s<seed>`` (A0: fresh views): the run's folder name in the timing record."""
        return convergence_run_name(self.method, self.num_augmentations, self.cfg.seed)

    def _evaluate(self) -> dict[str, float]:
        objective, grad_norm_sq = exact_objective(self.projection, self.views, self.cfg.tau, self.cfg.eval_chunk)
        return {"objective": objective, "grad_norm_sq": grad_norm_sq}

    def initial_columns(self) -> dict[str, float]:
        return self._evaluate()

    def begin_epoch(self, epoch: int, start: int) -> None:
        if start:  # fit checkpoints at epoch ends only (checkpoint_every=0): the generator resumes there
            raise ValueError(f"{self.run_id}: cannot resume inside an epoch (batch {start})")
        self.epoch, self.order = epoch, torch.randperm(len(self.views), generator=self.generator)

    def loss(self, b: int) -> torch.Tensor:
        index = self.order[b * self.batch_size:(b + 1) * self.batch_size]
        aug1, aug2 = _view_pairs(self.generator, len(index), self.views.shape[1])
        if self.view_ids is not None:
            self.view_ids.append((index.clone(), aug1.clone(), aug2.clone()))
        if self.transform is not None:
            step = self.epoch * self.steps_per_epoch + b
            x = _fresh_pair(self.transform, self.fresh_from[index], index, self.cfg.seed, step)
        else:
            x = torch.cat([self.views[index, aug1], self.views[index, aug2]])
        _, proj = self.model(x)
        z1, z2 = F.normalize(proj, dim=1).chunk(2)
        kwargs = {"aug1": aug1, "aug2": aug2} if self.takes_ids else {}
        return self.scale * self.loss_fn(z1, z2, index, **kwargs)

    def epoch_columns(self, epoch: int) -> dict[str, float]:
        done = epoch + 1
        return self._evaluate() if done % self.eval_every == 0 or done == self.epochs else {}

    def state_dict(self) -> dict:
        return {"run": repr((self.name, self.eval_every, self.cfg)), "generator": self.generator.get_state(),
                "rng": torch.get_rng_state()}

    def load_state_dict(self, state: dict, step: int) -> None:
        if state["run"] != repr((self.name, self.eval_every, self.cfg)):
            raise ValueError(f"{self.run_id}: the checkpoint is of other settings ({state['run']}); delete it")
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["rng"])


@dataclass
class RunResult:
    """One method's training run: its evaluation curve and the final model."""

    method: str
    num_augmentations: int
    curve: pd.DataFrame
    model: ContrastiveModel
    view_ids: list[tuple[torch.Tensor, ...]] = field(default_factory=list)  # (index, aug1, aug2) per step (tests)
    seed: int = 0

    @property
    def name(self) -> str:
        """The run's folder name in the timing record: ``<method>-A<num_augmentations>-s<seed>`` (A0: fresh
        views)."""
        return convergence_run_name(self.method, self.num_augmentations, self.seed)


def train_method(method: str, views: torch.Tensor, cfg: ConvergenceConfig, eval_every: int | None = None,
                 record_views: bool = False, fresh_from: torch.Tensor | None = None, ckpt_dir: Path | None = None,
                 out_dir: Path | None = None) -> RunResult:
    """Train ``method`` on the fixed ``views`` (n, A, 3, H, W) with :func:`~isogclr.train.engine.fit`; evaluate F
    and ||grad F||^2 every ``eval_every`` epochs (default ``cfg.eval_every``; the initial and final models always).

    ``fresh_from``: the n uint8 images; then every step trains on two fresh augmentations of the batch's
    images instead (infinite augmentation, EMC2 only), and ``views`` serve only to evaluate F.
    ``ckpt_dir``: where the run's checkpoint ``<name>/checkpoint.pt`` lives while it trains (a run restarted
    after an interruption resumes from it; removed at the end); None: a temporary folder.
    ``out_dir``: the study's folder; each epoch's training seconds go to the timing record, run
    ``<out_dir>/<name>``, rows ``step`` (at the epoch's end) and ``seconds`` (None: not recorded).
    """
    if fresh_from is not None and (method != "emc2" or len(fresh_from) != len(views)):
        raise ValueError(f"fresh views: only for emc2 with one image per row of views, got {method!r}, "
                         f"{len(fresh_from)} images for {len(views)} view rows")
    with _threads(cfg.num_threads), tempfile.TemporaryDirectory() as scratch:
        task = _ConvergenceTask(method, views, cfg, cfg.eval_every if eval_every is None else eval_every,
                                record_views, fresh_from)
        ckpt_path = Path(ckpt_dir or scratch) / task.name / "checkpoint.pt"
        rows = fit(task, total_steps=task.steps_per_epoch * cfg.epochs, warmup_steps=0, final_lr_fraction=1.0,
                   ckpt_path=ckpt_path, curves_dir=None, timing_by="step",
                   describe=lambda row: f" F {row['objective']:.5f}" if "objective" in row else "",
                   timing_run=None if out_dir is None else epoch_times.run_key(Path(out_dir) / task.name),
                   settings={"method": method, "views": list(views.shape), "fresh": fresh_from is not None,
                             **dataclasses.asdict(cfg)})
        ckpt_path.unlink(missing_ok=True)
    curve = pd.DataFrame([{"method": method, "num_augmentations": task.num_augmentations, **row}
                          for row in rows if "objective" in row], columns=CURVE_COLUMNS)
    return RunResult(method, task.num_augmentations, curve, task.model, task.view_ids or [], cfg.seed)


def knn1_test_accuracy(model: ContrastiveModel, cfg: ConvergenceConfig) -> float:
    """1-NN top-1 (%) of the frozen encoder on the dataset's test split, the full train split as memory."""
    train, test = load_dataset(cfg.dataset, cfg.data_root, "train"), load_dataset(cfg.dataset, cfg.data_root, "test")
    device = torch.device("cpu")
    train_x = extract_features(model.encoder, train.images, device)
    test_x = extract_features(model.encoder, test.images, device)
    return knn_accuracy(train_x, train.labels, test_x, test.labels, k=1)


@dataclass
class StudyResult:
    convergence: pd.DataFrame  # CURVE_COLUMNS, one row per (method, evaluation)
    augmentations: pd.DataFrame  # one row per (method, A): final objective, grad norm, 1-NN
    seconds: float  # wall time of the whole study
    runs: list[RunResult] = field(default_factory=list)  # every trained run


def run_study(cfg: ConvergenceConfig, augmentation_values: tuple[int, ...] = (2, 4, 8),
              augmentation_methods: tuple[str, ...] = AUGMENTATION_METHODS,
              reference_methods: tuple[str, ...] = REFERENCE_METHODS,
              knn: bool = True, infinite_augmentation: bool = False, ckpt_dir: Path | None = None,
              out_dir: Path | None = None) -> StudyResult:
    """The convergence study and the pre-computed augmentation study.

    Convergence: ``cfg.methods`` at A = ``cfg.num_augmentations``, F and ||grad F||^2 every
    ``cfg.eval_every`` epochs. Augmentations: ``augmentation_methods`` at every A in
    ``augmentation_values`` (evaluated at the end of training), and ``reference_methods`` (which
    must be in ``cfg.methods``) at A = ``cfg.num_augmentations`` only; runs shared with the
    convergence study are reused, not retrained. Every row gets the 1-NN test accuracy (``knn``).
    ``infinite_augmentation``: also EMC2 with fresh views every step (a row with ``num_augmentations``
    = :data:`FRESH_VIEWS`), its F on the A = ``cfg.num_augmentations`` views. ``ckpt_dir``, ``out_dir``:
    the runs' checkpoints and timing record (:func:`train_method`).

    Deterministic given ``cfg.seed``: the tables hold no wall clock (the timing record does).
    """
    if not augmentation_values or any(not isinstance(v, int) or v < 2 for v in augmentation_values):
        raise ValueError(f"augmentation_values must be integers >= 2, got {augmentation_values}")
    wanted = augmentation_runs(cfg.num_augmentations, augmentation_values, augmentation_methods, reference_methods,
                               infinite_augmentation)  # checks augmentation_methods
    if any(m not in cfg.methods for m in reference_methods):
        raise ValueError(f"reference_methods must be among methods={cfg.methods}, got {reference_methods}")
    start = time.perf_counter()
    with _threads(cfg.num_threads):
        images = load_dataset(cfg.dataset, cfg.data_root, "train").images[:cfg.num_images]
        if len(images) < cfg.num_images:
            raise ValueError(f"num_images={cfg.num_images} exceeds the {len(images)} images of {cfg.dataset}")
        views_by_a: dict[int, torch.Tensor] = {}

        def views_for(a: int) -> torch.Tensor:
            if a not in views_by_a:
                views_by_a[a] = precompute_views(images, a, cfg.augment, cfg.seed)
            return views_by_a[a]

        base, where = cfg.num_augmentations, {"ckpt_dir": ckpt_dir, "out_dir": out_dir}
        runs: dict[tuple[str, int], RunResult] = {}
        for method in cfg.methods:
            runs[method, base] = train_method(method, views_for(base), cfg, **where)
        convergence = pd.concat([runs[m, base].curve for m in cfg.methods], ignore_index=True)
        rows = []
        for method, a in wanted:
            if (method, a) in runs:
                pass  # shared with the convergence study
            elif a == FRESH_VIEWS:
                runs[method, a] = train_method(method, views_for(base), cfg, eval_every=cfg.epochs,
                                               fresh_from=images, **where)
            else:
                runs[method, a] = train_method(method, views_for(a), dataclasses.replace(cfg, num_augmentations=a),
                                               eval_every=cfg.epochs, **where)
            run = runs[method, a]
            final = run.curve.iloc[-1]
            rows.append({"method": method, "num_augmentations": a, "epochs": cfg.epochs,
                         "samples_seen": int(final["samples_seen"]), "objective": final["objective"],
                         "grad_norm_sq": final["grad_norm_sq"],
                         "knn1_top1": knn1_test_accuracy(run.model, cfg) if knn else float("nan")})
        augmentations = pd.DataFrame(rows)
    return StudyResult(convergence, augmentations, time.perf_counter() - start, list(runs.values()))


def write_study(params: dict, out_dir: Path, ckpt_dir: Path | None = None) -> StudyResult:
    """Run the study of ``params`` (section ``emc2_convergence``) once per seed of its ``seeds`` and write it to
    ``out_dir``.

    ``config.json``: the resolved :class:`ConvergenceConfig` (its ``seed`` is the first seed) and
    the :class:`ConvergenceStudy` keys, and beside it ``machine.json`` (the machine that ran the study,
    :mod:`isogclr.machine`); ``convergence.csv`` (``seed`` and :data:`CURVE_COLUMNS`)
    and ``augmentations.csv`` (``seed`` first): the two tables of the report, written atomically once the whole
    study has run. Each run's per-epoch training seconds go to the timing record (:mod:`isogclr.epoch_times`) when it
    finishes, run ``<out_dir>/<method>-A<A>-s<seed>`` (A0: fresh views), one row per epoch: ``step`` at its end and
    ``seconds`` of its training steps (evaluations excluded). ``ckpt_dir``: the runs' checkpoints
    (:func:`train_method`).
    """
    cfg, spec = convergence_config(params), convergence_study(params)
    out_dir = Path(out_dir)
    studies = [run_study(dataclasses.replace(cfg, seed=seed), augmentation_values=spec.augmentation_values,
                         infinite_augmentation=spec.infinite_augmentation, ckpt_dir=ckpt_dir, out_dir=out_dir)
               for seed in spec.seeds]
    def stacked(name: str) -> pd.DataFrame:  # the seeds' tables one under the other, ``seed`` the first column
        return pd.concat({seed: getattr(one, name) for seed, one in zip(spec.seeds, studies, strict=True)},
                         names=["seed", None]).reset_index(level="seed").reset_index(drop=True)

    study = StudyResult(stacked("convergence"), stacked("augmentations"), sum(one.seconds for one in studies),
                        [run for one in studies for run in one.runs])
    save_text(study.convergence.to_csv(index=False), out_dir / "convergence.csv")
    save_text(study.augmentations.to_csv(index=False), out_dir / "augmentations.csv")
    save_json({**dataclasses.asdict(cfg), "tau": cfg.tau, "fresh_views": FRESH_VIEWS,
               "augmentation_values": list(spec.augmentation_values), "seeds": list(spec.seeds),
               "infinite_augmentation": spec.infinite_augmentation}, out_dir / "config.json")
    with _threads(cfg.num_threads):  # the threads the runs used
        machine.record(out_dir)
    return study
