"""Ready systems: each a function returning a `ReadySystem`, registered by name."""

from ._double_pendulum import double_pendulum as double_pendulum
from ._pendulum import pendulum as pendulum
from ._registry import (
    ReadySystem as ReadySystem,
    get as get,
    make as make,
    names as names,
    register as register,
)
