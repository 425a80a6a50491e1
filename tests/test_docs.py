"""Every page of the docs site runs as a reader runs it: a page reads as one
session, so its ```python blocks run in order in one fresh Python process (in
JAX's default float32 unless the page enables float64), and each block prints
what the ```text block after it says (nothing, without one), compared as
`tests/test_readme.py` compares the README's (doctest's ELLIPSIS and
NORMALIZE_WHITESPACE). Lines
ending in `# quick: CODE` run as CODE, their block's output then unchecked.
"""

import json
import subprocess
import sys

import pytest
from test_readme import ROOT, _check_output, _environment, quick, readme_blocks


DOCS = ROOT / "docs"

# Runs a page's blocks in order in one namespace, each block's stdout captured on
# its own; writes [(stdout, traceback or None)] as JSON, stopping at a failure.
_PAGE_RUNNER = """
import contextlib, io, json, sys, traceback
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
namespace, outputs = {"__name__": "__main__"}, []
for line, code in blocks:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"<block at line {line}>", "exec"), namespace)
    except BaseException:
        outputs.append((out.getvalue(), traceback.format_exc()))
        break
    outputs.append((out.getvalue(), None))
json.dump(outputs, open(sys.argv[2], "w", encoding="utf-8"))
"""

PAGES = sorted(
    page
    for page in DOCS.rglob("*.md")
    if readme_blocks(page.read_text(encoding="utf-8"))
)


def test_docs_have_pages_with_blocks():
    assert len(PAGES) >= 8


@pytest.mark.parametrize(
    "page", PAGES, ids=[str(page.relative_to(DOCS)) for page in PAGES]
)
def test_docs_page_runs_and_prints_what_it_says(page, tmp_path):
    blocks = readme_blocks(page.read_text(encoding="utf-8"))
    codes = [(line, quick(code)[0]) for line, code, _ in blocks]
    (tmp_path / "blocks.json").write_text(json.dumps(codes), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-c", _PAGE_RUNNER, "blocks.json", "outputs.json"],
        cwd=tmp_path,
        env=_environment(False),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, (
        f"docs/{page.relative_to(DOCS)} did not run:\n{run.stderr[-3000:]}"
    )
    outputs = json.loads((tmp_path / "outputs.json").read_text(encoding="utf-8"))
    for (line, code, expected), (printed, error) in zip(blocks, outputs, strict=False):
        where = f"docs/{page.relative_to(DOCS)}, the block at line {line}"
        assert error is None, f"{where} failed:\n{error[-3000:]}"
        if not quick(code)[1]:
            _check_output(where, printed, expected)
    assert len(outputs) == len(blocks)
