"""Prim ops: symbolic-shape arithmetic, tensor metadata and the map/view helpers (spec 4.11).

These are the runtime's own ops (``kernels/prim_ops`` in ExecuTorch). Scalar
ops take their inputs and RETURN the result; the runtime stores it in the
instruction's last value slot. The rules follow the C++ kernels, not Python:

* arithmetic on (Int, Int) gives an Int (wrapped to int64 like C++), any
  Double operand gives a Double, and any other tag (Bool, None, a tensor)
  is an InvalidType error;
* ``floordiv.Scalar`` is Python's floor division, but a double divided by
  zero gives +-inf (by the sign bit of the dividend) instead of raising;
* ``floordiv.int``, ``mod.int`` and ``mod.Scalar`` use C semantics:
  truncating division and a remainder with the dividend's sign;
* comparisons give a Bool and also accept Bool x Bool.

``et_copy_index`` and ``et_view`` act on tensors and return None.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.kernels.registry import register

_I64_MIN = -(1 << 63)


def _invalid(op: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {msg}")


def _bad_tags(op: str, *vals) -> ExecuTorchError:
    tags = ", ".join(_tag(v) for v in vals)
    return ExecuTorchError(ErrorCode.InvalidType, f"{op}: unsupported operand tags ({tags})")


def _tag(v) -> str:
    if isinstance(v, bool):
        return "Bool"
    if isinstance(v, int):
        return "Int"
    if isinstance(v, float):
        return "Double"
    if v is None:
        return "None"
    return type(v).__name__


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return _is_int(v) or isinstance(v, float)


def _i64(v: int) -> int:
    """Wrap to int64 two's complement, as C++ int64 arithmetic does."""
    return ((v - _I64_MIN) % (1 << 64)) + _I64_MIN


def _tensor(op: str, v) -> ETensor:
    if not isinstance(v, ETensor):
        raise ExecuTorchError(ErrorCode.InvalidType, f"{op}: self: expected a Tensor, got {_tag(v)}")
    return v


# ---- tensor metadata -----------------------------------------------------------------

@register("aten::sym_size.int")
def sym_size(self, dim):
    op = "aten::sym_size.int"
    t = _tensor(op, self)
    if not -t.ndim <= dim < t.ndim:
        raise _invalid(op, f"dim: expected a dim of a rank-{t.ndim} tensor, got {dim}")
    return int(t.sizes[dim])


@register("aten::sym_numel")
def sym_numel(self):
    return int(_tensor("aten::sym_numel", self).numel)


@register("aten::_local_scalar_dense")
def local_scalar_dense(self):
    op = "aten::_local_scalar_dense"
    t = _tensor(op, self)
    if t.numel < 1:
        raise _invalid(op, f"self: expected a tensor with at least 1 element, got {t.describe()}")
    v = t.numpy().reshape(-1)[0]
    if t.dtype == np.bool_:
        return bool(v)
    if t.dtype.kind in "iu":
        return int(v)
    return float(v)


# ---- scalar arithmetic ---------------------------------------------------------------

def scalar_binary(name: str, fn, ints, floats, bools: bool = False):
    """Registers ``executorch_prim::<name>.Scalar``: ``fn`` of two ints, through ``ints``;
    of other numbers as doubles, through ``floats``; of two bools (if ``bools``) as bool."""
    op = f"executorch_prim::{name}.Scalar"

    @register(op)
    def kernel(a, b):
        if _is_int(a) and _is_int(b):
            return ints(fn(a, b))
        if _is_num(a) and _is_num(b):  # C++ computes mixed operands as doubles
            return floats(fn(float(a), float(b)))
        if bools and isinstance(a, bool) and isinstance(b, bool):
            return bool(fn(a, b))
        raise _bad_tags(op, a, b)

    kernel.__name__ = f"prim_{name}"
    return kernel


scalar_binary("add", lambda a, b: a + b, _i64, float)
scalar_binary("sub", lambda a, b: a - b, _i64, float)
scalar_binary("mul", lambda a, b: a * b, _i64, float)


def _c_div(op: str, a: int, b: int) -> int:
    if b == 0:
        raise _invalid(op, "integer division by zero")
    q = abs(a) // abs(b)
    return _i64(q if (a < 0) == (b < 0) else -q)


def _c_mod(op: str, a: int, b: int) -> int:
    if b == 0:
        raise _invalid(op, "integer modulo by zero")
    return _i64(a - b * _c_div(op, a, b))


def _floor_div_double(a: float, b: float) -> float:
    # ExecuTorch's floor_div_double: Python's algorithm, but x / 0.0 is +-inf.
    if b == 0:
        return -math.inf if math.copysign(1.0, a) < 0 else math.inf
    with np.errstate(all="ignore"):  # fmod(inf, b) is nan in C, not an error
        mod = float(np.fmod(a, b))
        div = float(np.float64(a - mod) / b)
    if mod != 0 and (math.copysign(1.0, b) < 0) != (math.copysign(1.0, mod) < 0):
        return div - 1
    return div


@register("executorch_prim::floordiv.Scalar")
def prim_floordiv(a, b):
    op = "executorch_prim::floordiv.Scalar"
    if _is_int(a) and _is_int(b):
        if b == 0:
            raise _invalid(op, "integer division by zero")
        return _i64(a // b)
    if _is_num(a) and _is_num(b):
        return _floor_div_double(float(a), float(b))
    raise _bad_tags(op, a, b)


@register("executorch_prim::truediv.Scalar")
def prim_truediv(a, b):
    op = "executorch_prim::truediv.Scalar"
    if not (_is_num(a) and _is_num(b)):
        raise _bad_tags(op, a, b)
    with np.errstate(all="ignore"):  # IEEE: x / 0.0 is +-inf or nan, as in C++
        return float(np.float64(a) / np.float64(b))


@register("executorch_prim::floordiv.int")
def prim_floordiv_int(a, b):
    op = "executorch_prim::floordiv.int"
    if not (_is_int(a) and _is_int(b)):
        raise _bad_tags(op, a, b)
    return _c_div(op, a, b)


@register("executorch_prim::mod.int", "executorch_prim::mod.Scalar")
def prim_mod(a, b):
    op = "executorch_prim::mod"
    if not (_is_int(a) and _is_int(b)):
        raise _bad_tags(op, a, b)
    return _c_mod(op, a, b)


for _name, _fn in (("eq", lambda a, b: a == b), ("gt", lambda a, b: a > b),
                   ("lt", lambda a, b: a < b), ("ge", lambda a, b: a >= b),
                   ("le", lambda a, b: a <= b)):
    scalar_binary(_name, _fn, bool, bool, bools=True)


@register("executorch_prim::neg.Scalar")
def prim_neg(a):
    if _is_int(a):
        return _i64(-a)
    if isinstance(a, float):
        return -a
    raise _bad_tags("executorch_prim::neg.Scalar", a)


@register("executorch_prim::sym_not.Scalar")
def prim_sym_not(a):
    if isinstance(a, bool):
        return not a
    raise _bad_tags("executorch_prim::sym_not.Scalar", a)


@register("executorch_prim::sym_max.Scalar")
def prim_sym_max(a, b):
    if _is_int(a) and _is_int(b):
        return max(a, b)
    raise _bad_tags("executorch_prim::sym_max.Scalar", a, b)


@register("executorch_prim::sym_min.Scalar")
def prim_sym_min(a, b):
    if _is_int(a) and _is_int(b):
        return min(a, b)
    raise _bad_tags("executorch_prim::sym_min.Scalar", a, b)


@register("executorch_prim::sym_ite.Scalar")
def prim_sym_ite(b, t, f):
    if not isinstance(b, bool):
        raise _bad_tags("executorch_prim::sym_ite.Scalar", b)
    return t if b else f


@register("executorch_prim::sym_float.Scalar")
def prim_sym_float(a):
    if isinstance(a, (int, float)):  # bool -> 0.0 / 1.0
        return float(a)
    raise _bad_tags("executorch_prim::sym_float.Scalar", a)


def _to_int64(op: str, x: float, fn=math.trunc) -> int:
    """``fn(x)`` as an int64; C++ casts of non-finite or huge doubles are undefined, so refuse them."""
    r = fn(x) if math.isfinite(x) else x
    if not (math.isfinite(r) and -2.0**63 <= r < 2.0**63):
        raise _invalid(op, f"a: expected a double whose result fits int64, got {x}")
    return int(r)


@register("executorch_prim::sym_int.Scalar")
def prim_sym_int(a):
    op = "executorch_prim::sym_int.Scalar"
    if isinstance(a, bool):
        return int(a)
    if _is_int(a):
        return a
    if isinstance(a, float):
        return _to_int64(op, a)
    raise _bad_tags(op, a)


def _rounding(name: str, fn):
    op = f"executorch_prim::{name}.Scalar"

    @register(op)
    def kernel(a):
        if not isinstance(a, float):
            raise _bad_tags(op, a)
        return _to_int64(op, a, fn)

    kernel.__name__ = f"prim_{name}"
    return kernel


_rounding("ceil", math.ceil)
_rounding("round", round)  # Python's round() is half-to-even, as the C++ kernel is
_rounding("trunc", math.trunc)


# ---- tensor prim ops -----------------------------------------------------------------

@register("executorch_prim::et_copy_index.tensor")
def et_copy_index(copy_to, copy_from, index):
    """Copy ``copy_from`` into slice ``index`` of ``copy_to``, growing its dim 0 (map lowering)."""
    op = "executorch_prim::et_copy_index.tensor"
    dst, src = _tensor(op, copy_to), _tensor(op, copy_from)
    if dst.ndim != src.ndim + 1:
        raise _invalid(op, f"copy_to: expected rank {src.ndim + 1} (copy_from's rank + 1), "
                           f"got {dst.describe()}")
    if not _is_int(index) or index < 0:
        raise _invalid(op, f"index: expected a non-negative Int, got {index!r}")
    if dst.dtype != src.dtype:
        raise _invalid(op, f"copy_from: expected dtype {dst.dtype.name}, got {src.dtype.name}")
    if index > 0 and tuple(dst.sizes[1:]) != tuple(src.sizes):
        raise _invalid(op, f"copy_from: expected trailing sizes {list(dst.sizes[1:])}, "
                           f"got {list(src.sizes)}")
    want = (index + 1,) + tuple(src.sizes)
    # A DYNAMIC_BOUND result tracks the iterations done; a STATIC one (already the
    # full size) is only written into, as the C++ kernel, which resizes only to grow.
    if dst.sizes != want and not (dst.dynamism == Dynamism.STATIC and dst.sizes[0] > index
                                  and tuple(dst.sizes[1:]) == tuple(src.sizes)):
        dst.resize(want)
    if src.numel:
        dst.numpy()[index] = src.numpy()


@register("executorch_prim::et_view.default")
def et_view(self, size, out):
    """Resize ``out`` to ``size`` and make it alias ``self``'s bytes (no copy)."""
    op = "executorch_prim::et_view.default"
    src, dst = _tensor(op, self), _tensor(op, out)
    if src.dtype != dst.dtype:
        raise _invalid(op, f"out: expected dtype {src.dtype.name}, got {dst.dtype.name}")
    size = [int(s) for s in size]
    if len(size) != dst.ndim:
        raise _invalid(op, f"size: expected {dst.ndim} sizes (out's rank), got {size}")
    if size.count(-1) > 1 or any(s < -1 for s in size):
        raise _invalid(op, f"size: expected non-negative sizes and at most one -1, got {size}")
    if -1 in size:
        known = math.prod(s for s in size if s != -1)
        if known == 0:
            raise _invalid(op, f"size: cannot infer -1 with a zero dim, got {size}")
        size[size.index(-1)] = src.numel // known
    if math.prod(size) != src.numel:
        raise _invalid(op, f"size: expected {src.numel} elements like self {src.describe()}, got {size}")
    dst.resize(size)
    dst.set_storage(src.storage)
