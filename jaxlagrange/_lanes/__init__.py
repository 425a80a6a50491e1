"""The lane evaluator: a traced function evaluated with every value of shape `s`
an object array of shape `s` of *lanes* (arrays of one shape, one entry per
member), so that what reaches XLA is elementwise arithmetic only (why:
docs/performance.md). Data movement is resolved at trace time and values known
then (the tangent basis of M, literals, iotas) are folded: x·1 = x, x + 0 = x,
x·0 = 0 (exact for finite x; the kernel reports a non-finite state anyway).

Two users: the fused ensemble kernel (`_kernel`, lanes of shape (block,):
`LaneFunction`, `to_lanes`, `from_lanes`) and the scalar form of q̈ on the CPU
(`_scalar.py`, lanes of shape (), which `vmap` turns into one loop).

`_evaluator`: the evaluator. `_known`: values known at trace time. `_movement`:
data movement. `_function`: `LaneFunction` and the lanes of a batched array.
"""

from ._function import (
    LaneFunction as LaneFunction,
    from_lanes as from_lanes,
    lanes_of as lanes_of,
    to_lanes as to_lanes,
)
from ._known import (
    UnsupportedPrimitiveError as UnsupportedPrimitiveError,
    object_array as object_array,
)
