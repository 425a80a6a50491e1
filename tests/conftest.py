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
