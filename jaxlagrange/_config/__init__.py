"""Strict TOML configs, translated into the public calls a Python user makes.

`load` checks a file against a schema (sections of `Key`s, `_schema`) and fills in
the defaults; `ready_system`, `simulate_kwargs`, `sweep_axes` and `fit_kwargs`
turn the checked document into the arguments of `jl.systems.make`, `jl.simulate`,
`jl.simulate_sweep` and `jl.fit`. Every problem is a one-line `ConfigError` naming
the file, the section and the key. The keys are documented in docs/cli.md."""

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
