"""Zero-shot image-text retrieval and classification (the CLIP / Karpathy protocols).

The metrics take features; :func:`encode_batches` makes them from a set given as an iterable of batches (in
memory: a tensor's splits; streamed: a loader's batches), keeping only the features, so evaluating a set whose
images do not fit in memory costs n x d floats plus the batches in flight.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F


@torch.no_grad()
def encode_batches(encode: Callable[[torch.Tensor], torch.Tensor], batches: Iterable[torch.Tensor]) -> torch.Tensor:
    """(n, d) features of a set given as ``batches``: ``encode(batch)`` of each in turn, moved to the CPU and
    concatenated; a batch is released once encoded."""
    return torch.cat([encode(batch).cpu() for batch in batches])


@torch.no_grad()
def retrieval_recall(image_x: torch.Tensor, text_x: torch.Tensor, text_to_image: torch.Tensor,
                     ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Recall@K (%) for image retrieval (IR: text -> its image) and text retrieval (TR: image -> any of its texts).

    Args:
        image_x: (N_img, d) image features; text_x: (N_txt, d) text features (normalised here).
        text_to_image: (N_txt,) index of each caption's image (five captions per image in Karpathy splits).
    """
    image_x, text_x = F.normalize(image_x.float(), dim=1), F.normalize(text_x.float(), dim=1)
    sim = image_x @ text_x.T  # (N_img, N_txt)
    out = {}
    # IR: for each text, the rank of its image among all images
    ir_scores = sim.T  # (N_txt, N_img)
    true_ir = ir_scores.gather(1, text_to_image[:, None])
    ir_rank = (ir_scores > true_ir).sum(1)
    # TR: for each image, the best rank among its captions: the best score of its own captions (-inf without any),
    # taken per caption (no N_img x N_txt mask: the similarity and one comparison are the only quadratic memory)
    own = true_ir[:, 0]  # (N_txt,) each caption's score with its image
    best_true = sim.new_full((len(image_x),), float("-inf")).scatter_reduce(0, text_to_image, own, "amax")[:, None]
    tr_rank = (sim > best_true).sum(1)
    for k in ks:
        out[f"ir_r{k}"] = 100.0 * (ir_rank < k).float().mean().item()
        out[f"tr_r{k}"] = 100.0 * (tr_rank < k).float().mean().item()
    return out


@torch.no_grad()
def class_embeddings(text_features_per_class: list[torch.Tensor]) -> torch.Tensor:
    """Each class: the normalised mean of its normalised prompt-template embeddings (CLIP's ensembling)."""
    return F.normalize(torch.stack([F.normalize(t.float(), dim=1).mean(0) for t in text_features_per_class]), dim=1)


@torch.no_grad()
def zero_shot_accuracy(image_x: torch.Tensor, labels: torch.Tensor, class_x: torch.Tensor,
                       ks: tuple[int, ...] = (1, 3, 5)) -> dict[str, float]:
    """Top-k accuracy (%) of classifying images by their most similar class embedding."""
    logits = F.normalize(image_x.float(), dim=1) @ F.normalize(class_x.float(), dim=1).T
    top = logits.topk(max(ks), dim=1).indices
    hits = top == labels[:, None]
    return {f"top{k}": 100.0 * hits[:, :k].any(1).float().mean().item() for k in ks}


def retrieval_chance(num_images: int, captions_per_image: int, ks: tuple[int, ...] = (1, 5, 10)) -> dict[str, float]:
    """Recall@K (%) of a random ranking, keyed as :func:`retrieval_recall`: IR (a caption's one image among
    ``num_images``) k / N; TR (any of an image's ``captions_per_image`` among all N x c captions)
    1 - C(Nc - c, k) / C(Nc, k)."""
    n_text = num_images * captions_per_image
    out = {}
    for k in ks:
        out[f"ir_r{k}"] = 100.0 * min(k, num_images) / num_images
        out[f"tr_r{k}"] = 100.0 * (1 - math.comb(n_text - captions_per_image, k) / math.comb(n_text, k))
    return out


def zero_shot_chance(num_classes: int, ks: tuple[int, ...] = (1, 3, 5)) -> dict[str, float]:
    """Top-k accuracy (%) of a random class ranking, keyed as :func:`zero_shot_accuracy`: k / C."""
    return {f"top{k}": 100.0 * min(k, num_classes) / num_classes for k in ks}
