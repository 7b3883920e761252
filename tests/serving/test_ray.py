"""Ray: `pyruntime batch --engine ray` (actors, arrays through the object store) gives
exactly the sequential outputs, a bad set fails alone; BatchPredictor runs under Ray
Data's map_batches with 2 actors. One local Ray instance (2 CPUs) for the module."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from pyruntime.cli import main
from pyruntime.pool import BatchPredictor
from tests import parts
from tests.serving.common import (check_against_oracles, input_sets, program, read_outputs,
                                  sequential, write_sets)

ray = parts.importorskip("ray", "ray")  # in the test extra; skipped only where it is missing


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield
    ray.shutdown()


@pytest.mark.parametrize("name, bad", [("mlp_dynamic", 5), ("xnnpack_mlp", None)])
def test_ray_engine_matches_sequential(local_ray, tmp_path, capsys, name, bad):
    sets = input_sets(name)
    if bad is not None:  # dynamic [b, 16] with b <= 16: 17 rows is over the bound
        sets[bad] = [np.ones((17, 16), np.float32)]
    write_sets(tmp_path / "in.npz", sets)
    rc = main(["batch", str(program(name).pte_path), "--inputs", str(tmp_path / "in.npz"),
               "--out", str(tmp_path / "out.npz"), "--workers", "2", "--engine", "ray"])
    err = capsys.readouterr().err
    assert "2 ray worker(s)" in err
    if bad is None:
        assert rc == 0, err
    else:
        assert rc == 1
        assert f"error: set {bad}: [InvalidArgument 0x12] method 'forward' input 0: " \
               "dimension 0 is 17, above its upper bound 16" in err
    skip = set() if bad is None else {bad}
    check_against_oracles(name, sets, read_outputs(tmp_path / "out.npz"), "fast", skip=skip)
    assert ray.is_initialized()  # the caller's instance is left running


def test_batch_predictor_under_ray_data(local_ray):
    fx = program("mlp_dynamic")
    rows = np.random.default_rng(4).standard_normal((12, 16)).astype(np.float32)
    ds = ray.data.from_items([{"id": i, "data": r} for i, r in enumerate(rows)],
                             override_num_blocks=4)
    out = ds.map_batches(BatchPredictor, fn_constructor_args=(str(fx.pte_path),),
                         batch_size=3, concurrency=2).take_batch(12)
    want = np.stack([w[0][0] for w in sequential(fx.pte_path, [[r[None]] for r in rows],
                                                 "fast")])
    assert sorted(out) == ["id", "out0"]  # "id" passes through; Ray may reorder blocks
    np.testing.assert_array_equal(out["out0"], want[out["id"]])
