"""Image-text model of the bimodal experiments: two encoders, linear projections, L2-normalised outputs.

iSogCLR section 6.2: ResNet-50 and DistilBERT, "the output embedding of each encoder is then
transformed to a lower-dimensional (256-d) representation by a linear layer and normalized":

    I_i = normalize(W_I f_I(x_i)),   T_i = normalize(W_T f_T(t_i)),

f_T the [CLS] state of DistilBERT. The features are normalised in float32 (also under autocast).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from .encoders import EncoderConfig, build_encoder
from .hub import missing_weights
from .text import TextEncoder, TextEncoderConfig, train_wordpiece

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
PROJECT_MEAN, PROJECT_STD = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)  # as augment.eval_transform (from-scratch encoders)


class BimodalModel(nn.Module):
    """``encode_image(x)`` (B, proj_dim) and ``encode_text(ids, mask)`` (B, proj_dim), unit norm."""

    def __init__(self, image_cfg: EncoderConfig, text_cfg: TextEncoderConfig, proj_dim: int,
                 vocab_size: int | None = None) -> None:
        super().__init__()
        self.image_encoder = build_encoder(image_cfg)
        self.text_encoder = TextEncoder(text_cfg, vocab_size)
        self.image_proj = nn.Linear(self.image_encoder.num_features, proj_dim)
        self.text_proj = nn.Linear(self.text_encoder.num_features, proj_dim)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image_proj(self.image_encoder(images)).float(), dim=1)

    def encode_text(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_proj(self.text_encoder(input_ids, attention_mask)).float(), dim=1)


def image_normalization(cfg: EncoderConfig) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Mean and std of the input normalisation: ImageNet's for pretrained weights, the project's otherwise."""
    return (IMAGENET_MEAN, IMAGENET_STD) if cfg.pretrained else (PROJECT_MEAN, PROJECT_STD)


def build_tokenizer(cfg: TextEncoderConfig, captions: Sequence[str]) -> PreTrainedTokenizerBase:
    """The pretrained model's tokenizer (from the local cache), or a WordPiece trained on ``captions``."""
    if cfg.pretrained:
        try:
            return AutoTokenizer.from_pretrained(cfg.pretrained, model_max_length=cfg.max_length)
        except OSError as err:
            raise missing_weights("the tokenizer of model.text_encoder", cfg.pretrained,
                                  ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "config.json"),
                                  "text_encoder.pretrained") from err
    return train_wordpiece(captions, cfg.vocab_size, cfg.max_length)


def tokenize(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, max_length) input ids and attention mask, padded and truncated (with [CLS] ... [SEP])."""
    out = tokenizer(list(texts), padding="max_length", truncation=True, max_length=max_length, return_tensors="pt")
    return out["input_ids"], out["attention_mask"]


def trim(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the padding columns no row of the batch uses (same outputs, less compute)."""
    length = int(attention_mask.sum(1).max())
    return input_ids[:, :length], attention_mask[:, :length]
