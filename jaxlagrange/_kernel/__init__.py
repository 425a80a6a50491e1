"""The fused ensemble integrator (`simulate_batch(..., backend="kernel")`).

`_lanes`: a traced function evaluated on (block,) lane vectors, elementwise only.
`_tsit5`: the Pallas kernel, adaptive Tsit5 with one lane per member.
`_ensemble`: the supported systems and options, and the returned `Trajectory`.
"""
