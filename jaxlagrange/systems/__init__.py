"""Ready systems: each a function returning a `ReadySystem`, registered by name."""

from ._cavity import cavity as cavity
from ._registry import (
    get as get,
    make as make,
    names as names,
    ReadySystem as ReadySystem,
    register as register,
)
