"""MuJoCo models (MJCF or URDF) as Lagrangians: `jl.mujoco.load(source)`.

Needs the `mujoco` package (`pip install jaxlagrange[mujoco]`), imported only
when `load` is called.
"""

from ._save import save as save
from ._system import MujocoSystem as MujocoSystem, load as load
