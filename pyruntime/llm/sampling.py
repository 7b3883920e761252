"""Choosing the next token from one row of logits: greedy, temperature, top-p, seeded.

The rule is ExecuTorch's sampler's (``extension/llm/sampler``): temperature 0 is
argmax (the first of equal maxima); otherwise softmax(logits / temperature),
then top-p keeps the smallest set of most likely tokens whose probability sum
exceeds ``top_p`` (candidates below ``(1 - top_p) / (n - 1)`` are dropped
before sorting, which cannot change the result) and draws from it. Only the
first ``vocab_size`` logits are candidates (a program's vocabulary may be
padded past the tokenizer's). The random numbers come from numpy's PCG64,
seeded by ``seed``: the same seed gives the same tokens, run after run.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.fast.deferred import njit
from pyruntime.llm.errors import LLMError


class Sampler:
    """``sampler(row) -> token id``; ``row`` is read, never written (one scratch row).

    >>> s = Sampler(4, temperature=0.0)
    >>> s(np.array([0.1, 2.0, -1.0, 2.0], np.float32))
    1
    """

    def __init__(self, vocab_size: int, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None):
        if not temperature >= 0:
            raise LLMError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise LLMError(f"top_p must be in (0, 1], got {top_p}")
        self.vocab_size = int(vocab_size)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self._scratch = np.empty(self.vocab_size, np.float32)
        self._index = np.empty(self.vocab_size, np.int64)

    def __call__(self, row: np.ndarray) -> int:
        logits = row[:self.vocab_size]
        if self.temperature == 0.0:
            i = int(logits.argmax())
            if logits[i] != logits[i]:
                raise LLMError("the program returned NaN logits")
            return i
        if logits.dtype != np.float32:
            logits = logits.astype(np.float32)
        i = _sample(logits, np.float32(1.0 / self.temperature), self.top_p, self.rng.random(),
                    self._scratch, self._index)
        if i < 0:
            raise LLMError("the program returned logits that are not finite")
        return i

    def probabilities(self, row: np.ndarray) -> np.ndarray:
        """The distribution ``__call__`` draws from (after temperature and top-p), for tests."""
        logits = np.asarray(row[:self.vocab_size], np.float64)
        if self.temperature == 0.0:
            out = np.zeros(len(logits))
            out[int(logits.argmax())] = 1.0
            return out
        p = np.exp((logits - logits.max()) / self.temperature)
        p /= p.sum()
        if self.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            cdf = np.cumsum(p[order])
            last = min(int(np.searchsorted(cdf, self.top_p, side="right")), len(p) - 1)
            keep = np.zeros(len(p), bool)
            keep[order[:last + 1]] = True
            p = np.where(keep, p, 0.0)
            p /= p.sum()
        return p


@njit(cache=True, nogil=True)
def _sample(logits, inv_t, top_p, coin, probs, index):
    """One draw from softmax(logits * inv_t), within the top-p nucleus when top_p < 1;
    -1 when the logits are not finite. ``probs``/``index``: scratch of the vocab size."""
    n = logits.shape[0]
    m = logits[0] * inv_t
    for i in range(1, n):
        v = logits[i] * inv_t
        if v > m:
            m = v
    total = 0.0
    for i in range(n):
        e = math.exp(logits[i] * inv_t - m)
        probs[i] = e
        total += e
    if not (total > 0.0 and total < math.inf) or m != m:
        return -1
    if top_p >= 1.0:
        r = coin * total
        c = 0.0
        for i in range(n):
            c += probs[i]
            if r < c:
                return i
        return n - 1
    # nucleus: candidates >= (1 - top_p) / (n - 1) of the mass (none below can be in it)
    cutoff = (1.0 - top_p) / max(1, n - 1) * total
    k = 0
    for i in range(n):
        if probs[i] >= cutoff:
            index[k] = i
            k += 1
    cand = index[:k]
    order = np.argsort(-probs[cand], kind="mergesort")  # stable: ties keep id order
    c = 0.0
    last = k - 1
    limit = top_p * total
    for j in range(k):
        c += probs[cand[order[j]]]
        if c > limit:
            last = j
            break
    r = coin * c
    c2 = 0.0
    for j in range(last + 1):
        c2 += probs[cand[order[j]]]
        if r < c2:
            return cand[order[j]]
    return cand[order[last]]
