"""Result codes as an enumeration: `jl.result_name` and `jl.result_message` on a
trajectory, a batch, a `RESULTS` item and stored integer codes; the one table
from code to name and message; and the first-error helper's priority order."""

import itertools
import re
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import jaxlagrange as jl
from jaxlagrange._errors import first_error
from jaxlagrange._results import (
    MESSAGES,
    NAMES,
    code_of,
    item_of,
    messages_of,
    promote,
)


def _vanishing_mass(q, qd, t):
    # The mass 1 − q vanishes at q = 1: from q = 0 moving up it is reached at
    # t = 2/3 (E = 1/2, (1 − q)^{1/2} dq = dt); moving down it never is.
    return 0.5 * (1.0 - q[0]) * qd[0] ** 2


SYSTEM = jl.LagrangianSystem(_vanishing_mass)


def test_a_single_trajectory_names_its_result():
    ok = jl.simulate(SYSTEM, jnp.array([0.0]), jnp.array([-1.0]), t1=1.0)
    assert jl.result_name(ok) == "successful"
    assert jl.result_message(ok) == ""
    bad = jl.simulate(SYSTEM, jnp.array([0.0]), jnp.array([1.0]), t1=1.0, throw=False)
    assert jl.result_name(bad) == "singular_mass_matrix"
    assert isinstance(jl.result_name(bad), str)
    assert jl.result_name(bad.result) == "singular_mass_matrix"
    message = jl.result_message(bad)
    assert message == jl.RESULTS[jl.RESULTS.singular_mass_matrix]
    assert message.startswith("The mass matrix ∂²L/∂qd² became singular")
    # The message `throw=True` raises is the same one.
    with pytest.raises(Exception, match=re.escape(message[:60])):
        jl.simulate(SYSTEM, jnp.array([0.0]), jnp.array([1.0]), t1=1.0)


def test_a_batch_names_each_member():
    q0 = jnp.zeros((3, 1))
    qd0 = jnp.array([[1.0], [-1.0], [2.0]])  # up, down, up
    traj = jl.simulate_batch(SYSTEM, q0, qd0, t1=1.0, throw=False)
    names = jl.result_name(traj)
    assert isinstance(names, np.ndarray) and names.shape == (3,)
    assert names.tolist() == [
        "singular_mass_matrix",
        "successful",
        "singular_mass_matrix",
    ]
    np.testing.assert_array_equal(names != "successful", jl.failed(traj))
    np.testing.assert_array_equal(
        names == "singular_mass_matrix",
        traj.result == jl.RESULTS.singular_mass_matrix,
    )
    messages = jl.result_message(traj)
    assert messages.tolist() == [
        jl.RESULTS[jl.RESULTS.singular_mass_matrix],
        "",
        jl.RESULTS[jl.RESULTS.singular_mass_matrix],
    ]
    # jax.vmap of simulate gives the same batched item.
    vmapped = jax.vmap(
        lambda q, qd: jl.simulate(SYSTEM, q, qd, t1=1.0, throw=False).result
    )(q0, qd0)
    np.testing.assert_array_equal(jl.result_name(vmapped), names)
    # The integer codes, as a sweep stores them, read the same.
    np.testing.assert_array_equal(jl.result_name(np.asarray(code_of(vmapped))), names)
    assert jl.result_name(np.zeros((2, 0), np.int32)).shape == (2, 0)


def test_every_results_member_round_trips():
    assert len(NAMES) == len(MESSAGES) == len(jl.RESULTS)
    assert len(set(NAMES)) == len(NAMES)
    assert not [n for n in NAMES if n.startswith("code_")]  # every code named
    for code, name in enumerate(NAMES):
        item = getattr(jl.RESULTS, name)
        assert int(code_of(item)) == code
        assert jl.result_name(item) == name
        assert jl.result_name(code) == name
        assert jl.result_message(item) == jl.RESULTS[item] == MESSAGES[code]
        assert bool(item_of(code_of(item)) == item)
    assert MESSAGES[0] == ""  # successful
    # The table is equinox's own (read here, never in the package).
    assert list(jl.RESULTS._index_to_message) == list(MESSAGES)
    assert {n: int(i._value) for n, i in jl.RESULTS._name_to_item.items()} == {
        n: c for c, n in enumerate(NAMES)
    }
    # Another enumeration's messages, by the same public route.
    assert messages_of(optx.RESULTS) == tuple(optx.RESULTS._index_to_message)


def test_a_batched_item_from_codes():
    codes = jnp.array([0, int(code_of(jl.RESULTS.max_events_reached))])
    item = item_of(codes)
    np.testing.assert_array_equal(item == jl.RESULTS.successful, [True, False])
    assert jl.result_name(item).tolist() == ["successful", "max_events_reached"]
    assert jl.result_name(item_of(jnp.array(0))) == "successful"


def test_bad_results_are_named():
    with pytest.raises(ValueError, match=r"`jl.result_name`: 99 is not a"):
        jl.result_name(99)
    with pytest.raises(ValueError, match=r"`jl.result_message`: -1 is not a"):
        jl.result_message(np.array([0, -1]))
    with pytest.raises(ValueError, match="result codes must be integers"):
        jl.result_name(1.0)
    with pytest.raises(ValueError, match=r"takes a `jl.Trajectory`, a `jl.RESULTS`"):
        jl.result_name(diffrax.RESULTS.successful)
    with pytest.raises(ValueError, match=r"not under `jax.jit`"):
        jax.jit(lambda r: jl.result_name(r) == "successful")(jl.RESULTS.successful)


def test_the_package_reads_no_private_enumeration_attribute():
    package = Path(jl.__file__).parent
    private = re.compile(r"\._value\b|_index_to_message|_name_to_item")
    found = [
        f"{path.relative_to(package)}:{i}"
        for path in sorted(package.rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert found == []


_CHECKED = ("the first failure", "the second failure", "the third failure")


@eqx.filter_jit
def _checked(flags, x):
    return first_error(x, zip(flags, _CHECKED, strict=True))


@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=3)))
def test_first_error_raises_the_first_condition_that_holds(flags):
    x = jnp.arange(3.0)
    if not any(flags):
        np.testing.assert_array_equal(_checked(jnp.array(flags), x), x)
        return
    expected = _CHECKED[flags.index(True)]
    with pytest.raises(eqx.EquinoxRuntimeError, match=expected):
        _checked(jnp.array(flags), x)


def test_first_error_under_vmap_raises_the_first_failure_of_the_batch():
    batched = jax.vmap(_checked)
    x = jnp.zeros((2, 3))
    # Each member's own failure is a later one than another member's.
    flags = jnp.array([[False, False, True], [False, True, False]])
    with pytest.raises(eqx.EquinoxRuntimeError, match=_CHECKED[1]):
        batched(flags, x)
    # A member without a failure does not name one.
    flags = jnp.array([[False, False, False], [False, False, True]])
    with pytest.raises(eqx.EquinoxRuntimeError, match=_CHECKED[2]):
        batched(flags, x)
    np.testing.assert_array_equal(batched(jnp.zeros((2, 3), bool), x), x)


def test_first_error_reduces_array_conditions():
    x = jnp.ones(2)
    check = eqx.filter_jit(
        lambda v: first_error(x, [(v > 1.0, "above one"), (v < 0.0, "negative")])
    )
    with pytest.raises(eqx.EquinoxRuntimeError, match="negative"):
        check(jnp.array([0.5, -1.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="above one"):
        check(jnp.array([2.0, -1.0]))
    np.testing.assert_array_equal(check(jnp.array([0.5, 0.5])), x)
    assert first_error(x, []) is x


def _soft_potential(q, qd, t):
    # The potential q^{3/2} is NaN-valued below q = 0, with a finite mass.
    return 0.5 * jnp.sum(qd**2) - jnp.sum(q**1.5)


def test_accelerations_name_the_most_basic_failure_of_a_batch():
    system = jl.LagrangianSystem(_soft_potential)
    q = jnp.array([[jnp.nan], [-1.0]])  # a non-finite state; NaN accelerations
    qd = jnp.zeros((2, 1))
    accelerations = jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None))
    with pytest.raises(
        eqx.EquinoxRuntimeError, match=r"The state \(q, qd, t\) contains a non-finite"
    ):
        accelerations(system, q, qd, 0.0)
    with pytest.raises(eqx.EquinoxRuntimeError, match="jl.accelerations is not finite"):
        accelerations(system, q[1:], qd[1:], 0.0)


def test_promote_equals_equinox_promote():
    # `promote` relabels diffrax's codes without equinox's eager table lookup.
    codes = np.arange(len(diffrax.RESULTS), dtype=np.int32)
    for code in codes:
        item = item_of(code, diffrax.RESULTS)
        assert int(code_of(promote(item))) == int(code_of(jl.RESULTS.promote(item)))
        assert jl.RESULTS[promote(item)] == diffrax.RESULTS[item]
    batched = jax.jit(lambda c: code_of(promote(item_of(c, diffrax.RESULTS))))(codes)
    expected = code_of(jl.RESULTS.promote(item_of(jnp.asarray(codes), diffrax.RESULTS)))
    np.testing.assert_array_equal(batched, expected)
