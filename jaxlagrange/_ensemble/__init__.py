"""Ensembles: many solves of one system, in memory or streamed to disk.

`_batch`: `simulate_batch`. `_sweep`: `sweep`, chunks streamed to a store
(`_store`, checked by `_store_verify`; what identifies a sweep: `_identity`), and
`_sweep_simulate`: `simulate_sweep` and the command line's member. `_backend`:
how a batch of members is solved (a vmap, or the fused kernel in `_kernel/`),
chosen once by name; `_inputs`: the checks of a batch's inputs.
"""
