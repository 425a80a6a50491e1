import gc
import os
import sys
import warnings

import jax
import jaxtyping
import pytest


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

# The command line's persistent compilation cache stays off in tests (also in
# their subprocesses) unless a test turns it on in a directory of its own.
os.environ["JAXLAGRANGE_CACHE_DIR"] = ""


# jaxtyping annotations are checked at run time with beartype, as diffrax does.
# `pytest --jaxtyping-packages=jaxlagrange,TYPECHECKER` instruments the whole
# package for every test. Without it, the package is instrumented here and checked
# only in tests marked `typecheck`; `no_typecheck` exempts a test that passes a
# wrong type or shape on purpose, to see the package's own error message.
TYPECHECKER = "beartype.beartype(conf=beartype.BeartypeConf(strategy=beartype.BeartypeStrategy.On))"
_whole_package = False


def pytest_configure(config):
    global _whole_package
    _whole_package = bool(config.getoption("--jaxtyping-packages", default=None))
    if _whole_package:
        return
    try:
        import beartype  # noqa: F401  (the `test` extra)
    except ImportError:
        return  # nothing is checked, and test_annotations.py is skipped
    if "jaxlagrange" in sys.modules:
        warnings.warn("jaxlagrange imported before conftest: unchecked", stacklevel=1)
    jaxtyping.install_import_hook("jaxlagrange", TYPECHECKER)
    jaxtyping.config.update("jaxtyping_disable", True)


@pytest.fixture(autouse=True)
def _typecheck(request):
    marked = _whole_package or request.node.get_closest_marker("typecheck")
    exempt = request.node.get_closest_marker("no_typecheck")
    jaxtyping.config.update("jaxtyping_disable", not marked or bool(exempt))
    yield
    jaxtyping.config.update("jaxtyping_disable", not _whole_package)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    # XLA's CPU backend maps every compiled program into memory; a session of
    # hundreds of test programs exhausts the process's memory maps
    # (vm.max_map_count: "LLVM compilation error: Cannot allocate memory"), so
    # each test module's programs are released when it ends.
    yield
    jax.clear_caches()
    gc.collect()


# The quick set, `pytest -m quick` (docs/index.md, "For contributors"): one or
# two fast, representative tests per feature area, a few minutes on two cores.
QUICK = (
    "test_simulate.py::test_damped_oscillator_closed_form",
    "test_simulate.py::test_constrained_pendulum_multipliers_are_the_tension",
    "test_eom.py::test_double_pendulum_textbook",
    "test_events.py::test_max_events",
    "test_events.py::test_apply_impulse_free_particle",
    "test_complementarity.py::test_two_pulling_rows_of_which_one_holds",
    "test_friction.py::test_block_on_incline_stays_or_slides",
    "test_batch.py::test_structure_errors",
    "test_linearize.py::test_double_pendulum_modes",
    "test_mass_solvers.py::test_unconstrained",
    "test_variational.py::test_reversible",
    "test_rigid.py::test_quaternion_to_matrix_matches_scipy",
    "test_systems.py::test_registry_errors",
    "test_systems.py::test_pendulum_acceleration",
    "test_results.py::test_bad_results_are_named",
    "test_options.py::test_max_events_must_be_a_positive_int",
    "test_config.py::test_check_errors",
    "test_cli.py::test_bad_configs",
    "test_sweep.py::test_bad_sweep_configs_are_one_line_errors",
    "test_fit.py::test_bad_fit_arguments",
    "test_kernel.py::test_lanes_unsupported_primitive",
    "test_lanes.py::test_unstack",
    "test_mujoco.py::test_no_actuators_no_ctrl",
    "test_plotting.py::test_phase_portrait_panels",
)


def pytest_collection_modifyitems(config, items):
    found, files = set(), {item.path.name for item in items}
    for item in items:
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if name in QUICK:
            item.add_marker(pytest.mark.quick)
            found.add(name)
    # With -m quick over whole files, every name of the quick set in a collected
    # file must be a test of it (a renamed test would drop out silently).
    if config.getoption("markexpr") != "quick" or any("::" in a for a in config.args):
        return
    missing = [n for n in QUICK if n.split("::")[0] in files and n not in found]
    if missing:
        raise pytest.UsageError(f"QUICK names no such test: {', '.join(missing)}")
