import gc
import os

import jax
import pytest


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

# The command line's persistent compilation cache stays off in tests (also in
# their subprocesses) unless a test turns it on in a directory of its own.
os.environ["JAXLAGRANGE_CACHE_DIR"] = ""


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    # XLA's CPU backend maps every compiled program into memory; a session of
    # hundreds of test programs exhausts the process's memory maps
    # (vm.max_map_count: "LLVM compilation error: Cannot allocate memory"), so
    # each test module's programs are released when it ends.
    yield
    jax.clear_caches()
    gc.collect()
