"""The ready systems' listing that `jaxlagrange systems` prints, stored as text
(`systems/listing.txt`, written by `tools/systems_listing.py` and checked against
the factories by the tests), so that listing them imports no JAX."""

from pathlib import Path


LISTING = Path(__file__).parent / "systems" / "listing.txt"


def blocks() -> dict[str, str]:
    """Each ready system's lines of the listing, by name, in order."""
    found: dict[str, str] = {}
    for line in LISTING.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.startswith(" "):  # "name: summary"
            name = line.split(":")[0]
            found[name] = ""
        found[name] += line
    return found
