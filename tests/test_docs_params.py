"""Where docs/ states a number that params.yaml holds, it is params.yaml's number (the docs cannot go stale on
a knob): each sentence below is checked against the default profile."""

from __future__ import annotations

from functools import reduce

import pytest

from isogclr.config.profiles import load_params

from .conftest import ROOT

PARAMS = load_params(ROOT / "params.yaml")


def value(key: str):
    return reduce(lambda tree, part: tree[part], key.split("."), PARAMS)


def words(values) -> str:
    """[10, 40] -> '10 and 40'; [6] -> '6'."""
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


# (file, the sentence with {} for the value, the key of params.yaml, how the value is written)
STATEMENTS = [
    ("pipeline.md", "3 candidates (`tuning.candidates`)", "tuning.candidates", str),
    ("pipeline.md", "trained for {} epochs (`tuning.epochs`)", "tuning.epochs", str),
    ("pipeline.md", "{} epochs (`bimodal_tuning.epochs`", "bimodal_tuning.epochs", str),
    ("pipeline.md", "the reported runs train {}, `bimodal.epochs`", "bimodal.epochs", str),
    ("pipeline.md", "({} epochs on synth10_lt,\n`studies.ladder_synth10_lt.values`", "studies.ladder_synth10_lt.values",
     words),
    ("pipeline.md", "Table 1's {}-epoch runs", "train.epochs_by_dataset.synth10_lt", str),
]


@pytest.mark.parametrize(("doc", "sentence", "key", "fmt"), STATEMENTS, ids=[s[2] for s in STATEMENTS])
def test_the_docs_state_params_numbers(doc, sentence, key, fmt):
    text = (ROOT / "docs" / doc).read_text()
    expected = sentence.format(fmt(value(key))) if "{}" in sentence else sentence
    if "{}" not in sentence:  # the number is written in the sentence itself: it must be the key's
        assert str(value(key)) in sentence
    assert expected in text, f"docs/{doc} should say {expected!r} ({key} is {value(key)!r} in params.yaml)"
