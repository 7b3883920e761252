"""Recurrent MIL ops: ``lstm`` (uni- and bidirectional, peepholes, clip) and ``rnn``.

MIL's gate order is input, forget, output, cell (``ifoz``; torch's is ``ifgo``);
``bias`` is the sum of the input and hidden biases; ``initial_h``/``initial_c``
are [b, DIRECTIONS * H]. Outputs: the hidden states (every step, or the last as
[1, b, DIRECTIONS * H]), the final hidden state and (lstm) the final cell state.
Each step is computed in float32 and the results are rounded once, like the
other fused ops.
"""
from __future__ import annotations

import numpy as np

from pyruntime.delegates.coreml.ops import fval, mil_op, op_error

_ACT = {"sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
        "relu": lambda x: np.maximum(x, 0), "linear": lambda x: x,
        "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
        "scaled_tanh": lambda x: 1.7159 * np.tanh(0.66667 * x)}


def _act(name):
    name = str(name)
    if name not in _ACT:
        raise op_error(f"unknown activation {name!r} (known: {', '.join(_ACT)})")
    return _ACT[name]


def _lstm_dir(x, h, c, w_ih, w_hh, b, p, reverse, ra, ca, a, clip):
    H = h.shape[-1]
    xs = np.matmul(x, w_ih.T) + (0 if b is None else b)  # [s, b, 4H]
    pi, pf, po = (p[:H], p[H:2 * H], p[2 * H:]) if p is not None else (0, 0, 0)
    outs = [None] * x.shape[0]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    with np.errstate(over="ignore"):
        for t in steps:
            g = xs[t] + h @ w_hh.T
            i = ra(g[:, :H] + pi * c)
            f = ra(g[:, H:2 * H] + pf * c)
            z = ca(g[:, 3 * H:])
            if clip is not None:
                z = np.clip(z, -clip, clip)
            c = f * c + i * z
            o = ra(g[:, 2 * H:3 * H] + po * c)
            h = o * a(c)
            outs[t] = h
    return np.stack(outs), h, c


@mil_op("lstm")
def lstm(x, initial_h, initial_c, weight_ih, weight_hh, bias=None, peephole=None,
         weight_ih_back=None, weight_hh_back=None, bias_back=None, peephole_back=None,
         direction="forward", output_sequence=False, recurrent_activation="sigmoid",
         cell_activation="tanh", activation="tanh", clip=None):
    x = np.asarray(x)
    if x.ndim != 3:
        raise op_error(f"lstm: x must be [s, b, I], got {list(x.shape)}")
    acts = (_act(recurrent_activation), _act(cell_activation), _act(activation))
    cl = None if clip is None else fval(clip)
    h0 = np.asarray(initial_h).reshape(x.shape[1], -1)
    c0 = np.asarray(initial_c).reshape(x.shape[1], -1)
    H = np.asarray(weight_hh).shape[-1]
    if direction == "bidirectional":
        if weight_ih_back is None or weight_hh_back is None:
            raise op_error("lstm: a bidirectional lstm needs weight_ih_back and weight_hh_back")
        fw = _lstm_dir(x, h0[:, :H], c0[:, :H], weight_ih, weight_hh, bias, peephole, False,
                       *acts, cl)
        bw = _lstm_dir(x, h0[:, H:], c0[:, H:], weight_ih_back, weight_hh_back, bias_back,
                       peephole_back, True, *acts, cl)
        seq = np.concatenate([fw[0], bw[0]], axis=-1)
        last = np.concatenate([fw[0][-1], bw[0][0]], axis=-1)
        h, c = np.concatenate([fw[1], bw[1]], -1), np.concatenate([fw[2], bw[2]], -1)
    elif direction in ("forward", "reverse"):
        seq, h, c = _lstm_dir(x, h0, c0, weight_ih, weight_hh, bias, peephole,
                              direction == "reverse", *acts, cl)
        last = h
    else:
        raise op_error(f"lstm: unknown direction {direction!r}")
    return (seq if bool(output_sequence) else last[None]), h, c


@mil_op("rnn")
def rnn(x, initial_h, weight_ih, weight_hh, bias=None, direction="forward",
        output_sequence=False, activation="tanh"):
    x = np.asarray(x)
    if x.ndim != 3 or direction not in ("forward", "reverse"):
        raise op_error(f"rnn: x {list(x.shape)}, direction {direction!r}")
    act = _act(activation)
    h = np.asarray(initial_h).reshape(x.shape[1], -1)
    xs = np.matmul(x, np.asarray(weight_ih).T) + (0 if bias is None else bias)
    outs = [None] * x.shape[0]
    steps = range(x.shape[0] - 1, -1, -1) if direction == "reverse" else range(x.shape[0])
    for t in steps:
        h = act(xs[t] + h @ np.asarray(weight_hh).T)
        outs[t] = h
    return (np.stack(outs) if bool(output_sequence) else h[None]), h
