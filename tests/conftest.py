import os

import jax


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

# The command line's persistent compilation cache stays off in tests (also in
# their subprocesses) unless a test turns it on in a directory of its own.
os.environ["JAXLAGRANGE_CACHE_DIR"] = ""
