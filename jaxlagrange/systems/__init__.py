"""Ready systems: each a function returning a `ReadySystem`, registered by name."""

from ._bouncing_ball import bouncing_ball as bouncing_ball
from ._cartesian_pendulum import (
    cartesian_double_pendulum as cartesian_double_pendulum,
    cartesian_pendulum as cartesian_pendulum,
)
from ._cavity import cavity as cavity
from ._charged_particle import charged_particle as charged_particle
from ._double_pendulum import double_pendulum as double_pendulum
from ._free_rigid_body import free_rigid_body as free_rigid_body
from ._heavy_top import heavy_top as heavy_top
from ._kapitza import kapitza as kapitza
from ._kepler import kepler as kepler
from ._mass_on_sphere import mass_on_sphere as mass_on_sphere
from ._pendulum import pendulum as pendulum
from ._registry import (
    ReadySystem as ReadySystem,
    describe as describe,
    get as get,
    make as make,
    names as names,
    register as register,
)
from ._rolling_coin import rolling_coin as rolling_coin
from ._rolling_disk import rolling_disk as rolling_disk
from ._rotating_rod import rotating_rod as rotating_rod
from ._spherical_pendulum import spherical_pendulum as spherical_pendulum
from ._spring_chain import spring_chain as spring_chain
from ._whipple_bicycle import whipple_bicycle as whipple_bicycle
