"""Streamed evaluation: the zero-shot and retrieval sets read a batch at a time give the in-memory metrics, memory
flat in the set's size, and the paper profile's image-text runs evaluate through the streamed path."""

from __future__ import annotations

import copy
import tracemalloc

import numpy as np
import pytest
import torch

from isogclr.config.profiles import load_params
from isogclr.data.captions import KarpathyStream
from isogclr.data.pair_semantics import PairSpec
from isogclr.data.pairs_folder import StreamedZeroShot, ZeroShotSet, load_pairs_folder, stream_zeroshot
from isogclr.data.synthetic_pairs import write_synthetic_pairs
from isogclr.eval.retrieval import encode_batches, retrieval_recall, zero_shot_accuracy

from .conftest import ROOT


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_stream") / "pairs"
    write_synthetic_pairs(PairSpec(seed=3, image_size=24, num_pairs=40, num_clusters=10, retrieval_images=13,
                                   zeroshot_per_class=3), root)
    return root


def _encoder(dim: int = 8):
    """A fixed random image encoder: uint8 (b, 3, s, s) -> (b, dim)."""
    weight = torch.randn(dim, 3 * 4 * 4, generator=torch.Generator().manual_seed(0))

    def encode(images: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.adaptive_avg_pool2d(images.float() / 255.0, 4).flatten(1)
        return pooled @ weight.T
    return encode


@pytest.mark.parametrize("size", [24, 16])  # the stored size, and a resize
def test_streamed_sets_give_the_in_memory_batches_and_metrics(pairs, size):
    memory = load_pairs_folder(pairs, size, train=False)
    streamed = load_pairs_folder(pairs, size, train=False, stream_eval=True, num_workers=1)
    assert list(memory.zeroshot) == list(streamed.zeroshot) == ["synth10", "synth100"]
    assert list(memory.retrieval) == list(streamed.retrieval) == ["retrieval_a", "retrieval_b"]
    encode = _encoder()
    class_x = torch.randn(100, 8, generator=torch.Generator().manual_seed(1))
    for name, zs in memory.zeroshot.items():
        st = streamed.zeroshot[name]
        assert isinstance(zs, ZeroShotSet) and isinstance(st, StreamedZeroShot) and len(st) == len(zs)
        assert torch.equal(torch.cat(list(st.batches(7))), zs.images)  # 7 divides neither 30 nor 300
        assert torch.equal(st.labels, zs.labels) and st.prompts() == zs.prompts()
        k = len(zs.classnames)
        metrics = zero_shot_accuracy(encode_batches(encode, st.batches(7)), st.labels, class_x[:k])
        assert metrics == zero_shot_accuracy(encode_batches(encode, zs.batches(7)), zs.labels, class_x[:k])
    for name, ret in memory.retrieval.items():
        st = streamed.retrieval[name]
        assert isinstance(st, KarpathyStream) and len(st) == len(ret) == 13
        assert st.captions == ret.captions and st.image_ids == ret.image_ids
        assert torch.equal(st.image_index, ret.image_index)
        assert torch.equal(torch.cat(list(st.batches(5))), ret.images)
        text_x = torch.randn(len(ret.captions), 8, generator=torch.Generator().manual_seed(2))
        metrics = retrieval_recall(encode_batches(encode, st.batches(5)), text_x, st.image_index)
        assert metrics == retrieval_recall(encode_batches(encode, ret.batches(5)), text_x, ret.image_index)


def _peak_reading(folder, n: int) -> tuple[int, int]:
    """(peak bytes of Python and numpy allocations while reading a deflated npz of n 32-px images by batches of 8,
    the images' bytes)."""
    folder.mkdir()
    images = np.random.default_rng(0).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    np.savez_compressed(folder / "images.npz", images=images, labels=np.arange(n) % 4)
    (folder / "classnames.txt").write_text("a\nb\nc\nd\n")
    (folder / "templates.txt").write_text("a photo of a {}.\n")
    zs = stream_zeroshot(folder, 32)
    tracemalloc.start()
    total = 0
    for batch in zs.batches(8):
        total += batch.shape[0]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total == n
    return peak, images.nbytes


def test_streamed_zeroshot_memory_is_flat_in_the_set_size(tmp_path):
    """256 and 2,048 images (0.8 and 6.3 MB): the peak while reading is the same (a batch of 24 KB plus the zip
    reader's buffers), a fraction of the larger set."""
    small, _ = _peak_reading(tmp_path / "small", 256)
    large, nbytes = _peak_reading(tmp_path / "large", 2048)
    assert large < 1.25 * small + 16_384 and large < nbytes / 16


def test_truncated_or_wrong_npz_is_named(tmp_path):
    folder = tmp_path / "zs"
    folder.mkdir()
    np.savez(folder / "images.npz", images=np.zeros((4, 8, 8), dtype=np.uint8), labels=np.zeros(4))
    (folder / "classnames.txt").write_text("a\n")
    (folder / "templates.txt").write_text("{}\n")
    with pytest.raises(ValueError, match=r"images\.npz.*uint8 \(N, H, W, 3\)"):
        stream_zeroshot(folder, 8)


def test_stream_eval_needs_train_false(pairs):
    with pytest.raises(ValueError, match="stream_eval needs train=False"):
        load_pairs_folder(pairs, 24, stream_eval=True)


class _Stop(Exception):
    pass


def test_paper_profile_evaluates_through_the_streamed_path(pairs, tmp_path, monkeypatch):
    """profiles/paper.yaml streams its image-text runs (``bimodal.stream``), so the trainer reads the folder's
    evaluation sets (``retrieval_*/dataset.json``, ``zeroshot/*/images.npz``) streamed, not into memory."""
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.data import pairs_folder
    from isogclr.train import bimodal

    params = copy.deepcopy(load_params(ROOT / "profiles" / "paper.yaml"))
    assert params["bimodal"]["stream"] is not None
    params["bimodal"].update(data=str(pairs), device="cpu")
    cfg = bimodal_run_config(params, "isogclr_bimodal", 0)
    assert cfg.stream is not None
    seen = {}

    def spy(*args, **kwargs):
        seen["kwargs"] = kwargs
        seen["data"] = pairs_folder.load_pairs_folder(*args, **kwargs)
        raise _Stop

    monkeypatch.setattr(bimodal, "load_pairs_folder", spy)
    monkeypatch.setattr(bimodal, "TrainPairsStream", lambda *a, **k: None)
    with pytest.raises(_Stop):
        bimodal.train_bimodal_run(cfg, tmp_path / "run", tmp_path / "ckpt")
    assert seen["kwargs"]["stream_eval"] and not seen["kwargs"]["train"]
    data = seen["data"]
    assert data.zeroshot and all(isinstance(z, StreamedZeroShot) for z in data.zeroshot.values())
    assert data.retrieval and all(isinstance(r, KarpathyStream) for r in data.retrieval.values())


def test_the_trainer_evaluator_gives_the_same_metrics_streamed(pairs):
    """The image-text runs' Evaluator (one code path) on the folder read in memory and streamed: the same metrics
    (an untrained model; eval_batch_size 4 divides none of the sets)."""
    from isogclr.config.bimodal import bimodal_run_config
    from isogclr.models.bimodal import BimodalModel, build_tokenizer
    from isogclr.train.bimodal import Evaluator

    params = {"methods": {"clip": {"loss": "clip", "tau": 0.05}},
              "bimodal": {"methods": ["clip"], "seeds": [0], "data": str(pairs), "image_size": 16, "epochs": 1,
                          "batch_size": 8, "lr": 1e-3, "warmup_iters": 1, "final_lr": 1e-6, "proj_dim": 8,
                          "eval_batch_size": 4, "device": "cpu", "num_threads": 1,
                          "image_encoder": {"arch": "resnet18", "width": 4, "cifar_stem": True},
                          "text_encoder": {"vocab_size": 200, "dim": 16, "n_layers": 1, "n_heads": 2,
                                           "hidden_dim": 32, "max_length": 24}}}
    cfg = bimodal_run_config(params, "clip", 0)
    memory = load_pairs_folder(pairs, 16, train=False)
    streamed = load_pairs_folder(pairs, 16, train=False, stream_eval=True, num_workers=1)
    tokenizer = build_tokenizer(cfg.text_encoder, memory.retrieval["retrieval_a"].captions)
    torch.manual_seed(0)
    model = BimodalModel(cfg.image_encoder, cfg.text_encoder, cfg.train.proj_dim, len(tokenizer))
    device = torch.device("cpu")
    metrics = Evaluator(memory, tokenizer, cfg, device)(model)
    assert len(metrics) == 2 * 6 + 2 * 3
    assert Evaluator(streamed, tokenizer, cfg, device)(model) == metrics
    assert Evaluator(streamed, tokenizer, cfg, device).chance() == Evaluator(memory, tokenizer, cfg, device).chance()


def _recall_with_a_mask(image_x, text_x, text_to_image, ks=(1, 5, 10)):
    """Recall@K with the N_img x N_txt ownership mask (the former formula), the reference for the masked-free one."""
    image_x, text_x = torch.nn.functional.normalize(image_x.float(), dim=1), torch.nn.functional.normalize(
        text_x.float(), dim=1)
    sim = image_x @ text_x.T
    ir_rank = (sim.T > sim.T.gather(1, text_to_image[:, None])).sum(1)
    owner = torch.nn.functional.one_hot(text_to_image, num_classes=len(image_x)).T.bool()
    tr_rank = (sim > sim.masked_fill(~owner, float("-inf")).max(1, keepdim=True).values).sum(1)
    return {**{f"ir_r{k}": 100.0 * (ir_rank < k).float().mean().item() for k in ks},
            **{f"tr_r{k}": 100.0 * (tr_rank < k).float().mean().item() for k in ks}}


def test_recall_without_the_mask_is_the_masked_one():
    """Ties (rounded features, captions equal to images), uneven captions per image and images without any."""
    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        n, per = int(torch.randint(2, 20, (1,), generator=g)), int(torch.randint(1, 6, (1,), generator=g))
        image, text = torch.randn(n, 4, generator=g), torch.randn(n * per, 4, generator=g)
        if trial % 2:
            image, text = image.round(), text.round()
            text[:n] = image
        index = torch.arange(n).repeat_interleave(per) if trial % 3 else torch.randint(0, n, (n * per,), generator=g)
        assert retrieval_recall(image, text, index) == _recall_with_a_mask(image, text, index)
