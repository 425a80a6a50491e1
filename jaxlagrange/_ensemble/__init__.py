"""Ensembles: many solves of one system, in memory or streamed to disk.

`_batch`: `simulate_batch`. `_sweep`: `sweep`, chunks streamed to a store
(`_store`, checked by `_store_verify`; what identifies a sweep: `_identity`), and
`_sweep_simulate`: `simulate_sweep` and the command line's member. Each entry
writes a member (`_member.AbstractMember`: `simulate` of one row of the inputs,
`_inputs` checks them); `_backend` solves the members of a batch on vmap or in
the fused kernel (`_kernel/`), chosen once by name, sharded by `_sharding`.
"""
