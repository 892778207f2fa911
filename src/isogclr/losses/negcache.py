"""Negative Cache (Lindgren et al., NeurIPS 2021, "Efficient training of retrieval models using
negative cache"), the cache-based baseline of the EMC2 paper."""

from __future__ import annotations

import math

import torch

from .base import ContrastiveLoss
from .conventions import check_index
from .loss_table import register_loss
from .two_views import compute_dtype, full_precision


@register_loss(modality="unimodal")
class NegativeCacheLoss(ContrastiveLoss):
    r"""Global contrastive loss with negatives drawn from a feature cache by the Gumbel-max trick.

    Objective (EMC2 eq. 1 over the dataset): for anchor a (both views of each sample),

    .. math::
        L_a = -\beta z_a^\top z_{a^+} + \log \sum_{j \ne i} \exp(\beta z_a^\top c_j),

    whose negative gradient is beta E_{j ~ p_a}[grad z_a^T c_j], p_a the softmax of
    beta z_a^T c_j over the cache. The cache holds one feature per sample (n x d, 4d bytes
    per sample plus a filled flag) computed by earlier models. Each step:

    1. the batch's own entries are written (view 1's features: the cache stands for the
       un-augmented images of the EMC2 paper's variant, one view is the best available);
    2. for every anchor, ``num_negatives`` indices j are drawn exactly from the softmax over
       the cache by Gumbel-max: argmax_j (beta z_a^T c_j + G_j), G_j ~ Gumbel(0, 1), the
       anchor's own sample and unfilled entries excluded;
    3. the gradient is beta [ -grad z_a^T z_{a+} + mean_k grad z_a^T n_k ] with n_k the
       sampled negatives' features: ``negatives`` (2B, k, d) if the trainer re-embedded the
       sampled images with the current model (Lindgren et al.'s algorithm; get the indices
       first with :meth:`sample`), otherwise the batch's live view-1 feature for a sampled
       index in the batch and the (stale, constant) cached feature for the others;
    4. the cache is refreshed at rate rho: :meth:`refresh_indices` gives the next
       ceil(rho n) indices (round robin) that the trainer re-embeds without gradient and
       writes with :meth:`update_cache`.

    The value is the batch estimate of mean_a L_a minus log(number of cached negatives),
    with the cache as the negatives. Random draws use a ``torch.Generator`` owned by the
    loss (``seed``), saved in ``state_dict``.

    Args:
        num_samples: dataset size n.
        dim: feature dimension d.
        beta: inverse temperature.
        rho: fraction of the cache to refresh per step (the EMC2 paper: 0.1 for b = 256).
        num_negatives: negatives sampled per anchor.
        seed: seed of the loss's generator.
    """

    expects_normalized = True

    def __init__(self, num_samples: int, dim: int = 128, beta: float = 5.0, rho: float = 0.1,
                 num_negatives: int = 1, seed: int = 0) -> None:
        super().__init__()
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"rho must be in [0, 1], got {rho}")
        if num_negatives < 1:
            raise ValueError(f"num_negatives must be >= 1, got {num_negatives}")
        self.num_samples, self.dim = int(num_samples), int(dim)
        self.beta, self.rho, self.num_negatives = float(beta), float(rho), int(num_negatives)
        self.register_buffer("cache", torch.zeros(num_samples, dim))
        self.register_buffer("filled", torch.zeros(num_samples, dtype=torch.bool))
        self.register_buffer("refresh_pointer", torch.zeros((), dtype=torch.long))
        self.generator = torch.Generator().manual_seed(int(seed))
        self.last_negative_index: torch.Tensor | None = None

    def get_extra_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)

    @torch.no_grad()
    def update_cache(self, index: torch.Tensor, features: torch.Tensor) -> None:
        """Write (fresh, detached) features of samples ``index`` into the cache."""
        if features.shape != (len(index), self.dim):
            raise ValueError(f"features must be ({len(index)}, {self.dim}), got {tuple(features.shape)}")
        self.cache[index] = features.detach().to(self.cache.dtype)
        self.filled[index] = True

    @torch.no_grad()
    def refresh_indices(self) -> torch.Tensor:
        """The next ceil(rho n) dataset indices to re-embed and write back (round robin)."""
        count = math.ceil(self.rho * self.num_samples)
        start = int(self.refresh_pointer)
        self.refresh_pointer.fill_((start + count) % self.num_samples)
        return (start + torch.arange(count, device=self.cache.device)) % self.num_samples

    @torch.no_grad()
    def _cache_logits(self, anchors: torch.Tensor, anchor_sample: torch.Tensor) -> torch.Tensor:
        logits = self.beta * (anchors @ self.cache.T.to(anchors.dtype))
        columns = torch.arange(self.num_samples, device=logits.device)
        valid = self.filled[None, :] & (columns[None, :] != anchor_sample[:, None])
        if not bool(valid.any(1).all()):
            raise RuntimeError("the negative cache holds no negative for some anchor; write more samples first")
        return logits.masked_fill_(~valid, -math.inf)

    @torch.no_grad()
    def _gumbel_argmax(self, logits: torch.Tensor, count: int) -> torch.Tensor:
        """``count`` exact draws per row from softmax(logits): argmax(logits + G), G = -log E, E ~ Exp(1)."""
        draws = []
        for _ in range(count):
            exponential = torch.empty(logits.shape, dtype=logits.dtype).exponential_(generator=self.generator)
            draws.append((logits - exponential.log_().to(logits.device)).argmax(dim=1))
        return torch.stack(draws, dim=1)

    @torch.no_grad()
    def sample(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Write the batch into the cache and draw (2B, num_negatives) negative indices for the
        anchors cat([z1, z2]) (to re-embed them and pass them to the forward as ``negatives``)."""
        check_index(index, self.num_samples, len(z1))
        self.update_cache(index, z1)
        anchors = torch.cat([z1, z2]).to(compute_dtype(z1, z2))
        return self._gumbel_argmax(self._cache_logits(anchors, index.repeat(2)), self.num_negatives)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor,
                negatives: torch.Tensor | None = None, negative_index: torch.Tensor | None = None) -> torch.Tensor:
        b = len(z1)
        check_index(index, self.num_samples, b)
        with full_precision(z1.device):
            dtype = compute_dtype(z1, z2)
            anchors = torch.cat([z1, z2]).to(dtype)
            positives = torch.cat([z2, z1]).to(dtype)
            pos = (anchors * positives).sum(1)
            anchor_sample = index.repeat(2)
            self.update_cache(index, z1)
            logits = self._cache_logits(anchors.detach(), anchor_sample)
            log_count = torch.log((logits > -math.inf).sum(1).to(dtype))
            value = (torch.logsumexp(logits, dim=1) - log_count - self.beta * pos.detach()).mean()
            if negatives is None:
                negative_index = self._gumbel_argmax(logits, self.num_negatives)  # (2B, k)
                negative_features = self._features(negative_index, z1.to(dtype), index)
            else:
                if negatives.dim() != 3 or negatives.shape[:2] != (2 * b, self.num_negatives):
                    raise ValueError(f"negatives must be (2B, {self.num_negatives}, d), got {tuple(negatives.shape)}")
                negative_features = negatives.to(dtype)
            self.last_negative_index = negative_index
            negative_sim = torch.einsum("rd,rkd->rk", anchors, negative_features)
            surrogate = self.beta * (negative_sim.mean(1) - pos).mean()
            return surrogate - surrogate.detach() + value

    def _features(self, negative_index: torch.Tensor, live: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Features of the sampled negatives: live (with gradient) when in the batch, cached otherwise."""
        cached = self.cache[negative_index].to(live.dtype)  # (2B, k, d), constant
        sorted_index, order = index.sort()
        where = torch.searchsorted(sorted_index, negative_index).clamp_max(len(index) - 1)
        in_batch = sorted_index[where] == negative_index
        return torch.where(in_batch[..., None], live[order[where]], cached)
