"""EMC2: Metropolis-Hastings negative sampling for the global contrastive loss (Yau et al., 2024)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .conventions import check_index
from .registry import register_loss
from .two_views import full_precision, masked_logsumexp, two_view_batch


@register_loss("emc2")
class EMC2Loss(nn.Module):
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
            batch = two_view_batch(z1, z2)
            num_steps, burn_in = self.steps(b)
            logits = self.beta * batch.sim.detach()
            counts = self._run_chains(logits, batch.neg_mask, index, aug1, aug2, num_steps, burn_in)
            used = counts.sum(1)
            negative_term = (counts * batch.sim).sum(1) / used.clamp_min(1.0)  # rows with no sample: no negative
            surrogate = self.beta * (negative_term - batch.pos).mean()
            value = (masked_logsumexp(logits, batch.neg_mask) - math.log(batch.num_negatives)
                     - self.beta * batch.pos.detach()).mean()
            return surrogate - surrogate.detach() + value

    @torch.no_grad()
    def _run_chains(self, logits: torch.Tensor, neg_mask: torch.Tensor, index: torch.Tensor,
                    aug1: torch.Tensor | None, aug2: torch.Tensor | None, num_steps: int,
                    burn_in: int) -> torch.Tensor:
        device, rows = logits.device, logits.shape[0]
        b, m = rows // 2, rows - 2
        row_ids = torch.arange(rows, device=device)
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
        found = (sorted_codes[where] == start_code) & (start_code >= 0) & neg_mask[row_ids, col]
        current = torch.where(found, col, torch.full_like(col, -1))
        score = torch.where(found, logits[row_ids, col], start_score)

        # uniform proposals over each row's 2B - 2 candidates (all views but its own two)
        gen = self.generator
        k = torch.randint(0, m, (num_steps, rows), generator=gen).to(device)
        log_u = torch.rand(num_steps, rows, generator=gen, dtype=torch.float64).log().to(device, logits.dtype)
        partner = (row_ids + b) % rows
        lo, hi = torch.minimum(row_ids, partner), torch.maximum(row_ids, partner)
        proposal = k + (k >= lo).long()
        proposal = proposal + (proposal >= hi).long()  # (R, 2B) column indices
        proposal_score = logits.T.gather(0, proposal)  # logits[row, proposal[t, row]]

        counts = torch.zeros(rows * (rows + 1), dtype=logits.dtype, device=device)
        base = row_ids * (rows + 1)
        ones = torch.ones(rows, dtype=logits.dtype, device=device)
        trace = torch.empty(num_steps, rows, dtype=torch.long, device=device) if self.record_trace else None
        for t in range(num_steps):
            accept = log_u[t] < proposal_score[t] - score  # always true while score = -inf
            current = torch.where(accept, proposal[t], current)
            score = torch.where(accept, proposal_score[t], score)
            if t >= burn_in:
                counts.index_add_(0, base + torch.where(current >= 0, current, rows), ones)
            if trace is not None:
                trace[t] = current

        final_code = torch.where(current >= 0, view_code[current.clamp_min(0)], start_code)
        for rows_of_view in (slice(0, b), slice(b, rows)):  # view-2 rows last: they keep a shared chain
            self.state[sample[rows_of_view], slot[rows_of_view]] = final_code[rows_of_view]
            self.state_score[sample[rows_of_view], slot[rows_of_view]] = score[rows_of_view].to(self.state_score.dtype)
        counts = counts.view(rows, rows + 1)[:, :rows]
        self.last_counts = counts
        self.last_trace = trace.T if trace is not None else None
        return counts
