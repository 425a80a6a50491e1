"""Evaluate a traced function on lanes: elementwise arithmetic only.

A function of small arrays (one ensemble member's right-hand side, one state's
q̈) is traced to a jaxpr once and evaluated with every value of shape `s` held as
a NumPy object array of shape `s` whose elements are *lanes*: arrays of one
shape, `lane_shape`, one entry per member. Each primitive becomes that primitive
applied element by element, and the data movement of the jaxpr (slices, pads,
concatenations, transposes, static gathers, broadcasts, unstacks) becomes a
rearrangement of the object array, decided at trace time.

Two users (the package imports only `_errors` from `jaxlagrange`):

- the fused ensemble kernel (`_kernel`), with lanes of shape (block,): what a
  GPU kernel then sees is only elementwise arithmetic on (block,) vectors, no
  stacking, gathering or reshaping of registers, which Pallas's Triton lowering
  cannot do freely (`LaneFunction`, `to_lanes`, `from_lanes`);
- the scalar form of q̈ on the CPU (`_scalar.py`, chosen by
  `_eom.scalar_where_small`), with lanes of shape (): scalar code that `vmap` turns into
  one loop over the batch.

Values known at trace time (the tangent basis of the mass matrix, literals,
iotas) stay NumPy scalars and are folded (`_known`): x·1 = x, x + 0 = x,
x·0 = 0 (the last is exact for finite x; a non-finite state is reported by the
kernel anyway).

`_evaluator`: the evaluator. `_known`: values known at trace time. `_movement`:
data movement. `_function`: `LaneFunction` and the lanes of a batched array.
`_scalar`: `scalar_form`.
"""

from ._function import (
    LaneFunction as LaneFunction,
    from_lanes as from_lanes,
    to_lanes as to_lanes,
)
from ._known import UnsupportedPrimitiveError as UnsupportedPrimitiveError
