"""EMC2: Metropolis-Hastings negative sampling for the global contrastive loss (Yau et al., 2024)."""

from __future__ import annotations

import math

import torch

from .base import ContrastiveLoss
from .conventions import check_index
from .gram import GramGradient, mask_own_views, subtract_positive_weights, two_view_features
from .loss_table import register_loss
from .two_views import full_precision


@register_loss(modality="unimodal")
class EMC2Loss(ContrastiveLoss):
    r"""EMC2 (Algorithm 1 of the EMC2 paper, section 2) on the two-view in-batch layout.

    Objective (eq. 1), beta the inverse temperature, N_a the negatives of anchor a:

    .. math::
        L = \mathbb{E}_a\Big[-\beta z_a^\top z_{a^+} + \log \sum_{k \in N_a} \exp(\beta z_a^\top z_k)\Big],
        \qquad \nabla L = \mathbb{E}_a\big[-\beta \nabla z_a^\top z_{a^+}
        + \beta\, \mathbb{E}_{k \sim p_a} \nabla z_a^\top z_k\big],\ p_a \propto e^{\beta z_a^\top z_k}.

    EMC2 keeps one Markov-chain state Z_i per sample (a negative it points to) and, at each
    iteration, runs R Metropolis-Hastings steps per anchor from the stored state (eq. 9):
    a candidate Z' drawn **uniformly from the anchor's in-batch candidates** (the 2B - 2
    views of the other samples, the paper's section 4.1) is accepted with probability
    min(1, exp(beta z_a^T Z' - beta z_a^T Z)). The states after the burn-in, r = P..R-1, give
    the gradient estimator of eqs. 10-11:

    .. math::
        \mathcal{H} = \frac{\beta}{2B}\sum_a\Big[-\nabla z_a^\top z_{a^+}
            + \frac{1}{R - P}\sum_{r=P}^{R-1} \nabla z_a^\top \tilde Z_a^{(r)}\Big].

    The returned scalar has gradient H; its value is the batch estimate of L minus the
    constant log m_neg (the mean over the 2B - 2 in-batch negatives replaces the sum).

    Conventions (see docs/losses.md):

    * defaults R = 2B - 2 (one proposal per in-batch candidate on average, the paper's
      R = B - 2 with B = 2b views) and P = b - 1 (the paper's Table 3), P < R;
    * the chain of sample i serves both of its anchor views (the practical algorithm of
      section 4.1, "a Markov chain state for each set {g(x_i)}"); both rows start from Z_i
      and Z_i keeps the view-2 row's final state. With ``num_augmentations=A`` (a finite set
      of pre-computed augmentations) there is one chain per (sample, augmentation) and the
      caller passes each view's augmentation id (``aug1``, ``aug2``);
    * a state points to a (sample, view-slot) or (sample, augmentation) pair; its score
      beta z_a^T Z is recomputed when that view is in the batch, otherwise the score stored
      when it was last evaluated is used (features are not stored: one int64 and one
      float32 per chain, 12 bytes); a post-burn-in state outside the batch has no feature,
      so it is left out of the average (normalised by the in-batch count);
    * a never-visited chain accepts its first proposal;
    * proposals and acceptances use a ``torch.Generator`` owned by the loss (``seed``),
      whose state is saved in ``state_dict`` (extra state), so runs are reproducible.

    Args:
        num_samples: dataset size n.
        beta: inverse temperature (the paper uses 5 for b = 256, 14.28 for b = 32).
        num_steps: M-H steps R per anchor and iteration (None: 2B - 2).
        burn_in: burn-in P (None: B - 1, capped at R - 1).
        num_augmentations: size A of a finite set of pre-computed augmentations (None: fresh
            augmentations, one chain per sample).
        seed: seed of the loss's generator.
    """

    expects_normalized = True

    def __init__(self, num_samples: int, beta: float = 5.0, num_steps: int | None = None,
                 burn_in: int | None = None, num_augmentations: int | None = None, seed: int = 0) -> None:
        super().__init__()
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        if num_steps is not None and num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        if burn_in is not None and burn_in < 0:
            raise ValueError(f"burn_in must be >= 0, got {burn_in}")
        if num_steps is not None and burn_in is not None and burn_in >= num_steps:
            raise ValueError(f"need burn_in < num_steps, got {burn_in} >= {num_steps}")
        if num_augmentations is not None and num_augmentations < 1:
            raise ValueError(f"num_augmentations must be >= 1, got {num_augmentations}")
        self.num_samples = int(num_samples)
        self.beta = float(beta)
        self.num_steps, self.burn_in = num_steps, burn_in
        self.num_augmentations = num_augmentations
        width = num_augmentations or 1
        self.register_buffer("state", torch.full((num_samples, width), -1, dtype=torch.long))
        self.register_buffer("state_score", torch.full((num_samples, width), -math.inf))
        self.generator = torch.Generator().manual_seed(int(seed))
        self.record_trace = False  # keep the (2B, R) chain trace of the last step in ``last_trace``
        self.last_counts: torch.Tensor | None = None
        self.last_trace: torch.Tensor | None = None

    def get_extra_state(self) -> torch.Tensor:
        return self.generator.get_state()

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)

    def steps(self, batch_size: int) -> tuple[int, int]:
        """(R, P) for a batch of ``batch_size`` samples."""
        r = self.num_steps if self.num_steps is not None else 2 * batch_size - 2
        p = self.burn_in if self.burn_in is not None else min(batch_size - 1, r - 1)
        if p >= r:
            raise ValueError(f"need burn_in < num_steps, got {p} >= {r}")
        return r, p

    def forward(self, z1: torch.Tensor, z2: torch.Tensor, index: torch.Tensor,
                aug1: torch.Tensor | None = None, aug2: torch.Tensor | None = None) -> torch.Tensor:
        b = len(z1)
        check_index(index, self.num_samples, b)
        if self.num_augmentations is not None:
            if aug1 is None or aug2 is None:
                raise ValueError("with num_augmentations, pass each view's augmentation id: aug1=..., aug2=...")
            for aug in (aug1, aug2):
                if aug.shape != (b,) or int(aug.min()) < 0 or int(aug.max()) >= self.num_augmentations:
                    raise ValueError(f"augmentation ids must be (B,) in [0, {self.num_augmentations})")
        elif aug1 is not None or aug2 is not None:
            raise ValueError("augmentation ids need num_augmentations (a finite set of augmentations)")
        with full_precision(z1.device):
            feats = two_view_features(z1, z2)  # (2B, d); row a's positive is column (a + B) mod 2B
            num_steps, burn_in = self.steps(b)
            with torch.no_grad():
                half = (feats[:b] * feats[b:]).sum(1)
                pos = torch.cat([half, half])
                logits = mask_own_views((self.beta * feats) @ feats.T, -math.inf)  # beta z_a^T z_k, negatives only
                counts = self._run_chains(logits, index, aug1, aug2, num_steps, burn_in)
                value = (torch.logsumexp(logits, dim=1) - math.log(2 * b - 2) - self.beta * pos).mean()
                # eq. 11: d/d sim of beta/2B sum_a [mean_r z_a^T Z_a^(r) - z_a^T z_a+]; a row whose samples all
                # lie outside the batch has no feature to contrast with and gets no negative term
                grad_sim = counts / counts.sum(1, keepdim=True).clamp_min(1.0)
                grad_sim.mul_(self.beta / (2 * b))
                subtract_positive_weights(grad_sim, self.beta / (2 * b))
            return GramGradient.apply(feats, grad_sim, value)

    @torch.no_grad()
    def _run_chains(self, logits: torch.Tensor, index: torch.Tensor, aug1: torch.Tensor | None,
                    aug2: torch.Tensor | None, num_steps: int, burn_in: int) -> torch.Tensor:
        """Run the M-H chains of the batch's anchors; return the (2B, 2B) counts of post-burn-in samples."""
        device, rows = logits.device, logits.shape[0]
        b, m = rows // 2, rows - 2
        row_ids = torch.arange(rows, device=device)
        partner = (row_ids + b) % rows
        sample = index.to(device).repeat(2)
        if self.num_augmentations is not None:
            width = self.num_augmentations
            view_key = torch.cat([aug1, aug2]).to(device)
            slot = view_key
        else:
            width = 2
            view_key = (row_ids >= b).long()  # view slot 0 / 1
            slot = torch.zeros_like(row_ids)
        view_code = sample * width + view_key  # (2B,) what a state pointing to each column's view stores

        # start from the stored states; recompute their score when their view is in the batch
        start_code = self.state[sample, slot]
        start_score = self.state_score[sample, slot].to(logits.dtype)
        sorted_codes, order = view_code.sort()
        where = torch.searchsorted(sorted_codes, start_code).clamp_max(rows - 1)
        col = order[where]
        found = (sorted_codes[where] == start_code) & (start_code >= 0) & (col != row_ids) & (col != partner)
        current = torch.where(found, col, torch.full_like(col, -1))
        score = torch.where(found, logits[row_ids, col], start_score)

        # uniform proposals over each row's 2B - 2 candidates (all views but its own two); a proposal is
        # accepted w.p. min(1, exp(s' - s)) <=> s' - log u > s with u ~ U(0, 1)
        gen = self.generator
        k = torch.randint(0, m, (num_steps, rows), generator=gen).to(device)
        log_u = torch.rand(num_steps, rows, generator=gen, dtype=logits.dtype).log_().to(device)
        proposal = k + (k >= torch.minimum(row_ids, partner)).long()
        proposal += (proposal >= torch.maximum(row_ids, partner)).long()  # (R, 2B) column indices
        proposal_score = logits.T.gather(0, proposal)  # logits[a, proposal[t, a]]
        key = proposal_score - log_u
        # chain state (column, score) as one (2, 2B) tensor: one comparison and one select per step
        # (columns are exact in floating point: 2B < 2**24)
        proposals = torch.stack([proposal.to(logits.dtype), proposal_score], dim=1)  # (R, 2, 2B)
        state = torch.stack([current.to(logits.dtype), score])

        first = 0 if self.record_trace else burn_in
        trace = torch.empty(num_steps - first, rows, dtype=logits.dtype, device=device)
        for t in range(num_steps):
            state = torch.where(key[t] > state[1], proposals[t], state)  # always accepts while score = -inf
            if t >= first:
                trace[t - first] = state[0]
        current, score = state[0].long(), state[1]
        trace = trace.long()

        final_code = torch.where(current >= 0, view_code[current.clamp_min(0)], start_code)
        for rows_of_view in (slice(0, b), slice(b, rows)):  # view-2 rows last: they keep a shared chain
            self.state[sample[rows_of_view], slot[rows_of_view]] = final_code[rows_of_view]
            self.state_score[sample[rows_of_view], slot[rows_of_view]] = score[rows_of_view].to(self.state_score.dtype)
        samples = trace[burn_in - first:].T  # (2B, R - P)
        samples = torch.where(samples >= 0, samples, rows)  # a state outside the batch: extra column, dropped
        counts = torch.zeros(rows, rows + 1, dtype=logits.dtype, device=device)
        counts.scatter_add_(1, samples, torch.ones(samples.shape, dtype=logits.dtype, device=device))
        counts = counts[:, :rows]
        self.last_counts = counts
        self.last_trace = trace.T if self.record_trace else None
        return counts
