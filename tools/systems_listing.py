"""Writes `jaxlagrange/systems/listing.txt`, what `jaxlagrange systems` prints
(without importing JAX): each ready system's summary, coordinates, params with
their meanings, options and initial state. Run it after changing a ready system;
tests/test_cli.py checks the stored listing against the factories.

    python tools/systems_listing.py
"""

from typing import Any

import numpy as np


def _format_value(x: Any) -> str:
    x = np.asarray(x)
    return (
        f"{x.item():g}" if x.ndim == 0 else "[" + ", ".join(f"{v:g}" for v in x) + "]"
    )


def listing() -> str:
    """The listing of every ready system, from its factory."""
    from jaxlagrange import _config, systems

    lines = []
    for name in systems.names():
        factory = systems.get(name)
        ready = factory()
        options = _config.factory_options(factory)
        params = ready.system.params or {}
        summary, meanings = systems.describe(name)
        lines.append(f"{name}: {summary}" if summary else name)
        lines.append(f"  coordinates: {', '.join(ready.coordinates)}")
        lines.append("  params:")
        values = {k: _format_value(v) for k, v in params.items()}
        width = max((len(f"{k} = {v}") for k, v in values.items()), default=0)
        for key, value in values.items():
            text = f"{key} = {value}"
            lines.append(f"    {text:<{width}}  {meanings.get(key, '')}".rstrip())
        if options:
            shown = ", ".join(f"{k} = {v!r}" for k, v in options.items())
            lines.append(f"  options:     {shown}")
        q0, qd0 = _format_value(ready.q0), _format_value(ready.qd0)
        lines.append(f"  initial:     q = {q0}, qd = {qd0}")
    return "".join(line + "\n" for line in lines)


if __name__ == "__main__":
    from jaxlagrange._listing import LISTING

    LISTING.write_text(listing(), encoding="utf-8")
