"""Strict TOML configs, translated into the public calls a Python user makes.

A run config has the sections of `RUN_SCHEMA` (an example in docs/cli.md), every
key optional except `[system] name` (or `file`, a system of your own: see
`jaxlagrange._config.user`, or `mujoco`, an MJCF or URDF file).

`load` checks a file against a schema (a dict of sections, each a dict of `Key`s)
and returns the document with defaults filled in; `ready_system` and
`simulate_kwargs` turn a checked document into the arguments of
`jl.systems.make` and `jl.simulate`. Other subcommands add their own sections by
passing a larger schema to `load`. Every problem is a `ConfigError` whose message
is one line naming the file, the section and the key."""

from ._schema import ConfigError as ConfigError, Key as Key, check as check
from .fit import (
    FIT_SCHEMA as FIT_SCHEMA,
    data_paths as data_paths,
    fit_kwargs as fit_kwargs,
)
from .run import (
    DEFAULT_CONFIG as DEFAULT_CONFIG,
    DEVICES as DEVICES,
    RUN_SCHEMA as RUN_SCHEMA,
    SOLVERS as SOLVERS,
    factory_options as factory_options,
    load as load,
    ready_system as ready_system,
    simulate_kwargs as simulate_kwargs,
)
from .sweep import (
    SWEEP_SCHEMA as SWEEP_SCHEMA,
    axis_input as axis_input,
    sweep_axes as sweep_axes,
)
from .user import system_file as system_file
