"""Traced programs kept on disk between runs of the command line (`_programs`)."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _programs
from jaxlagrange._cli._common import (
    errors_as_values,
    simulate_program,
    trajectory_from,
)


def _counted(scale, cos=False):
    traces = []

    def fn(x, options):
        traces.append(1)  # Python runs only while the function is traced
        return {"y": jnp.sin(x) * scale, "n": options["n"] + jnp.sum(x)}

    def other(x, options):  # the same name, other code
        traces.append(1)
        return {"y": jnp.cos(x) * scale, "n": options["n"] + jnp.sum(x)}

    return (other if cos else fn), traces


def _entries(tmp_path):
    folder = tmp_path / "programs"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_outside_a_store_call_is_the_function():
    fn, traces = _counted(2.0)
    out = _programs.call("f", fn, jnp.arange(3.0), {"n": 1.0})
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert len(traces) == 1


def test_a_kept_program_is_loaded_instead_of_traced(tmp_path):
    x, options = jnp.arange(3.0), {"n": jnp.asarray(1.0)}
    expected = {"y": 2.0 * np.sin(np.arange(3.0)), "n": 4.0}
    fn, traces = _counted(2.0)
    with _programs.kept_programs(tmp_path, "context"):
        first = _programs.call("f", fn, x, options)
    assert len(traces) == 1 and len(_entries(tmp_path)) == 1
    fn, traces = _counted(2.0)  # a new process's function: same source
    with _programs.kept_programs(tmp_path, "context"):
        second = _programs.call("f", fn, x, options)
    assert traces == []  # loaded, not traced
    for out in (first, second):
        assert set(out) == {"y", "n"}
        np.testing.assert_allclose(out["y"], expected["y"], rtol=1e-15)
        np.testing.assert_allclose(out["n"], expected["n"], rtol=1e-15)
    assert len(_entries(tmp_path)) == 1


def test_what_determines_a_program_is_in_its_key(tmp_path):
    x = jnp.arange(3.0)
    # (The values a function closes over are the caller's to put in the
    # context or the name: the command line's closures come from its config.)
    cases = [
        ("context", "f", False, x, 1.0),
        ("another config", "f", False, x, 1.0),  # the command line's context
        ("context", "g", False, x, 1.0),  # the program's name
        ("context", "f", True, x, 1.0),  # the function's code
        ("context", "f", False, jnp.arange(4.0), 1.0),  # a shape
        ("context", "f", False, x.astype(jnp.float32), 1.0),  # a dtype
        ("context", "f", False, x, 5),  # a static argument's value
    ]
    for i, (context, name, cos, arg, n) in enumerate(cases):
        fn, traces = _counted(2.0, cos)
        with _programs.kept_programs(tmp_path, context):
            out = _programs.call(name, fn, arg, {"n": n})
        assert len(traces) == 1, cases[i]
        assert len(_entries(tmp_path)) == i + 1, cases[i]
        wave = np.cos if cos else np.sin
        np.testing.assert_allclose(out["y"], 2.0 * wave(np.asarray(arg)), rtol=1e-6)
        np.testing.assert_allclose(out["n"], n + np.sum(np.asarray(arg)), rtol=1e-6)


def test_a_damaged_entry_is_traced_and_written_again(tmp_path):
    x, options = jnp.arange(3.0), {"n": jnp.asarray(1.0)}
    with _programs.kept_programs(tmp_path, "context"):
        _programs.call("f", _counted(2.0)[0], x, options)
    (entry,) = _entries(tmp_path)
    entry.write_bytes(b"not a program")
    fn, traces = _counted(2.0)
    with _programs.kept_programs(tmp_path, "context"):
        out = _programs.call("f", fn, x, options)
    assert len(traces) >= 1
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert _entries(tmp_path) == [entry] and entry.read_bytes() != b"not a program"


def test_an_entry_others_may_write_is_not_loaded(tmp_path):
    x, options = jnp.arange(3.0), {"n": jnp.asarray(1.0)}
    with _programs.kept_programs(tmp_path, "context"):
        _programs.call("f", _counted(2.0)[0], x, options)
    (entry,) = _entries(tmp_path)
    entry.chmod(0o666)
    fn, traces = _counted(2.0)
    with _programs.kept_programs(tmp_path, "context"):
        out = _programs.call("f", fn, x, options)
    assert len(traces) == 1  # traced, not loaded; and written again, privately
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert entry.stat().st_mode & 0o077 == 0


def test_programs_that_cannot_be_kept_run_as_usual(tmp_path):
    # A host callback (JAX cannot serialize it), and an output structure that
    # cannot be stored (an equinox Module): run, not kept.
    def with_callback(x):
        return jax.pure_callback(
            lambda v: np.cos(v), jax.ShapeDtypeStruct(x.shape, x.dtype), x
        )

    class Box(eqx.Module):
        value: jax.Array

    traces = []

    def boxed(x):
        traces.append(1)
        return Box(2 * x)

    with _programs.kept_programs(tmp_path, "context"):
        out = _programs.call("callback", with_callback, jnp.arange(3.0))
        box = _programs.call("module", boxed, jnp.arange(3.0))
    np.testing.assert_allclose(out, np.cos(np.arange(3.0)), rtol=1e-15)
    assert isinstance(box, Box)
    assert len(traces) == 1  # the exported program is used, just not kept
    np.testing.assert_allclose(box.value, 2 * np.arange(3.0), rtol=1e-15)
    assert _entries(tmp_path) == []


def test_kept_simulation_names_its_failure_like_simulate(tmp_path):
    # The command line's solve, kept: the same trajectory as jl.simulate, and a
    # failure still named by the diagnosis (a program compiled afterwards).
    def lagrangian(q, qd, t, params):
        # M = 1 - q² turns singular at q = 1, which the motion reaches.
        return 0.5 * (1.0 - q[0] ** 2) * qd[0] ** 2 + params["f"] * q[0]

    system = jl.LagrangianSystem(lagrangian, params={"f": 1.0})
    options = dict(t1=3.0, saveat=jnp.linspace(0.0, 3.0, 7), rtol=1e-10, atol=1e-10)
    q0, qd0 = jnp.array([0.0]), jnp.array([0.0])
    expected = jl.simulate(system, q0, qd0, throw=False, **options)
    assert jl.result_name(expected) == "singular_mass_matrix"
    for _ in range(2):
        # equinox's checks as values: a program with host callbacks is not kept.
        with errors_as_values(), _programs.kept_programs(tmp_path, "context"):
            out = _programs.call("solve", simulate_program(**options), system, q0, qd0)
        traj = trajectory_from(system, out)
        assert jl.result_name(traj) == "singular_mass_matrix"
        np.testing.assert_array_equal(traj.q, expected.q)
        np.testing.assert_array_equal(traj.t_final, expected.t_final)
    assert len(_entries(tmp_path)) == 1


@pytest.mark.parametrize("edit", ["system file", "helper module"])
def test_cli_traces_again_after_an_edit_to_the_users_code(tmp_path, edit, capsys):
    from jaxlagrange._cli._common import kept_programs

    helper = tmp_path / "helper_force_7d2.py"
    helper.write_text("FORCE = 1.0\n")
    (tmp_path / "mysystem.py").write_text(
        "import helper_force_7d2\n"
        "def lagrangian(q, qd, t, params):\n"
        "    return 0.5 * qd[0] ** 2 - 0.5 * q[0] ** 2\n"
    )
    import importlib
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("helper_force_7d2")
        config = {"system": {"file": str(tmp_path / "mysystem.py")}, "source": "x"}
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "cache"))
        contexts = []
        for version in (1, 2):
            if version == 2:
                target = helper if edit == "helper module" else tmp_path / "mysystem.py"
                target.write_text(target.read_text() + "# edited\n")
            with kept_programs(config):
                contexts.append(_programs._STORE.get().context)
        assert contexts[0] != contexts[1]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper_force_7d2", None)
        jax.config.update("jax_compilation_cache_dir", None)


def _keep(tmp_path, context, scale, x=None):
    """`call` of `_counted(scale)` in the store of `context`: (output, traces)."""
    x = jnp.arange(3.0) if x is None else x
    fn, traces = _counted(scale)
    with _programs.kept_programs(tmp_path, context):
        out = _programs.call("f", fn, x, {"n": jnp.asarray(1.0)})
    return out, traces


def test_an_entry_kept_under_another_key_is_not_run(tmp_path):
    # The closure's scale stands for what the config determines (t1 = 1 or 2):
    # an entry copied over another config's is traced anew and replaced.
    _keep(tmp_path, "scale 1", 1.0)
    (one,) = _entries(tmp_path)
    _keep(tmp_path, "scale 2", 2.0)
    (two,) = set(_entries(tmp_path)) - {one}
    two.write_bytes(one.read_bytes())
    out, traces = _keep(tmp_path, "scale 2", 2.0)
    assert len(traces) == 1
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert two.read_bytes() != one.read_bytes()  # replaced: later runs load it
    out, traces = _keep(tmp_path, "scale 2", 2.0)
    assert traces == []
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)


class _Planted:
    """A pickle that creates a file when it is loaded."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_an_entry_holds_a_program_and_nothing_else(tmp_path):
    import pickle

    _keep(tmp_path, "context", 2.0)
    (entry,) = _entries(tmp_path)
    assert entry.read_bytes().startswith(b"JLXPROG\0")
    # An entry replaced by a pickle (of the format kept programs once had):
    # nothing in it is run, the program is traced anew.
    marker = tmp_path / "ran"
    entry.write_bytes(pickle.dumps({"exported": _Planted(marker), "tree": None}))
    out, traces = _keep(tmp_path, "context", 2.0)
    assert not marker.exists()
    assert len(traces) == 1
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert entry.read_bytes().startswith(b"JLXPROG\0")


def _reheadered(entry, payload):
    """`entry` rewritten with `payload` under a sound header (its length and
    digest updated): a program damaged where no checksum can see it."""
    import hashlib
    import struct

    data = entry.read_bytes()
    header = struct.Struct("<8sI32sQ32s")
    magic, version, key, _, _ = header.unpack_from(data)
    digest = hashlib.sha256(payload).digest()
    entry.write_bytes(header.pack(magic, version, key, len(payload), digest) + payload)


@pytest.mark.parametrize("damage", ["flipped bytes", "bad StableHLO", "truncated"])
def test_a_damaged_program_is_traced_and_replaced_for_later_runs(tmp_path, damage):
    _keep(tmp_path, "context", 2.0)
    (entry,) = _entries(tmp_path)
    good = entry.read_bytes()
    data = bytearray(good)
    if damage == "flipped bytes":  # in the program: caught by its digest
        for i in range(len(data) // 2, len(data) // 2 + 16):
            data[i] ^= 0xFF
        entry.write_bytes(bytes(data))
    elif damage == "bad StableHLO":  # the digest agrees: fails to deserialize
        payload = bytearray(good[88:])
        start = payload.find(b"ML\xefR")  # MLIR bytecode's magic
        assert start > 0
        for i in range(start + 4, start + 64):
            payload[i] ^= 0xFF
        _reheadered(entry, bytes(payload))
    else:
        entry.write_bytes(good[: len(good) // 3])
    damaged = entry.read_bytes()
    out, traces = _keep(tmp_path, "context", 2.0)
    assert len(traces) >= 1
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
    assert entry.read_bytes() != damaged
    out, traces = _keep(tmp_path, "context", 2.0)
    assert traces == []  # replaced: loaded by the next run
    np.testing.assert_allclose(out["y"], 2.0 * np.sin(np.arange(3.0)), rtol=1e-15)
