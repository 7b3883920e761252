"""Sampling: greedy is argmax, seeded draws follow softmax(logits / T) restricted to the
top-p nucleus, the logits row is never written."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.llm import LLMError, Sampler

LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0, 3.0, 1.5, -2.0], np.float32)
DRAWS = 12000


def _softmax(x, t):
    e = np.exp((x - x.max()) / t)
    return e / e.sum()


def _frequencies(sampler, row, n=DRAWS):
    counts = np.bincount([sampler(row) for _ in range(n)], minlength=len(row))
    return counts / n


def test_greedy_is_argmax_first_of_ties():
    s = Sampler(len(LOGITS), temperature=0.0)
    assert s(LOGITS) == 5
    assert s(np.array([1.0, 4.0, 4.0, 0.0], np.float32)) == 1
    with pytest.raises(LLMError, match="NaN"):
        s(np.array([1.0, np.nan, 0.0], np.float32))


def test_row_is_not_written_and_vocab_padding_ignored():
    row = LOGITS.copy()
    row[-1] = 100.0  # a padded id past the tokenizer's vocabulary: never a candidate
    s = Sampler(len(LOGITS) - 1, temperature=1.0, top_p=1.0, seed=0)
    before = row.copy()
    drawn = {s(row) for _ in range(2000)}
    assert np.array_equal(row, before)
    assert max(drawn) < len(LOGITS) - 1
    assert Sampler(len(LOGITS) - 1)(row) != len(LOGITS) - 1


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_distribution(temperature):
    s = Sampler(len(LOGITS), temperature=temperature, top_p=1.0, seed=123)
    freq = _frequencies(s, LOGITS)
    expected = _softmax(LOGITS.astype(np.float64), temperature)
    # 12000 draws: the standard error of a frequency is at most 0.0046 (0.02: 4.4 sigma)
    assert np.abs(freq - expected).max() < 0.02, (freq, expected)
    assert np.allclose(s.probabilities(LOGITS), expected)


@pytest.mark.parametrize("top_p", [0.5, 0.8, 0.95])
def test_top_p_distribution(top_p):
    s = Sampler(len(LOGITS), temperature=1.0, top_p=top_p, seed=7)
    p = _softmax(LOGITS.astype(np.float64), 1.0)
    order = np.argsort(-p)
    cum = np.cumsum(p[order])
    k = int(np.argmax(cum > top_p)) + 1  # smallest set whose mass exceeds top_p
    nucleus = np.zeros_like(p)
    nucleus[order[:k]] = p[order[:k]]
    nucleus /= nucleus.sum()
    freq = _frequencies(s, LOGITS)
    assert set(np.flatnonzero(freq)) <= set(order[:k])  # nothing outside the nucleus
    assert np.abs(freq - nucleus).max() < 0.02, (freq, nucleus)
    assert np.allclose(s.probabilities(LOGITS), nucleus)


def test_seeded_draws_repeat():
    a = [Sampler(len(LOGITS), 1.0, 0.9, seed=42)(LOGITS) for _ in range(1)]
    s1, s2, s3 = (Sampler(len(LOGITS), 1.0, 0.9, seed=x) for x in (42, 42, 43))
    d1, d2, d3 = ([s(LOGITS) for _ in range(200)] for s in (s1, s2, s3))
    assert d1 == d2 and d1 != d3 and a[0] == d1[0]


def test_half_precision_logits():
    s = Sampler(len(LOGITS), temperature=1.0, top_p=1.0, seed=1)
    freq = _frequencies(s, LOGITS.astype(np.float16), 5000)
    assert np.abs(freq - _softmax(LOGITS.astype(np.float64), 1.0)).max() < 0.03


def test_bad_arguments():
    with pytest.raises(LLMError, match="temperature"):
        Sampler(4, temperature=-1)
    with pytest.raises(LLMError, match="top_p"):
        Sampler(4, temperature=1, top_p=0)
