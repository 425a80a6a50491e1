"""`RESULTS`, the result codes of `simulate`, and the one table from an item to
its integer code, its name and its message.

An `eqx.Enumeration` item is a pytree with one leaf, the integer code (batched
under `vmap`). Equinox has no public accessor for it, so the package reads and
builds items here alone, through the pytree protocol, and never through
equinox's private attributes.
"""

import diffrax
import jax
import numpy as np

from ._custom_types import ArrayLike, Int


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's result codes, and the ones jaxlagrange detects itself.

    Compare an item with `==` (`traj.result == jl.RESULTS.successful`, also
    batched); read its name with `jl.result_name` and its message with
    `jl.result_message`.
    """

    singular_mass_matrix = (
        "The mass matrix ∂²L/∂qd² became singular or indefinite during the solve: "
        "the Lagrangian is not strictly convex in qd there (or an iterative "
        "`mass_solver` did not converge within its max_steps)."
    )
    redundant_constraints = (
        "The constraints became inconsistent during the solve: the constraint "
        "Jacobian is rank-deficient there and its redundant rows contradict each "
        "other (redundant rows that agree are solved, least-norm)."
    )
    non_finite_state = (
        "The state or the equations of motion became non-finite (NaN or inf) during "
        "the solve, e.g. a square root or logarithm of a negative number in a user "
        "function."
    )
    step_size_collapsed = (
        "The step size collapsed to the resolution of t before t1: the solution "
        "blows up or is not smooth there."
    )
    max_events_reached = (
        "The maximum number of events (releases, impacts, sticks and slips at "
        "unilateral constraints) was reached before t1. Raise it with "
        "`jl.simulate(..., max_events=...)`."
    )
    inconsistent_initial_state = (
        "The initial state is not on its constraints at t0: off g = 0 or the "
        "velocity constraints (project it with `jl.project_initial_state`), or "
        "below a unilateral constraint h = 0."
    )
    implicit_step_failed = (
        "The implicit solve of a variational integrator step did not converge: "
        "take a smaller `dt0`, or raise the solver's `max_iterations`."
    )
    contact_penetration = (
        "A unilateral constraint sank below h = 0 by more than its tolerance "
        "(√eps + 100 atol, in the units of h) during the solve: a contact was "
        "missed."
    )


# The names of the members, those inherited from diffrax (lineax, optimistix,
# diffrax) first. An enumeration keeps its names to itself: `tests/test_results.py`
# checks that these name every code exactly once.
_NAMES = """successful max_steps_reached singular breakdown stagnation conlim
nonfinite_input nonlinear_max_steps_reached nonlinear_divergence nonfinite
dt_min_reached event_occurred max_steps_rejected internal_error
singular_mass_matrix redundant_constraints non_finite_state step_size_collapsed
max_events_reached inconsistent_initial_state implicit_step_failed
contact_penetration""".split()


def code_of(item) -> Int[ArrayLike, "*batch"]:
    """The integer code of an `eqx.Enumeration` item (its one leaf), batched alike."""
    leaves = jax.tree_util.tree_leaves(item)
    if len(leaves) != 1:
        raise ValueError(f"Expected an enumeration item, got {item!r}.")
    return leaves[0]


def item_of(codes: Int[ArrayLike, "*batch"], enumeration=RESULTS):
    """The item of `enumeration` with these integer codes (batched if `codes` is)."""
    treedef = jax.tree_util.tree_structure(enumeration.successful)
    return jax.tree_util.tree_unflatten(treedef, [codes])


def messages_of(enumeration) -> tuple[str, ...]:
    """The message of each code of `enumeration`, by code (`""` for `successful`)."""
    return tuple(
        enumeration[item_of(np.asarray(i, np.int32), enumeration)]
        for i in range(len(enumeration))
    )


def _names() -> tuple[str, ...]:
    named = {}
    for name in _NAMES:
        if hasattr(RESULTS, name):
            named[int(code_of(getattr(RESULTS, name)))] = name
    # A code added by a newer diffrax keeps a name, if not its own.
    return tuple(named.get(i, f"code_{i}") for i in range(len(RESULTS)))


NAMES: tuple[str, ...] = _names()
"""The name of each `RESULTS` code, indexed by the code."""

MESSAGES: tuple[str, ...] = messages_of(RESULTS)
"""The message of each `RESULTS` code, indexed by the code."""

SUCCESSFUL: int = int(code_of(RESULTS.successful))
"""The code of `RESULTS.successful`."""


# diffrax's codes are the first of `RESULTS`, in its order (`tests/test_results.py`).
_DIFFRAX_FIRST = messages_of(diffrax.RESULTS) == MESSAGES[: len(diffrax.RESULTS)]


def promote(item) -> RESULTS:
    """`RESULTS.promote(item)` of a `diffrax.RESULTS` item, compiling nothing."""
    # Equinox's promotion looks the code up in a table it puts on the device
    # eagerly: two small programs compiled on its first use in a process.
    if not _DIFFRAX_FIRST:
        return RESULTS.promote(item)
    return item_of(code_of(item))
