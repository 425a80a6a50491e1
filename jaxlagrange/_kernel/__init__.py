"""The fused ensemble integrator (`simulate_batch(..., backend="kernel")`).

The member's vector field is evaluated on (block,) lane vectors, elementwise only,
by the lane evaluator (`jaxlagrange/_lanes/`, shared with the scalar form).
`_tsit5`: the Pallas kernel, adaptive Tsit5 with one lane per member.
`_ensemble`: the supported systems and options, and the returned `Trajectory`.
"""
