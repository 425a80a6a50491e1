"""Every ```python block of the docs pages runs (each page's blocks in order, in
one namespace, as a reader would paste them); ```py blocks are fragments."""

import os
import re
from pathlib import Path

import matplotlib
import pytest


DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "```python" in p.read_text())


def _blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_examples_run(page, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)  # files the examples write land here
    namespace: dict = {"__name__": "__docs__"}
    for i, block in enumerate(_blocks(page)):
        try:
            exec(compile(block, f"{page.name}, block {i + 1}", "exec"), namespace)
        except Exception as e:  # name the block that failed
            raise AssertionError(f"{page.name}, block {i + 1}: {e!r}") from e
    assert os.getcwd() == str(tmp_path)
