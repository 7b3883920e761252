"""Device profiles: built-ins and files, the fit report read before anything runs, and
loads that fail as on the device (a backend it lacks: NotFound; a plan over its memory
budget: MemoryAllocationFailed), naming the profile."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pyruntime
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cli import main
from pyruntime.pool import load_as
from pyruntime.profiles import BUILTIN, DeviceProfile, get_profile, parse_bytes
from tests.serving.common import program, write_sets


def _prog(name):
    return pyruntime.Runtime.get().load_program(program(name).pte_path)


def test_builtins_and_files(tmp_path):
    assert {"host", "android-xnnpack", "android-portable", "mcu"} <= set(BUILTIN)
    (tmp_path / "phone.toml").write_text(
        'name = "phone"\nmax_planned_bytes = "64 MiB"\nmax_constant_bytes = 1000\n'
        'backends = ["XnnpackBackend"]\nthreads = 4\n')
    p = get_profile(tmp_path / "phone.toml")
    assert p == DeviceProfile("phone", 64 * 2**20, 1000, ("XnnpackBackend",), 4)
    (tmp_path / "mcu.json").write_text(json.dumps({"max_planned_bytes": "512KiB",
                                                   "backends": []}))
    q = get_profile(str(tmp_path / "mcu.json"))
    assert (q.name, q.max_planned_bytes, q.backends, q.threads) == ("mcu", 512 * 1024, (), None)
    assert parse_bytes("2 MB") == 2_000_000 and parse_bytes(7) == 7


@pytest.mark.parametrize("text, match", [
    ('{"max_planed_bytes": 1}', "unknown key"),
    ('{"backends": ["Xnnpack"]}', "unknown backend id"),
    ('{"threads": 0}', "threads must be a positive integer"),
    ('{"max_planned_bytes": "lots"}', "max_planned_bytes must be a byte count"),
    ('{"backends": ', "cannot read"),
])
def test_bad_profile_files_are_explained(tmp_path, text, match):
    (tmp_path / "p.json").write_text(text)
    with pytest.raises(ExecuTorchError, match=match) as e:
        get_profile(tmp_path / "p.json")
    assert e.value.code == ErrorCode.InvalidArgument
    with pytest.raises(ExecuTorchError, match="not a built-in name"):
        get_profile("no-such-device")


def test_fit_report_reads_the_file_only():
    prog = _prog("xnnpack_mlp")
    meta = prog.metadata("forward")
    ok = get_profile("android-xnnpack").check(prog, "forward")
    assert ok.fits and ok.methods["forward"] == (sum(meta.planned_buffer_sizes),
                                                 ["XnnpackBackend"])
    assert ok.constant_bytes == prog.constant_bytes and ok.delegate_bytes > 0
    bad = get_profile("android-portable").check(prog)
    assert not bad.fits and "does NOT fit" in str(bad)
    assert [c for c, _ in bad.problems] == [ErrorCode.NotFound]
    with pytest.raises(ExecuTorchError, match="device profile 'android-portable': method "
                                              "'forward' delegates to 'XnnpackBackend'"):
        bad.raise_if_unfit()
    tiny = DeviceProfile("tiny", max_planned_bytes=16, max_constant_bytes=16)
    r = tiny.check(_prog("mlp"))
    assert [c for c, _ in r.problems] == [ErrorCode.MemoryAllocationFailed,
                                          ErrorCode.OutOfResources]


def test_profile_without_xnnpack_refuses_an_xnnpack_program_as_the_device_would():
    prog = _prog("xnnpack_mlp")
    with pytest.raises(ExecuTorchError) as e:
        get_profile("android-portable").load_method(prog, "forward", tier="reference")
    assert e.value.code == ErrorCode.NotFound  # what the C++ runtime returns for it
    assert str(e.value) == (
        "[NotFound 0x20] device profile 'android-portable': method 'forward' delegate 0: "
        "backend 'XnnpackBackend' is not registered on this device (its backends: none)")
    with pytest.raises(ExecuTorchError, match="not registered on this device"):
        prog.load_method("forward", tier="reference", backends=())  # the load option underneath
    x = program("xnnpack_mlp").calls[0][0]
    m = get_profile("android-xnnpack").load_method(prog, "forward", tier="reference")  # a device that has it
    np.testing.assert_array_equal(m.execute([x])[0], prog.load_method("forward", tier="reference").execute([x])[0])
    assert m.threads == 4


def test_memory_and_storage_budgets_refuse_the_load():
    prog = _prog("mlp")
    need = sum(prog.metadata("forward").planned_buffer_sizes)
    with pytest.raises(ExecuTorchError, match=f"device profile 'small': .*needs {need} bytes") \
            as e:
        DeviceProfile("small", max_planned_bytes=need - 1).load_method(prog, tier="reference")
    assert e.value.code == ErrorCode.MemoryAllocationFailed
    DeviceProfile("exact", max_planned_bytes=need).load_method(prog, tier="reference")
    with pytest.raises(ExecuTorchError, match="device profile 'flash': constants and delegate "
                                              "payloads take") as e:
        DeviceProfile("flash", max_constant_bytes=16).load_method(prog, tier="reference")
    assert e.value.code == ErrorCode.OutOfResources


def test_threads_come_from_the_profile_else_one():
    prog = _prog("mlp")
    assert load_as(prog, "forward", "reference").threads == 1
    assert load_as(prog, "forward", "reference", get_profile("mcu")).threads == 1
    assert load_as(prog, "forward", "reference", DeviceProfile("d", threads=3)).threads == 3
    assert load_as(prog, "forward", "reference", DeviceProfile("d", threads=3), 2).threads == 2


def test_batch_on_a_device_without_the_backend_fails_before_running(tmp_path, capsys):
    fx = program("xnnpack_mlp")
    write_sets(tmp_path / "in.npz", fx.calls)
    rc = main(["batch", str(fx.pte_path), "--inputs", str(tmp_path / "in.npz"),
               "--out", str(tmp_path / "out.npz"), "--device", "android-portable"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "device profile 'android-portable'" in err and "does NOT fit" in err
    assert "error: [NotFound 0x20] device profile 'android-portable'" in err
    assert "batch:" not in err and not (tmp_path / "out.npz").exists()
