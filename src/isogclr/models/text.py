"""Text encoder (DistilBERT, as in the iSogCLR bimodal experiments) and an offline WordPiece tokenizer.

Paper scale uses ``distilbert-base-uncased`` weights (from the Hugging Face cache; never
downloaded at run time here: ``HF_HUB_OFFLINE=1``). Mini scale builds a small DistilBERT from
a config and a WordPiece tokenizer trained on the training captions with ``tokenizers``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from torch import nn
from transformers import DistilBertConfig, DistilBertModel, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@dataclass(frozen=True)
class TextEncoderConfig:
    """``model.text_encoder`` in params.yaml. ``pretrained`` names a Hugging Face model (paper scale)."""

    pretrained: str | None = None  # e.g. "distilbert-base-uncased"
    vocab_size: int = 2000
    dim: int = 128
    n_layers: int = 2
    n_heads: int = 4
    hidden_dim: int = 256
    max_length: int = 32


def train_wordpiece(captions: Iterable[str], vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    """A lower-cased WordPiece tokenizer trained on ``captions`` (deterministic for the same input)."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(captions, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                                                show_progress=False))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls),
                                                                                                 ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=max_length, pad_token="[PAD]",
                                   unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


class TextEncoder(nn.Module):
    """DistilBERT; the output is the [CLS] token's hidden state (``num_features`` dims)."""

    def __init__(self, cfg: TextEncoderConfig, vocab_size: int | None = None) -> None:
        super().__init__()
        if cfg.pretrained:
            try:
                self.bert = DistilBertModel.from_pretrained(cfg.pretrained)
            except OSError as err:
                raise RuntimeError(f"text encoder weights {cfg.pretrained!r} are not in the local Hugging Face "
                                   "cache and the hub is offline (HF_HUB_OFFLINE=1); copy them into the cache "
                                   "or set model.text_encoder.pretrained: null") from err
        else:
            self.bert = DistilBertModel(DistilBertConfig(
                vocab_size=vocab_size or cfg.vocab_size, dim=cfg.dim, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                hidden_dim=cfg.hidden_dim, max_position_embeddings=max(cfg.max_length, 32)))
        self.num_features = self.bert.config.dim

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]
