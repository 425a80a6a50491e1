"""Print the design figures of the `jaxlagrange` package (standard library only).

Run from the project root: `python tools/design_figures.py` (or give the package
folder as the one argument). Each figure is measured on the syntax tree, so
comments, docstrings and messages never count:

- batch-backend decisions: `Compare` nodes with an operand that names the
  backend (a name or attribute containing `backend`, `getattr(x, "backend")`,
  the name `kernel`, or the string `"vmap"` or `"kernel"`), plus `isinstance`
  tests against a class whose name contains `Backend`; per module.
- `Tracer` tests: `isinstance(x, ...Tracer)` calls; count and files.
- option-dict reads: `options.get(...)` calls and `options[...]` subscripts
  (`options` a name or an attribute).
- constraint kinds read by name: per kind (`holonomic`, `nonholonomic`,
  `unilateral`, `slip`), the modules that spell it in any way: an attribute
  `.kind` or `._kind` (the field, or `LagrangianSystem`'s private evaluation),
  the kind's capability question (`has_position_constraints` for holonomic,
  `has_velocity_constraints` for nonholonomic, `has_equality_constraints` for
  both, `has_contacts` for unilateral, `has_friction` for slip), or the string
  `"kind"` outside a docstring (keyword arguments `kind=` build a system and do
  not count); the count outside the owner (`_system.py`) is the figure.
- private calls across modules: `x._name(...)` where `x` is not `self`/`cls`
  (a private method or a module's private function reached from outside;
  NamedTuple's public `_replace`, `_asdict`, `_fields`, `_make` excepted).
- code generation in `_mass/`: functions named `scalar_form` or `lanes` there,
  and imports of `_lanes` from it.
- raises per 1,000 code lines: `raise` statements over lines holding code.
- functions over 120 code lines: lines holding code (not blank, comment or
  docstring), nested functions counted in the function around them; the Pallas
  kernel body (`_kernel/_tsit5.py`: `_kernel_body` and its `kernel`) is exempt.
- private names imported across modules: `from .x import _name` where `_name`
  is not itself a module of the package.
- top-level modules: `.py` files directly in the package other than
  `__init__.py` and `__main__.py` (subpackages listed beside them).
- total package lines: all lines of all `.py` files.
"""

import ast
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path


KINDS = ("holonomic", "nonholonomic", "unilateral", "slip")
# Every spelling of a kind besides its name: the capability questions.
QUESTIONS = {
    "has_position_constraints": ("holonomic",),
    "has_velocity_constraints": ("nonholonomic",),
    "has_equality_constraints": ("holonomic", "nonholonomic"),
    "has_contacts": ("unilateral",),
    "has_friction": ("slip",),
}
OWNER = "_system.py"  # and `_kinds.py`, the constraint kinds
OWNERS = {OWNER, "_kinds.py"}
NAMEDTUPLE = {"_replace", "_asdict", "_fields", "_make"}
CODEGEN = {"scalar_form", "lanes"}
LONG = 120
EXEMPT = {("_kernel/_tsit5.py", "_kernel_body"), ("_kernel/_tsit5.py", "kernel")}


def _docstrings(tree):
    """The string constants that are docstrings."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                yield value


def _code_lines(source, tree):
    """Line numbers holding code (no comments, blank lines or docstrings)."""
    skip = {i for d in _docstrings(tree) for i in range(d.lineno, d.end_lineno + 1)}
    ignore = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT}
    ignore |= {tokenize.DEDENT, tokenize.ENDMARKER}
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in ignore:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - skip


def _names_backend(node):
    if isinstance(node, ast.Name):
        return "backend" in node.id.lower() or node.id == "kernel"
    if isinstance(node, ast.Attribute):
        return "backend" in node.attr.lower()
    if isinstance(node, ast.Constant):
        return node.value in ("vmap", "kernel")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) > 1:
            arg = node.args[1]
            return isinstance(arg, ast.Constant) and arg.value == "backend"
    return False


def _leaf_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _isinstance_classes(node):
    """The class names an `isinstance(x, cls)` call tests against."""
    if not (isinstance(node, ast.Call) and _leaf_name(node.func) == "isinstance"):
        return []
    if len(node.args) != 2:
        return []
    cls = node.args[1]
    parts = cls.elts if isinstance(cls, ast.Tuple) else [cls]
    return [_leaf_name(p) for p in parts]


def measure(package: Path):
    modules = sorted(package.rglob("*.py"))
    own = {p.relative_to(package).with_suffix("").as_posix() for p in modules}
    figures = {
        "backend": defaultdict(int),
        "tracer": defaultdict(int),
        "options": defaultdict(int),
        "kinds": {k: set() for k in KINDS},
        "long": [],
        "private": [],
        "calls": [],
        "codegen": [],
        "raises": 0,
        "code": 0,
        "lines": 0,
    }
    for path in modules:
        rel = path.relative_to(package).as_posix()
        source = path.read_text()
        figures["lines"] += source.count("\n")
        tree = ast.parse(source)
        docs = {id(d) for d in _docstrings(tree)}
        code = _code_lines(source, tree)
        figures["code"] += len(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise):
                figures["raises"] += 1
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr.startswith("_")
                and not node.func.attr.startswith("__")
                and node.func.attr not in NAMEDTUPLE
                and _leaf_name(node.func.value) not in ("self", "cls")
            ):
                figures["calls"].append(
                    f"{rel}:{node.lineno} {_leaf_name(node.func.value)}.{node.func.attr}"
                )
            if rel.startswith("_mass/") and (
                (isinstance(node, ast.FunctionDef) and node.name in CODEGEN)
                or (isinstance(node, ast.ImportFrom) and "_lanes" in (node.module or ""))
            ):
                figures["codegen"].append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Compare):
                if any(_names_backend(x) for x in [node.left, *node.comparators]):
                    figures["backend"][rel] += 1
            classes = _isinstance_classes(node)
            if any("Backend" in c for c in classes):
                figures["backend"][rel] += 1
            if "Tracer" in classes:
                figures["tracer"][rel] += 1
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and _leaf_name(node.func.value) == "options"
            ) or (
                isinstance(node, ast.Subscript) and _leaf_name(node.value) == "options"
            ):
                figures["options"][rel] += 1
            if isinstance(node, ast.Attribute):
                for kind in QUESTIONS.get(node.attr, ()):
                    figures["kinds"][kind].add(rel)
                if node.attr.lstrip("_") in KINDS:
                    figures["kinds"][node.attr.lstrip("_")].add(rel)
            if (
                isinstance(node, ast.Constant)
                and node.value in KINDS
                and id(node) not in docs
            ):
                figures["kinds"][node.value].add(rel)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len(code & set(range(node.lineno, node.end_lineno + 1)))
                if n > LONG and (rel, node.name) not in EXEMPT:
                    figures["long"].append((n, f"{rel}:{node.name}"))
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                here = Path(rel).parent.parts[
                    : len(Path(rel).parent.parts) - node.level + 1
                ]
                base = "/".join([*here, *(node.module or "").split(".")]).strip("/")
                for alias in node.names:
                    name = alias.name
                    if not name.startswith("_") or name.startswith("__"):
                        continue
                    target = f"{base}/{name}".strip("/")
                    if target in own or f"{target}/__init__" in own:
                        continue  # a module, not a private name
                    figures["private"].append(
                        f"{rel}: {name} from .{node.module or ''}"
                    )
    top = [
        p for p in package.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    ]
    subpackages = [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    return figures, len(top), sorted(subpackages)


def main(argv):
    package = Path(argv[1] if len(argv) > 1 else "jaxlagrange")
    f, top, subpackages = measure(package)

    def per_module(counts):
        return ", ".join(f"{m} {n}" for m, n in sorted(counts.items())) or "none"

    backend = f["backend"]
    print(f"batch-backend decisions: {sum(backend.values())} in {len(backend)} modules")
    print(f"  {per_module(backend)}")
    tracer = f["tracer"]
    print(f"Tracer tests: {sum(tracer.values())} in {len(tracer)} files")
    print(f"  {per_module(tracer)}")
    options = f["options"]
    print(f"option-dict reads: {sum(options.values())} in {len(options)} files")
    print(f"  {per_module(options)}")
    print(f"constraint kinds read, in any spelling (modules outside {sorted(OWNERS)}):")
    for kind, mods in f["kinds"].items():
        outside = sorted(mods - OWNERS)
        print(f"  {kind}: {len(outside)}  ({', '.join(outside)})")
    print(f"private calls across modules: {len(f['calls'])}")
    for line in f["calls"]:
        print(f"  {line}")
    print(f"code generation in _mass/: {len(f['codegen'])}  {' '.join(f['codegen'])}")
    per = 1000 * f["raises"] / max(f["code"], 1)
    print(f"raises: {f['raises']} in {f['code']} code lines ({per:.1f} per 1,000)")
    long = sorted(f["long"], reverse=True)
    print(f"functions over {LONG} code lines: {len(long)}")
    for n, name in long:
        print(f"  {n:4d} {name}")
    print(f"private names imported across modules: {len(f['private'])}")
    for line in f["private"]:
        print(f"  {line}")
    print(f"top-level modules: {top} (subpackages: {', '.join(subpackages)})")
    print(f"total package lines: {f['lines']}")


if __name__ == "__main__":
    main(sys.argv)
