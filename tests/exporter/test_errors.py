"""Unsupported constructs fail at export with a message naming the node and the
model's source line."""
from __future__ import annotations

import pytest
import torch

from pyruntime import exporter


@torch.library.custom_op("exporter_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x):
    return torch.empty_like(x)


class NoOutVariant(torch.nn.Module):
    def forward(self, x):
        return twice(x) + 1  # MARK: no-out-variant


class Unbounded(torch.nn.Module):
    def forward(self, x):
        n = x.max().int().item()
        torch._check(n >= 0)
        return torch.ones(n)  # MARK: unbounded


def _line(marker: str) -> int:
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if f"# MARK: {marker}" in text and "def _line" not in text:
                return i
    raise AssertionError(marker)


def test_op_without_out_variant_names_node_and_line():
    with pytest.raises(exporter.ExportError) as e:
        exporter.export(NoOutVariant(), (torch.randn(3),))
    msg = str(e.value)
    assert "'twice'" in msg and "no out variant" in msg
    assert f"test_errors.py:{_line('no-out-variant')}" in msg


def test_unbounded_data_dependent_shape_names_node_and_line():
    with pytest.raises(exporter.ExportError) as e:
        exporter.export(Unbounded(), (torch.tensor([3.0, 1.0]),))
    msg = str(e.value)
    assert "no upper bound" in msg and "torch._check" in msg
    assert f"test_errors.py:{_line('unbounded')}" in msg


def test_unknown_planner_is_refused():
    with pytest.raises(exporter.ExportError, match="memory planner"):
        exporter.export(torch.nn.ReLU(), (torch.randn(2),), memory_planner="fastest")
