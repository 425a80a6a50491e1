"""Every page of the docs site runs as a reader runs it: a page reads as one
session, so its ```python blocks run in order in one fresh Python process (in
JAX's default float32 unless the page enables float64), and each block prints
what the ```text block after it says (nothing, without one), compared as
`tests/test_readme.py` compares the README's (doctest's ELLIPSIS and
NORMALIZE_WHITESPACE). Lines
ending in `# quick: CODE` run as CODE, their block's output then unchecked.
"""

import json
import re
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


def test_contributors_table_names_modules_and_names_that_exist():
    # docs/index.md's owners' table: each module (or subpackage) in the right
    # column exists, and each name beside it is defined in one of them.
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    table = text[text.index("| decision | owner |") :].splitlines()[2:]
    rows = [line.rsplit("|", 2)[1] for line in table if line.startswith("|")]
    assert len(rows) >= 30
    package = ROOT / "jaxlagrange"
    for owner in rows:
        tokens = re.findall(r"`([^`]+)`", owner)
        paths = [package / t for t in tokens if t.endswith((".py", "/"))]
        assert paths, f"no module named in {owner!r}"
        for path in paths:
            assert path.exists(), f"{path.relative_to(ROOT)} ({owner!r}) is gone"
        sources = "\n".join(
            f.read_text(encoding="utf-8")
            for path in paths
            for f in ([path] if path.is_file() else sorted(path.rglob("*.py")))
        )
        for name in (t for t in tokens if re.fullmatch(r"\w+", t)):
            defined = rf"(?m)^\s*(def {name}\(|class {name}\b|{name}\s*[:=])"
            assert re.search(defined, sources), f"{name} not in {owner!r}"
