"""jaxlagrange: differentiable Lagrangian mechanics in JAX.

The public names (`_api`) are imported at their first use (PEP 562), and JAX
with them: `jaxlagrange systems` lists the ready systems without it."""

from typing import TYPE_CHECKING


if TYPE_CHECKING:  # (for type checkers and the docs)
    from ._api import *  # noqa: F403


__version__ = "0.1.0"


def _public() -> dict:
    from . import _api

    return {k: v for k, v in vars(_api).items() if not k.startswith("_")}


def __getattr__(name: str):
    public = _public() if name == "__all__" or not name.startswith("_") else {}
    if name == "__all__":
        return sorted(public)
    if name not in public:
        raise AttributeError(f"module 'jaxlagrange' has no attribute {name!r}")
    globals()[name] = public[name]  # found directly from now on
    return public[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_public()})
