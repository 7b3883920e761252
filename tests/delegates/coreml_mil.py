"""The harness of the one-op MIL tests (test_coreml_ops.py, test_coreml_ops_nn.py).

A case is ``(build, inputs, reference)``: ``build(**vars)`` adds MIL ops with
coremltools' builder, ``inputs`` are numpy arrays, ``reference(**inputs)`` the
expected outputs, or None to use coremltools' own definition of the op: the same
ops built on constant inputs are folded by the converter (``value_inference``,
numpy) and the converted model holds the answer as constants. All cases of a
module are converted together, in two ML Programs (one conversion per program
keeps the tests fast), and run by our interpreter. Tolerance: 1e-5 relative to
max(1, max |expected|).
"""
from __future__ import annotations

import numpy as np

from tests import parts

ct = parts.importorskip("coremltools", "coreml")
torch = parts.importorskip("torch", "executorch")
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

from pyruntime.delegates.coreml.interpreter import CompiledFunction  # noqa: E402
from pyruntime.delegates.coreml.model import load_program  # noqa: E402
from pyruntime.delegates.coreml.payload import Directory  # noqa: E402

_R = np.random.default_rng(7)
X = _R.standard_normal((2, 3, 4, 5)).astype(np.float32)
U = _R.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)  # inside (-1, 1)
P = _R.uniform(0.1, 3.0, (3, 4)).astype(np.float32)  # positive
A = _R.standard_normal((3, 4)).astype(np.float32)
B = _R.standard_normal((3, 4)).astype(np.float32)
I32 = _R.integers(-5, 6, (3, 4)).astype(np.int32)
BOOL = _R.integers(0, 2, (3, 4)).astype(bool)
IMG = _R.standard_normal((1, 4, 7, 9)).astype(np.float32)
SEQ = _R.standard_normal((1, 2, 5, 8)).astype(np.float32)
_DT = {np.dtype(np.float32): types.fp32, np.dtype(np.int32): types.int32,
       np.dtype(np.bool_): types.bool, np.dtype(np.float16): types.fp16,
       np.dtype(np.int16): types.int16, np.dtype(np.uint16): types.uint16}


def _convert(cases: dict, fold: bool):
    """One ML Program computing every case (inputs ``<case>__<name>``); returns the function
    and, per case, the positions of its outputs."""
    names = [(c, n) for c, (_, inputs, _) in cases.items() for n in inputs]
    value = {(c, n): cases[c][1][n] for c, n in names}
    specs = [mb.TensorSpec(shape=(1,))] if fold else \
        [mb.TensorSpec(shape=value[k].shape, dtype=_DT[value[k].dtype]) for k in names]
    slots = {}

    def body(args):
        # a copy per case: some of coremltools' value_inference functions write into their
        # input (thresholded_relu), which would corrupt a constant shared by later cases
        vals = {k: mb.const(val=value[k].copy()) for k in names} if fold else \
            dict(zip(names, args))
        outs = []
        for c, (build, inputs, _) in cases.items():
            out = build(**{n: vals[(c, n)] for n in inputs})
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            slots[c] = range(len(outs), len(outs) + len(out))
            outs += [mb.identity(x=o, name=f"{c}__out{i}") for i, o in enumerate(out)]
        return tuple(outs)

    # mb.program reads the function's own argument count: make one with named arguments
    params = ["d"] if fold else [f"a{i}" for i in range(len(names))]
    ns = {"body": body}
    exec(f"def prog({', '.join(params)}):\n    return body([{', '.join(params)}])", ns)
    prog = mb.program(input_specs=specs, opset_version=ct.target.iOS18)(ns["prog"])
    with np.errstate(all="ignore"):
        model = ct.convert(prog, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
                           minimum_deployment_target=ct.target.iOS18, skip_model_load=True)
    d = Directory()
    d.files["m/model.mlmodel"] = np.frombuffer(model.get_spec().SerializeToString(), np.uint8)
    wpath = model.weights_dir
    if wpath is not None:
        import pathlib

        for p in pathlib.Path(wpath).rglob("*"):
            if p.is_file():
                d.files[f"m/weights/{p.relative_to(wpath)}"] = np.fromfile(p, np.uint8)
    fn = load_program(d, "m/model.mlmodel").functions["main"]
    return fn, slots, [value[k] for k in names]


_RESULTS: dict = {}


def results(cases_all: dict, group: str) -> dict:
    """case -> (ours, coremltools' folded value or None): all cases of a group converted in two
    programs (one conversion per program keeps this test fast)."""
    key = (id(cases_all), group)
    if key not in _RESULTS:
        cases = {k: v for k, v in cases_all.items() if _group(cases_all, k) == group}
        fn, slots, args = _convert(cases, fold=False)
        cf = CompiledFunction(fn)
        got = cf.run({v.name: a for v, a in zip(cf.input_vars, args)}, cf.new_states())
        folded, fslots, _ = _convert({k: v for k, v in cases.items() if v[2] is None}, fold=True)
        cfold = CompiledFunction(folded)
        want = cfold.run({cfold.input_vars[0].name: np.zeros(1, np.float32)}, {})
        producer = {v.name: o for o in folded.block.ops for v in o.outputs}

        def unfolded(k):  # op types (other than const/identity) behind case k's outputs
            seen, todo, found = set(), [folded.block.outputs[i] for i in fslots[k]], set()
            while todo:
                o = producer.get(todo.pop())
                if o is None or id(o) in seen:
                    continue
                seen.add(id(o))
                if o.type not in ("const", "identity"):
                    found.add(o.type)
                todo += [v for binds in o.inputs.values() for kind, v in binds if kind == "name"]
            return found

        _RESULTS[key] = {k: ([got[i] for i in slots[k]],
                               [want[i] for i in fslots[k]] if k in fslots else None,
                               unfolded(k) if k in fslots else set()) for k in cases}
    return _RESULTS[key]


def _group(cases: dict, name: str) -> str:
    return "referenced" if cases[name][2] is not None else "folded"


def run_case(cases: dict, name: str) -> None:
    build, inputs, ref = cases[name]
    got, folded, unfolded_ops = results(cases, _group(cases, name))[name]
    if ref is None:
        assert not unfolded_ops, f"coremltools did not fold {unfolded_ops}: give a reference"
        want = folded
    else:
        want = ref(**inputs)
        want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind in "iub":
            assert np.array_equal(g, w)
        else:
            tol = 1e-5 * max(1.0, float(np.nanmax(np.abs(w))) if w.size else 1.0)
            np.testing.assert_allclose(g.astype(np.float64), w, atol=tol, rtol=0)


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a))


# name -> (build, inputs, reference or None for coremltools' folding)
