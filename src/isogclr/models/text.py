"""Text encoder (DistilBERT, as in the iSogCLR bimodal experiments) and an offline WordPiece tokenizer.

Paper scale uses ``distilbert-base-uncased`` weights (from the Hugging Face cache; never
downloaded at run time here: ``HF_HUB_OFFLINE=1``). Mini scale builds a small DistilBERT from
a config and a WordPiece tokenizer trained on the training captions with ``tokenizers``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from torch import nn

from .hub import missing_weights

if TYPE_CHECKING:  # transformers takes ~3 s to import; unimodal runs validate this module's config without it
    from transformers import PreTrainedTokenizerFast

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
    # DistilBERT's dropout and attention dropout (its default and the papers' value: 0.1). Dropout masks are drawn
    # from each process's generator, not keyed by sample (isogclr.data.keyed): with dropout > 0, runs on 1 and W
    # processes draw different masks. The mini profile sets 0, so its numbers do not depend on the process count.
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0 <= self.dropout < 1:
            raise ValueError(f"text_encoder.dropout must be a number in [0, 1), got {self.dropout!r}")


def train_wordpiece(captions: Iterable[str], vocab_size: int, max_length: int) -> PreTrainedTokenizerFast:
    """A lower-cased WordPiece tokenizer whose vocabulary is learned from ``captions``, deterministically.

    The vocabulary: the special tokens, every character seen (alone and as a ``##`` continuation,
    so no word is ever unknown), then the most frequent whole words (ties broken alphabetically)
    up to ``vocab_size``. (``tokenizers``' own WordPiece trainer breaks ties in hash-map order,
    which changes the vocabulary from one process to the next.)
    """
    from transformers import PreTrainedTokenizerFast

    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for caption in captions:
        counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(caption)))
    chars = sorted({c for word in counts for c in word})
    vocab = SPECIAL_TOKENS + chars + [f"##{c}" for c in chars]
    words = sorted((w for w in counts if len(w) > 1), key=lambda w: (-counts[w], w))
    vocab += words[:max(vocab_size - len(vocab), 0)]
    tok = Tokenizer(models.WordPiece(vocab={t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls),
                                                                                                 ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=max_length, pad_token="[PAD]",
                                   unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


class TextEncoder(nn.Module):
    """DistilBERT; the output is the [CLS] token's hidden state (``num_features`` dims)."""

    def __init__(self, cfg: TextEncoderConfig, vocab_size: int | None = None) -> None:
        super().__init__()
        from transformers import DistilBertConfig, DistilBertModel

        if cfg.pretrained:
            try:
                self.bert = DistilBertModel.from_pretrained(cfg.pretrained, dropout=cfg.dropout,
                                                            attention_dropout=cfg.dropout)
            except OSError as err:
                raise missing_weights("model.text_encoder", cfg.pretrained, ("model.safetensors", "config.json"),
                                      "text_encoder.pretrained") from err
        else:
            self.bert = DistilBertModel(DistilBertConfig(
                vocab_size=vocab_size or cfg.vocab_size, dim=cfg.dim, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                hidden_dim=cfg.hidden_dim, max_position_embeddings=max(cfg.max_length, 32), dropout=cfg.dropout,
                attention_dropout=cfg.dropout))
        self.num_features = self.bert.config.dim

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]
