"""PNG pictures of a diff, a profile and a memory plan (matplotlib, the ``[plot]`` extra).

>>> from pyruntime.devtools.plots import plot_memory, plot_op_times   # needs matplotlib
>>> # plot_op_times(op_times(dump), "ops.png"); report.plot("diff.png")
>>> # plot_memory(program, "forward", "plan.png")
"""
from __future__ import annotations

import math

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              "plots need matplotlib: pip install 'pyruntime[plot]' (or "
                              "pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path) -> None:
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise ExecuTorchError(ErrorCode.AccessFailed, f"cannot write {path}: {e}") from e
    finally:
        fig.clf()
        import matplotlib.pyplot as plt
        plt.close(fig)


def plot_diff(report, path) -> None:
    """Max abs error per compared instruction (log scale); divergences in red."""
    plt = _plt()
    rows = report.rows
    fig, ax = plt.subplots(figsize=(max(8, min(40, len(rows) * 0.08)), 4.5))
    xs = range(len(rows))
    floor = 1e-12
    ys = [max(r.max_abs_err, floor) if not math.isnan(r.max_abs_err) else 1.0 for r in rows]
    colors = ["tab:blue" if r.ok else "tab:red" for r in rows]
    ax.bar(xs, ys, color=colors, width=0.9)
    ax.set_yscale("log")
    ax.axhline(report.atol, color="gray", ls="--", lw=0.8, label=f"atol {report.atol:g}")
    f = report.first_divergence
    if f is not None:
        i = rows.index(f)
        ax.annotate(f"first divergence: {f.label} {f.op}", (i, ys[i]), textcoords="offset points",
                    xytext=(10, 10), color="tab:red", arrowprops={"arrowstyle": "->"})
    ax.set_xlabel("compared instruction (execution order)")
    ax.set_ylabel("max abs error")
    ax.set_title(report.summary()[:110], fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_op_times(rows, path, top: int = 25) -> None:
    """Horizontal bars: total time per operator (``op_times`` rows), largest on top."""
    plt = _plt()
    rows = rows[:top]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.5))
    names = [f"{r.op} (x{r.calls})" for r in rows][::-1]
    ax.barh(names, [r.total_ms for r in rows][::-1], color="tab:blue")
    for y, r in enumerate(rows[::-1]):
        ax.text(r.total_ms, y, f" {r.percent:.1f}%", va="center", fontsize=7)
    ax.set_xlabel("total time (ms)")
    ax.set_title("time per operator")
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    _save(fig, path)


def plot_memory(program, method: str, path) -> None:
    """Each planned tensor as a rectangle: lifetime (instructions) x arena offsets."""
    from matplotlib.patches import Rectangle

    from pyruntime.devtools.memory import memory_plan

    plt = _plt()
    blocks, sizes = memory_plan(program, method)
    arenas = sorted({b.arena for b in blocks}) or [1]
    fig, axes = plt.subplots(len(arenas), 1, figsize=(10, 4 * len(arenas)), squeeze=False)
    cmap = plt.get_cmap("tab20")
    n_instr = max((b.last for b in blocks), default=0) + 1
    for ax, arena in zip(axes[:, 0], arenas):
        size = sizes[arena - 1] if 0 < arena <= len(sizes) else 0
        for k, b in enumerate(x for x in blocks if x.arena == arena):
            ax.add_patch(Rectangle((b.first, b.offset), b.last - b.first + 1, max(b.nbytes, 1),
                                   facecolor=cmap(k % 20), edgecolor="black", lw=0.3, alpha=0.85))
        ax.set_xlim(0, n_instr)
        ax.set_ylim(0, max(size, max((b.offset + b.nbytes for b in blocks
                                      if b.arena == arena), default=1)))
        ax.set_xlabel("instruction")
        ax.set_ylabel("offset (bytes)")
        ax.set_title(f"method {method!r}: planned buffer {arena}, {size} bytes, "
                     f"{sum(b.arena == arena for b in blocks)} tensors")
    fig.tight_layout()
    _save(fig, path)
