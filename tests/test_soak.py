"""Soak, the short runs (``python -m tests.soak --long`` runs the full counts): executes
and load/unload cycles leave resident memory and descriptors flat after a warm-up, and
the results stay right."""
from __future__ import annotations

import pytest

from tests import parts, soak
from tests.programs.fixtures import get_fixture

MiB = 2**20


@pytest.mark.parametrize("name, count", [("mlp", 20_000), ("mobilenet_v2", 200)])
def test_executes_leave_memory_and_descriptors_flat(name, count):
    r = soak.executes(get_fixture(name), count, max(50, count // 10))
    assert r.rss_growth < 1 * MiB and r.fds_after == r.fds_before, r.row()


def test_load_unload_cycles_of_every_bridge_leave_nothing_behind():
    """Two rounds of 30 cycles per bridge after a warm-up of 10 (the first loads of a
    bridge allocate what it keeps for the process: the vendor library, a device): the
    second round must add nothing."""
    have, missing = soak.bridges()
    if parts.in_ci():  # every bridge's part is installed by .ci/run
        assert not missing, missing
    assert have, missing
    bad = []
    for name, pte, inputs, extra in have:
        soak.cycles(name, pte, inputs, 30, 10)
        r = soak.cycles(name, pte, inputs, 30, 0, extra)
        if not (r.rss_growth < 1 * MiB and r.fds_after == r.fds_before):
            bad.append(r.row())
        if name == "QnnBackend":
            assert r.extra == "live QNN contexts 0", r.row()
    assert not bad, bad
