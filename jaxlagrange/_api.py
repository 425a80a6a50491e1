"""The public names of `jaxlagrange`, imported by its `__getattr__` at first use."""

from . import mujoco as mujoco, plotting as plotting, rigid as rigid, systems as systems
from ._accelerations import (
    accelerations as accelerations,
    constraint_force as constraint_force,
    multipliers as multipliers,
)
from ._ensemble._batch import simulate_batch as simulate_batch
from ._ensemble._store import open_store as open_store
from ._ensemble._sweep import sweep as sweep
from ._ensemble._sweep_simulate import simulate_sweep as simulate_sweep
from ._eom import energy as energy, mass_matrix as mass_matrix, momenta as momenta
from ._equilibrium import equilibrium as equilibrium
from ._fit._loss import Observations as Observations, fit_loss as fit_loss
from ._fit._main import FitResult as FitResult, fit as fit
from ._hold import ZeroOrderHold as ZeroOrderHold
from ._impulse import apply_impulse as apply_impulse
from ._initial_state import project_initial_state as project_initial_state
from ._integrators import VariationalMidpoint as VariationalMidpoint
from ._linearize import (
    Linearization as Linearization,
    linearize as linearize,
    normal_modes as normal_modes,
)
from ._lyapunov import finite_time_lyapunov as finite_time_lyapunov
from ._neural import neural_lagrangian as neural_lagrangian
from ._simulate import simulate as simulate
from ._system import LagrangianSystem as LagrangianSystem
from ._trajectory import (
    EVENT_IMPACT as EVENT_IMPACT,
    EVENT_RELEASE as EVENT_RELEASE,
    EVENT_SLIP as EVENT_SLIP,
    EVENT_STICK as EVENT_STICK,
    RESULTS as RESULTS,
    Trajectory as Trajectory,
    failed as failed,
    result_message as result_message,
    result_name as result_name,
)
