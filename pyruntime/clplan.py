"""``tier="opencl"``: a method's plan run on an OpenCL device.

The memory plan is mapped onto the device as it is on the host: one device buffer per
planned arena (a tensor is its arena plus an offset), the program's constants packed
into one buffer uploaded at load, a buffer of its own for each unplanned input or
output. Inputs are copied in and outputs out once per execute; everything between
stays on the device. An instruction whose op has an OpenCL kernel for its case
(``kernels/opencl``) was bound at load to enqueues with every argument set; any other
instruction (an op without a kernel, a dynamic shape, a delegate) runs on the host, on
the fast tier's compiled kernel where it has one (else the reference kernel), its
tensors copied down before and its outputs up after: the bytes that cross are counted
(``stats()``, ``pyruntime inspect --ops --tier opencl``).

>>> # m = program.load_method("forward", tier="opencl"); m.execute([x])
>>> # m._device.placement   # where each call runs (inspect --ops --tier opencl prints it)
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import Dynamism, ETensor
from pyruntime.instructions import Op
from pyruntime.kernels.opencl import api, load_families
from pyruntime.kernels.opencl.device import open_device
from pyruntime.kernels.schemas import SCHEMAS
from pyruntime.values import ListRef

CONST_ALIGN = 128
# out-variant ops of these namespaces write only their out arguments
PURE_OUT_NAMESPACES = {"aten", "quantized_decomposed", "dim_order_ops"}
# ops whose out is a view they point at run time (no fixed device place)
REPOINTING = {"executorch_prim::et_view.default", "aten::alias.default"}


@dataclass(slots=True)
class Placement:
    """Where one instruction runs: ``device`` or ``host`` (and why, for the host)."""
    pc: int
    name: str
    where: str
    reason: str = ""


class OpenCLPlan:
    def __init__(self, method, selector: str | None = None):
        load_families()
        self.m = method
        self.dev = open_device(selector)
        self.cl = self.dev.cl
        self.queue = self.dev.new_queue()
        self.where = f"method {method.name!r} (tier='opencl', {self.dev.info.name})"
        self.bytes_down = self.bytes_up = 0  # host <- device, host -> device, this run
        self._map_memory()
        self.target = api.Target(self.dev)
        self.launches, self.placement = self._bind()
        # launches whose kernels can set the error flag; one has run since the flag's
        # last read: only then is it read (before a host instruction, after the run)
        self.checks = {pc for pc in self.launches if pc + 1 in self.target.messages}
        self.unread = False
        self.fast = self._host_tier()
        self._outs = {pc: self._written(ins) for pc, ins in enumerate(method.flat)
                      if ins.op in (Op.KERNEL, Op.DELEGATE)}
        self.observed = False  # set for an observed run: device results copied back per op

    # ---- memory ------------------------------------------------------------------
    def _map_memory(self):
        m, dev = self.m, self.dev
        self.regions = []  # (host lo, host hi, buffer, device base offset, constant)
        for i, a in enumerate(m.arenas):
            buf = dev.buffer(a.nbytes, a, f"{self.where} planned buffer {i + 1}")
            lo = a.ctypes.data
            self.regions.append((lo, lo + a.nbytes, buf, 0, False))
        io = set(m.inputs) | set(m.outputs)
        spans = []
        arenas = [(r[0], r[1]) for r in self.regions]
        for j, v in enumerate(m.values):
            if isinstance(v, ETensor) and v.storage is not None and j not in io \
                    and v.capacity_bytes:
                lo = v.data_ptr()
                if not any(a <= lo < b for a, b in arenas):  # constant or .ptd data
                    spans.append((lo, lo + v.capacity_bytes))
        spans.sort()
        merged = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        total, offs = 0, []
        for lo, hi in merged:
            offs.append(total)
            total += -(-(hi - lo) // CONST_ALIGN) * CONST_ALIGN
        if merged:
            packed = np.zeros(total, np.uint8)
            for (lo, hi), o in zip(merged, offs):
                packed[o:o + hi - lo] = np.ctypeslib.as_array(
                    (np.ctypeslib.ctypes.c_uint8 * (hi - lo)).from_address(lo))
            cbuf = dev.buffer(total, packed, f"{self.where} constants")
            for (lo, hi), o in zip(merged, offs):
                self.regions.append((lo, hi, cbuf, o, True))
        self.const_bytes = total
        self.regions.sort(key=lambda r: r[0])
        self._starts = [r[0] for r in self.regions]
        self._own: dict = {}  # value index -> (buffer, capacity) for unplanned tensors

    def locate(self, j: int, t: ETensor):
        """(buffer, byte offset, constant) of value ``j``'s tensor ``t`` on the device."""
        if t.storage is not None:
            p = t.data_ptr()
            k = bisect.bisect_right(self._starts, p) - 1
            if k >= 0:
                lo, hi, buf, base, const = self.regions[k]
                if p + t.nbytes <= hi and p >= lo:
                    return buf, base + p - lo, const
        own = self._own.get(j)
        if own is None or own[1] < t.capacity_bytes:
            own = self._own[j] = (self.dev.buffer(t.capacity_bytes, None,
                                                  f"{self.where} value {j}"),
                                  t.capacity_bytes)
        return own[0], 0, False

    def _dtensor(self, j, t):
        buf, off, const = self.locate(j, t)
        size = t.dtype.itemsize
        if off % size:
            return None
        return api.DTensor(t, buf, off // size, const)

    # ---- binding -----------------------------------------------------------------
    def _bind(self):
        m = self.m
        # values a move replaces or a view op re-points at run time: no fixed place
        moved = {ins.dst for ins in m.flat if ins.op is Op.MOVE}
        moved |= {ins.args[-1] for ins in m.flat
                  if ins.op is Op.KERNEL and ins.name in REPOINTING and ins.args}
        self.late = self._runtime_scalars()
        launches, placement = {}, []
        for pc, ins in enumerate(m.flat):
            if ins.op is not Op.KERNEL:
                if ins.op is Op.DELEGATE:
                    placement.append(Placement(pc, ins.name, "host", "delegate"))
                continue
            reason = self._why_host(ins, moved)
            launch = None
            if not reason:
                binder = api.get_binder(ins.name)
                self.target.code = pc + 1
                try:
                    launch = binder(self.target, self._args(ins))
                except ExecuTorchError:
                    raise
                except Exception:  # noqa: BLE001 - a case the binder did not foresee
                    launch = None
                reason = "" if launch is not None else "no OpenCL kernel for this case"
            if launch is not None:
                launches[pc] = launch
                placement.append(Placement(pc, ins.name, "device"))
            else:
                placement.append(Placement(pc, ins.name, "host", reason))
        return launches, placement

    def _host_tier(self):
        """The fast tier's plan of this method (``FastPlan``) for the instructions the
        host runs, on a loop of its own that never runs: ``step`` calls it for each of
        them. None when every call is on the device, or when the method takes a scalar
        input (the fast plan reads those from its own records)."""
        m = self.m
        if all(p.where == "device" for p in self.placement) or any(
                not isinstance(m.values[j], ETensor) for j in m.inputs):
            return None
        from pyruntime.cython_ext._loop import Loop
        from pyruntime.fastpath import FastPlan  # imports numba and the compiled kernels

        loop, m.loop = m.loop, Loop(len(m.flat))
        try:
            return FastPlan(m)
        finally:
            m.loop = loop

    def _compiled_on_host(self, pc, ins) -> bool:
        fast = self.fast
        return fast is not None and pc in fast.kernels and pc not in fast.folded \
            and ins.op is Op.KERNEL and ins.name not in REPOINTING \
            and not ins.name.startswith("executorch_prim")

    def host_kernel(self, pc: int) -> str:
        """What runs host instruction ``pc`` now: the fast tier's compiled kernel, the
        reference kernel, or (a delegate) its backend."""
        ins = self.m.flat[pc]
        if ins.op is Op.DELEGATE:
            return "its backend"
        return "fast tier" if self._compiled_on_host(pc, ins) else "reference kernel"

    def _host_call(self, pc, ins) -> int:
        """Run host instruction ``pc``: compiled on the fast tier where it has a kernel (not
        a prim op or a view whose bookkeeping is the fast loop's), else on the reference
        kernel (through the fast plan, which keeps its tensor table in step)."""
        fast = self.fast
        if fast is None:
            return self.m._step(pc)
        return fast.step(pc) if self._compiled_on_host(pc, ins) else fast.callback(pc)

    def _runtime_scalars(self) -> set:
        """Non-tensor values written at run time (a kernel's scalar result, a move's
        destination, a scalar input): a binder must not bake them in at load."""
        m = self.m
        out = {j for j in m.inputs if not isinstance(m.values[j], (ETensor, ListRef))}
        for ins in m.flat:
            if ins.op is Op.KERNEL and ins.args:
                j = ins.args[-1]
            elif ins.op is Op.MOVE:
                j = ins.dst
            else:
                continue
            if not isinstance(m.values[j], (ETensor, ListRef)):
                out.add(j)
        return out

    def _why_host(self, ins, moved) -> str:
        if api.get_binder(ins.name) is None:
            return "no OpenCL kernel for this op"
        for j in ins.args[:ins.nargs]:
            v = self.m.values[j]
            if (j in self.late and not api.takes_late(ins.name)) or \
                    (isinstance(v, ListRef) and any(k in self.late for k in v.items)):
                return "an argument computed at run time"
        for j in ins.args:
            v = self.m.values[j]
            items = [self.m.values[k] for k in v.items if k >= 0] if isinstance(v, ListRef) \
                else [v]
            for t in items:
                if isinstance(t, ETensor):
                    if t.dynamism != Dynamism.STATIC:
                        return "dynamic shape"
                    if j in moved:
                        return "a value a move or a view re-points"
                    if t.storage is None:
                        return "a tensor without memory at load"
        return ""

    def _args(self, ins):
        values = self.m.values
        out = []
        for j in ins.args[:ins.nargs]:
            v = values[j]
            if j in self.late:
                out.append(api.Late(j))
            elif isinstance(v, ETensor):
                d = self._dtensor(j, v)
                if d is None:
                    raise _Unaligned
                out.append(d)
            elif isinstance(v, ListRef):
                out.append([self._dtensor(k, values[k]) if k >= 0 and
                            isinstance(values[k], ETensor) else (values[k] if k >= 0 else None)
                            for k in v.items])
            else:
                out.append(v)
        return out

    def _written(self, ins):
        """The tensors a host instruction writes: an out-variant op's out arguments (the
        schema's last returns); every tensor of a delegate or of any other op (in-place
        ones such as ``aten::copy_`` or ``llama::update_cache.out`` write an input)."""
        idx = list(ins.args)
        if ins.op is Op.KERNEL and ins.name.split("::")[0] in PURE_OUT_NAMESPACES \
                and (ins.name.endswith("out") or "_out" in ins.name):
            nret = SCHEMAS.get(ins.name, ("", 1))[1] or 1
            idx = idx[-nret:]
        return [k for j in idx for k in self._tensors(j)]

    # ---- running -----------------------------------------------------------------
    def before_run(self) -> None:
        self.bytes_down = self.bytes_up = 0
        fast = self.fast
        if fast is not None:
            fast.before_run()  # bind what a background compile delivered
        for j in self.m.inputs:
            self._push(j)
            if fast is not None:
                fast.table.push(j, self.m.values[j], force=True)  # sizes, pointer

    def _push(self, j) -> None:
        v = self.m.values[j]
        if isinstance(v, ETensor) and v.storage is not None and v.nbytes:
            buf, off, const = self.locate(j, v)
            if const:
                return
            self.dev.upload(self.queue, buf, off, _raw(v))
            self.bytes_up += v.nbytes

    def _pull(self, j) -> None:
        v = self.m.values[j]
        if isinstance(v, ETensor) and v.storage is not None and v.nbytes:
            buf, off, const = self.locate(j, v)
            if const or not v.storage.flags.writeable:
                return  # read-only bytes: the host's copy is the device's
            self.dev.download(self.queue, _raw(v), buf, off)
            self.bytes_down += v.nbytes

    def _tensors(self, j):
        v = self.m.values[j]
        if isinstance(v, ListRef):
            return [k for k in v.items if k >= 0]
        return [j]

    def step(self, pc: int) -> int:
        launch = self.launches.get(pc)
        if launch is not None:
            launch.enqueue(self.cl, self.queue, self.m.values)
            if pc in self.checks:
                self.unread = True
            if self.observed:  # the tracer reads each result on the host
                for k in self._outs[pc]:
                    self._pull(k)
            return -1
        m = self.m
        ins = m.flat[pc]
        if ins.op in (Op.KERNEL, Op.DELEGATE):
            if self.unread:
                self.check_flag()  # a device error before this op reads its result
            for j in ins.args:
                for k in self._tensors(j):
                    self._pull(k)
            nxt = self._host_call(pc, ins)
            for k in self._outs[pc]:
                self._push(k)
            return nxt
        if ins.op is Op.JUMP_FALSE:
            self._pull(ins.cond)
        return m._step(pc) if self.fast is None else self.fast.callback(pc)

    def check_flag(self) -> None:
        """Raise the error a device kernel flagged (an index out of range), naming its
        instruction."""
        self.unread = False
        code = self.target.read_flag(self.queue)
        if code:
            ins = self.m.flat[code - 1]
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{self.m._where(ins)}: {self.target.messages[code]} "
                                  "(on the OpenCL device)")

    def pull_outputs(self) -> None:
        if self.unread:
            self.check_flag()
        for j in self.m.outputs:
            for k in self._tensors(j):
                self._pull(k)
        self.queue.finish()

    def stats(self) -> dict:
        on = sum(1 for p in self.placement if p.where == "device")
        return {"device": self.dev.info.name, "on_device": on,
                "on_host": len(self.placement) - on, "constant_bytes": self.const_bytes,
                "bytes_to_device": self.bytes_up, "bytes_to_host": self.bytes_down}


class _Unaligned(Exception):
    """A tensor whose device offset is not a multiple of its element size."""


def _raw(t: ETensor) -> np.ndarray:
    """The bytes of ``t`` in its storage (any dim order): a uint8 view."""
    return t.storage[:t.nbytes]
