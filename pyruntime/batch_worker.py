"""What one batch worker does, whichever engine runs it (``pyruntime.batch``'s processes,
``pyruntime.batch_ray``'s actors): load the method once, run input sets on it, turn any
failure into a message. Both engines import this; neither imports the other."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.pool import as_program, coerce_inputs, load_as


@dataclass(frozen=True)
class Config:
    """What every worker loads: the method, tier and device profile (a DeviceProfile)."""

    method: str = "forward"
    tier: str = "fast"
    profile: object = None
    math: str | None = None  # None: the worker's default (``$PYRUNTIME_MATH``)


def split_sets(sets: dict, workers: int) -> list:
    """The sets in chunks: small enough to share among the workers, a few per worker."""
    items = list(sets.items())
    size = max(1, min(16, len(items) // (workers * 4 or 1)))
    return [items[i:i + size] for i in range(0, len(items), size)]


class Runner:
    """One loaded method in a worker; ``run`` turns any failure into a message."""

    def __init__(self, source, cfg: Config):
        self.program = as_program(source)
        self.meta = self.program.metadata(cfg.method)
        self.method = load_as(self.program, cfg.method, cfg.tier, cfg.profile, math=cfg.math)

    def run(self, k, arrays):
        try:
            missing = [f"set{k}_arg{i}" for i, a in enumerate(arrays) if a is None]
            if missing:
                raise ExecuTorchError(ErrorCode.InvalidArgument,
                                      f"missing {', '.join(missing)} in the inputs")
            outs = self.method.execute(coerce_inputs(self.meta, arrays))
            return True, [_storable(o, j) for j, o in enumerate(outs)]
        except ExecuTorchError as e:
            return False, str(e)
        except Exception as e:  # noqa: BLE001 - a bug in a kernel must not stop the batch
            return False, str(ExecuTorchError(ErrorCode.Internal, f"{type(e).__name__}: {e}"))

    def run_keys(self, z, k, keys):
        try:
            arrays = [None if key is None else z[key] for key in keys]
        except Exception as e:  # noqa: BLE001 - a corrupt member fails its set only
            return False, f"cannot read set {k} from the inputs: {type(e).__name__}: {e}"
        return self.run(k, arrays)


def _storable(o, j):
    if isinstance(o, np.ndarray):
        return o
    if isinstance(o, (bool, int, float)):
        return np.asarray(o)
    raise ExecuTorchError(ErrorCode.NotSupported,
                          f"output {j} is a {type(o).__name__}; .npz outputs hold tensors and "
                          "scalars only")
