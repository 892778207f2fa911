"""EMC2's convergence study (Yau et al., 2024, Sec. 4.5 / Figure 7) and its pre-computed augmentation study (Figure 3).

A pipeline stage (``python -m isogclr convergence --out runs_convergence``, :func:`write_study`) trains the
study's runs and writes their curves; the report ``emc2_convergence`` only reads them.

**The finite problem.** Take the first ``num_images`` images of a dataset (EMC2: the first 500
of STL-10) and pre-compute ``num_augmentations`` = A fixed augmented views of each, once, from a
seeded generator (EMC2: A = 2). The positive pairs are two distinct views of one image, the
negatives of an anchor are all views of every other image. On this finite set the global
contrastive objective and its gradient can be computed exactly by full passes:

    F(w) = 1/(nA) sum_{i,a} [ -mean_{a' != a} z_ia . z_ia'
                              + tau log( 1/((n-1)A) sum_{j != i, b} exp(z_ia . z_jb / tau) ) ]

which is :func:`isogclr.eval.convergence.global_contrastive_loss` for A = 2 (that function pairs view
a with view a+1 mod A, the same thing when A = 2); for A > 2 the positive term averages over every
other view, matching the training sampler below (:func:`all_pairs_contrastive_loss`).

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
we use batch 8 and a larger rate to move within a CPU budget, see :class:`ConvergenceConfig`; EMC2's
burn-in is the loss's default P = b - 1, its R = 2b - 2). BatchNorm trains in
train mode; F and its gradient are evaluated in eval mode (running statistics), so F is a
deterministic function of the weights. The weight decay is not part of F.

**Infinite augmentation** (Figure 3's reference): EMC2 in its default mode, two fresh SimCLR views of
each batch image at every step (seeded per step, so the run is reproducible) and one Markov chain per
image. Its F is evaluated on the same fixed A-view problem as the others; in the tables its
``num_augmentations`` is 0 (:data:`FRESH_VIEWS`).

Negative Cache is not run here: its objective uses one cached feature per image (EMC2's variant
with un-augmented negatives), which is not F, and refreshing the cache at EMC2's rate (rho = 0.1,
50 images per step for n = 500) would cost several times a training step.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .. import timing
from ..config import ConfigError
from ..data import load_dataset
from ..data.augment import AugmentConfig, simclr_augmentation, to_float
from ..eval.convergence import exact_objective_and_grad_norm, global_contrastive_loss
from ..eval.knn import knn_accuracy
from ..eval.linear_probe import extract_features
from ..io import save_json, save_text
from ..losses.registry import build_loss
from ..models import ContrastiveModel, EncoderConfig, HeadConfig
from .optim import OptimConfig, build_optimizer

METHODS = ("simclr", "sogclr", "emc2")
FRESH_VIEWS = 0  # num_augmentations of a run that draws fresh views every step (infinite augmentation)
CURVE_COLUMNS = ["method", "num_augmentations", "epoch", "step", "samples_seen", "objective", "grad_norm_sq"]


@dataclass(frozen=True)
class ConvergenceConfig:
    """Settings of one study; every field is validated (``ValueError`` naming the field).

    Defaults: EMC2's Figure 7 problem on synth10 (first 500 training images, A = 2 views), the
    project's mini model (a narrow ResNet-18, CIFAR stem, 3-layer 512-d head, as ``params.yaml``
    ``model``), beta 5 (EMC2's, tau 0.2 = the project's SimCLR / SogCLR tau), SogCLR gamma 0.9, plain SGD.
    The schedule is cut to a CPU budget of about 4 minutes for the whole report on 2 shared cores
    (batch 8, 6 epochs, learning rate 0.05, exact evaluation every 2 epochs) where EMC2's Figure 7 uses
    batch 4 and learning rate 1e-3 on a GPU.
    """

    dataset: str = "synth10"
    data_root: str = "data"
    num_images: int = 500
    num_augmentations: int = 2
    methods: tuple[str, ...] = METHODS
    beta: float = 5.0  # inverse temperature of EMC2 and of F; tau = 1 / beta for SimCLR, SogCLR and F
    gamma: float = 0.9  # SogCLR's moving-average weight
    batch_size: int = 8  # EMC2 uses 4; 8 halves the per-sample cost of a CPU step
    epochs: int = 6
    eval_every: int = 2  # epochs between exact evaluations (epoch 0, the initial model, is always evaluated)
    lr: float = 0.05  # EMC2 uses 1e-3 (many more steps); see the module docstring
    momentum: float = 0.0
    weight_decay: float = 1e-4
    encoder: EncoderConfig = field(default_factory=lambda: EncoderConfig(arch="resnet18", width=16, cifar_stem=True))
    head: HeadConfig = field(default_factory=lambda: HeadConfig(layers=3, hidden_dim=512, out_dim=512))
    augment: AugmentConfig = field(default_factory=lambda: AugmentConfig(crop_scale_min=0.5))
    seed: int = 0
    eval_chunk: int = 256
    num_threads: int = 0  # 0: leave torch's setting alone

    def __post_init__(self) -> None:
        positive_ints = ("num_images", "num_augmentations", "batch_size", "epochs", "eval_every", "eval_chunk")
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.num_augmentations < 2:
            raise ValueError(f"num_augmentations must be >= 2 (a positive pair needs two views), "
                             f"got {self.num_augmentations}")
        if self.batch_size < 2 or self.batch_size > self.num_images:
            raise ValueError(f"batch_size must be in [2, num_images={self.num_images}], got {self.batch_size}")
        if not self.methods or any(m not in METHODS for m in self.methods) or len(set(self.methods)) != len(
                self.methods):
            raise ValueError(f"methods must be distinct names from {METHODS}, got {self.methods!r}")
        for name in ("beta", "lr"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma!r}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.num_threads < 0:
            raise ValueError(f"num_threads must be >= 0, got {self.num_threads!r}")
        for name, cls in (("encoder", EncoderConfig), ("head", HeadConfig), ("augment", AugmentConfig)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}, got {getattr(self, name)!r}")

    @property
    def tau(self) -> float:
        return 1.0 / self.beta


def config_from_params(params: dict, **overrides) -> ConvergenceConfig:
    """A :class:`ConvergenceConfig` with the model, augmentation, data root and the methods' temperature
    settings of ``params.yaml``, the study's section ``emc2_convergence`` and then ``overrides``.
    SimCLR and SogCLR run at tau = 1 / beta of ``methods.emc2`` (one objective F for all methods), whatever
    their own tau in params.yaml."""
    methods = params.get("methods") or {}
    beta = float((methods.get("emc2") or {}).get("beta", 5.0))
    model = params.get("model") or {}
    values = {
        "data_root": str((params.get("data") or {}).get("root", "data")),
        "beta": beta,
        "gamma": float((methods.get("sogclr") or {}).get("gamma", 0.9)),
        "encoder": EncoderConfig(**(model.get("encoder") or {})),
        "head": HeadConfig(**(model.get("head") or {})),
        "augment": AugmentConfig(**(params.get("augment") or {})),
    }
    section = dict(params.get("emc2_convergence") or {})  # the study's own settings (params.yaml)
    for key in ("augmentation_values", "infinite_augmentation"):  # which runs the report makes, not one run's setting
        section.pop(key, None)
    known = {f.name for f in dataclasses.fields(ConvergenceConfig)}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"emc2_convergence.{unknown[0]}: unknown key (known: {sorted(known)})")
    values.update(section)
    values.update(overrides)
    if "methods" in values:
        values["methods"] = tuple(values["methods"])
    return ConvergenceConfig(**values)


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
    """(n, A, 3, H, W) float views: A SimCLR augmentations of each uint8 image, drawn once from ``seed``.

    kornia draws from torch's global generator; it is forked, so the caller's random state is untouched.
    """
    transform = simclr_augmentation(augment, images.shape[-1])
    x = to_float(images)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.no_grad():
            views = torch.stack([transform(x) for _ in range(num_augmentations)], dim=1)
    return views.contiguous()


def all_pairs_contrastive_loss(feats: torch.Tensor, tau: float) -> torch.Tensor:
    """F for features (n, A, d), the positive term averaged over all A - 1 other views of the image.

    Equals :func:`isogclr.eval.convergence.global_contrastive_loss` when A = 2.
    """
    n, a, d = feats.shape
    z = F.normalize(feats, dim=-1).reshape(n * a, d)
    sim = z @ z.T
    image = torch.arange(n, device=z.device).repeat_interleave(a)
    same = image[:, None] == image[None, :]
    own = torch.eye(n * a, dtype=torch.bool, device=z.device)
    positive = sim.masked_fill(~same | own, 0.0).sum(1) / (a - 1)
    log_g = torch.logsumexp(sim.div(tau).masked_fill(same, float("-inf")), dim=1) - math.log((n - 1) * a)
    return (-positive + tau * log_g).mean()


def exact_objective(model: nn.Module, views: torch.Tensor, tau: float, chunk: int = 256) -> tuple[float, float]:
    """(F(w), ||grad F(w)||^2) on fixed ``views`` (n, A, C, H, W), ``model`` mapping images to features.

    :func:`isogclr.eval.convergence.exact_objective_and_grad_norm` (two passes, BatchNorm in eval mode) of
    F = :func:`~isogclr.eval.convergence.global_contrastive_loss` for A = 2, :func:`all_pairs_contrastive_loss`
    for A > 2.
    """
    objective = global_contrastive_loss if views.shape[1] == 2 else all_pairs_contrastive_loss
    return exact_objective_and_grad_norm(model, views, tau, chunk, objective=objective)


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
    raise ValueError(f"methods: unknown method {method!r} (known: {METHODS})")


def _view_pairs(generator: torch.Generator, count: int, num_augmentations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two distinct view ids per image, uniformly over unordered pairs, returned in increasing order."""
    first = torch.randint(0, num_augmentations, (count,), generator=generator)
    second = (first + 1 + torch.randint(0, num_augmentations - 1, (count,), generator=generator)) % num_augmentations
    return torch.minimum(first, second), torch.maximum(first, second)


@dataclass
class RunResult:
    """One method's training run: its evaluation curve and the final model."""

    method: str
    num_augmentations: int
    curve: pd.DataFrame
    model: ContrastiveModel
    train_seconds: float  # wall clock of the training steps (not of the evaluations); never in a result file
    view_ids: list[torch.Tensor] = field(default_factory=list)  # (aug1, aug2) of every step (tests)
    timings: list[dict] = field(default_factory=list)  # per epoch: {"step": step at its end, "seconds": its time}

    @property
    def name(self) -> str:
        """The run's folder name in the timing record: ``<method>-A<num_augmentations>`` (A0: fresh views)."""
        return f"{self.method}-A{self.num_augmentations}"


def train_method(method: str, views: torch.Tensor, cfg: ConvergenceConfig, eval_every: int | None = None,
                 record_views: bool = False, fresh_from: torch.Tensor | None = None) -> RunResult:
    """Train ``method`` on the fixed ``views`` (n, A, 3, H, W); evaluate F and ||grad F||^2 every
    ``eval_every`` epochs (default ``cfg.eval_every``; the initial and final models always).

    ``fresh_from``: the n uint8 images; then every step trains on two fresh augmentations of the batch's
    images instead (infinite augmentation, EMC2 only), and ``views`` serve only to evaluate F.
    """
    if fresh_from is not None and (method != "emc2" or len(fresh_from) != len(views)):
        raise ValueError(f"fresh views: only for emc2 with one image per row of views, got {method!r}, "
                         f"{len(fresh_from)} images for {len(views)} view rows")
    with _threads(cfg.num_threads):
        return _train_method(method, views, cfg, cfg.eval_every if eval_every is None else eval_every,
                             record_views, fresh_from)


def _fresh_pair(transform: nn.Module, images: torch.Tensor, seed: int, step: int) -> torch.Tensor:
    """Two new views of each image, (2B, 3, H, W), drawn from a generator seeded by (seed, step)."""
    x = to_float(images)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed * 1_000_003 + 7 * step + 1)
        return torch.cat([transform(x), transform(x)])


def _train_method(method: str, views: torch.Tensor, cfg: ConvergenceConfig, eval_every: int,
                  record_views: bool, fresh_from: torch.Tensor | None) -> RunResult:
    n, a = views.shape[:2]
    torch.manual_seed(cfg.seed)  # the same initial weights for every method
    model = ContrastiveModel(cfg.encoder, cfg.head)
    projection = _Projection(model)
    loss_fn, scale, takes_ids = build_method(method, cfg, n, FRESH_VIEWS if fresh_from is not None else a)
    transform = simclr_augmentation(cfg.augment, views.shape[-1]) if fresh_from is not None else None
    optimizer = build_optimizer(model, OptimConfig(name="sgd", lr=cfg.lr, weight_decay=cfg.weight_decay,
                                                   momentum=cfg.momentum, warmup_epochs=0.0), cfg.batch_size)
    generator = torch.Generator().manual_seed(cfg.seed * 1_000_003 + 17)  # batches and view pairs
    steps_per_epoch = n // cfg.batch_size
    rows, seconds, step, recorded, timings = [], 0.0, 0, [], []

    def evaluate(epoch: int) -> None:
        objective, grad_norm_sq = exact_objective(projection, views, cfg.tau, cfg.eval_chunk)
        rows.append({"method": method, "num_augmentations": a if fresh_from is None else FRESH_VIEWS,
                     "epoch": epoch, "step": step,
                     "samples_seen": step * cfg.batch_size,
                     "objective": objective, "grad_norm_sq": grad_norm_sq})

    model.train()
    evaluate(0)
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        order = torch.randperm(n, generator=generator)
        for b in range(steps_per_epoch):
            index = order[b * cfg.batch_size:(b + 1) * cfg.batch_size]
            aug1, aug2 = _view_pairs(generator, len(index), a)
            if record_views:
                recorded.append((index.clone(), aug1.clone(), aug2.clone()))
            if transform is not None:
                x = _fresh_pair(transform, fresh_from[index], cfg.seed, step)
            else:
                x = torch.cat([views[index, aug1], views[index, aug2]])
            _, proj = model(x)
            z1, z2 = F.normalize(proj, dim=1).chunk(2)
            kwargs = {"aug1": aug1, "aug2": aug2} if takes_ids else {}
            loss = scale * loss_fn(z1, z2, index, **kwargs)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{method}: non-finite loss {loss.item()} at step {step}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
        epoch_seconds = time.perf_counter() - t0
        seconds += epoch_seconds
        timings.append({"step": step, "seconds": round(epoch_seconds, 3)})
        if epoch % eval_every == 0 or epoch == cfg.epochs:
            evaluate(epoch)
    return RunResult(method, a if fresh_from is None else FRESH_VIEWS, pd.DataFrame(rows, columns=CURVE_COLUMNS),
                     model, seconds, recorded, timings)


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
    runs: list[RunResult] = field(default_factory=list)  # every trained run (their timings: the timing record)


def run_study(cfg: ConvergenceConfig, augmentation_values: tuple[int, ...] = (2, 4, 8),
              augmentation_methods: tuple[str, ...] = ("emc2",), reference_methods: tuple[str, ...] = ("simclr",),
              knn: bool = True, infinite_augmentation: bool = False) -> StudyResult:
    """The convergence study and the pre-computed augmentation study.

    Convergence: ``cfg.methods`` at A = ``cfg.num_augmentations``, F and ||grad F||^2 every
    ``cfg.eval_every`` epochs. Augmentations: ``augmentation_methods`` at every A in
    ``augmentation_values`` (evaluated at the end of training), and ``reference_methods`` (which
    must be in ``cfg.methods``) at A = ``cfg.num_augmentations`` only; runs shared with the
    convergence study are reused, not retrained. Every row gets the 1-NN test accuracy (``knn``).
    ``infinite_augmentation``: also EMC2 with fresh views every step (a row with ``num_augmentations``
    = :data:`FRESH_VIEWS`), its F on the A = ``cfg.num_augmentations`` views.

    Deterministic given ``cfg.seed``: the tables hold no wall clock (the runs' ``timings`` do).
    """
    if not augmentation_values or any(not isinstance(v, int) or v < 2 for v in augmentation_values):
        raise ValueError(f"augmentation_values must be integers >= 2, got {augmentation_values}")
    if any(m not in METHODS for m in augmentation_methods):
        raise ValueError(f"augmentation_methods must be names from {METHODS}, got {augmentation_methods}")
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

        base = cfg.num_augmentations
        runs: dict[tuple[str, int], RunResult] = {}
        for method in cfg.methods:
            runs[method, base] = train_method(method, views_for(base), cfg)
        convergence = pd.concat([runs[m, base].curve for m in cfg.methods], ignore_index=True)
        wanted = [(m, a) for m in augmentation_methods for a in augmentation_values]
        wanted += [("emc2", FRESH_VIEWS)] if infinite_augmentation else []
        wanted += [(m, base) for m in reference_methods if (m, base) not in wanted]
        rows = []
        for method, a in wanted:
            if (method, a) in runs:
                pass  # shared with the convergence study
            elif a == FRESH_VIEWS:
                runs[method, a] = train_method(method, views_for(base), cfg, eval_every=cfg.epochs,
                                               fresh_from=images)
            else:
                runs[method, a] = train_method(method, views_for(a), dataclasses.replace(cfg, num_augmentations=a),
                                               eval_every=cfg.epochs)
            run = runs[method, a]
            final = run.curve.iloc[-1]
            rows.append({"method": method, "num_augmentations": a, "epochs": cfg.epochs,
                         "samples_seen": int(final["samples_seen"]), "objective": final["objective"],
                         "grad_norm_sq": final["grad_norm_sq"],
                         "knn1_top1": knn1_test_accuracy(run.model, cfg) if knn else float("nan")})
        augmentations = pd.DataFrame(rows)
    return StudyResult(convergence, augmentations, time.perf_counter() - start, list(runs.values()))


def write_study(params: dict, out_dir: Path) -> StudyResult:
    """Run the study of ``params`` (section ``emc2_convergence``) and write it to ``out_dir``.

    ``config.json``: the resolved :class:`ConvergenceConfig` (and the augmentation values);
    ``convergence.csv`` (:data:`CURVE_COLUMNS`) and ``augmentations.csv``: the two tables of the report.
    Every file is written atomically once the whole study has run. The runs' per-epoch training seconds go
    to the timing record (:mod:`isogclr.timing`), run ``<out_dir>/<method>-A<A>`` (A0: fresh views), one
    row per epoch: ``step`` at its end and ``seconds`` of its training steps (evaluations excluded).
    """
    cfg = config_from_params(params)
    section = params.get("emc2_convergence") or {}
    values = tuple(section.get("augmentation_values", (2, 4, 8)))
    infinite = bool(section.get("infinite_augmentation", False))
    study = run_study(cfg, augmentation_values=values, augmentation_methods=("emc2",), reference_methods=("simclr",),
                      infinite_augmentation=infinite)
    out_dir = Path(out_dir)
    save_text(study.convergence.to_csv(index=False), out_dir / "convergence.csv")
    save_text(study.augmentations.to_csv(index=False), out_dir / "augmentations.csv")
    save_json({**dataclasses.asdict(cfg), "tau": cfg.tau, "fresh_views": FRESH_VIEWS,
               "augmentation_values": list(values), "infinite_augmentation": infinite}, out_dir / "config.json")
    for run in study.runs:
        timing.record(timing.run_key(out_dir / run.name), run.timings)
    return study
