"""The front end's ES modules (static/js/**/*.js) import one another without a circle, and every relative
import names a file that exists.

A circle between modules works by accident of evaluation order: whichever module the browser reaches first
sees the other's bindings uninitialised until it finishes, so a reorder of imports can break the page.
Pure Python (no node): the import graph is read from the sources with the patterns below.
"""
import re
from fnmatch import fnmatch
from pathlib import Path

JS = Path(__file__).resolve().parent.parent / "static" / "js"

_QUOTED = r"""(["'])(?P<spec>[^"'\n]+)\1"""
# Static imports and re-exports are top-level statements, so they start a line; a spec may follow a
# multi-line `{ a, b }` list. Comment lines start with // or * and never match.
_STATIC = [
    re.compile(r"^[ \t]*import\s*(?:[\w$]+\s*,?\s*)?(?:\*\s*as\s+[\w$]+|\{[^}]*\})?\s*from\s*" + _QUOTED, re.M),
    re.compile(r"^[ \t]*import\s*" + _QUOTED, re.M),  # import "./side-effect.js"
    re.compile(r"^[ \t]*export\s*(?:\*(?:\s*as\s+[\w$]+)?|\{[^}]*\})\s*from\s*" + _QUOTED, re.M),
]
# import("./x.js") or import(`../elements/${name}.js`): a template's ${...} stands for any file name part.
_DYNAMIC = re.compile(r"""\bimport\s*\(\s*(["'`])(?P<spec>[^"'`\n]+)\1\s*\)""")
_COMMENT_LINE = re.compile(r"^[ \t]*(//|/\*|\*).*$", re.M)


def _specifiers(source: str) -> list[str]:
    code = _COMMENT_LINE.sub("", source)
    found = [m.group("spec") for pattern in _STATIC for m in pattern.finditer(code)]
    found += [m.group("spec") for m in _DYNAMIC.finditer(code)]
    return [spec for spec in found if spec.startswith(("./", "../"))]  # bare and absolute ones are not ours


def _resolve(module: Path, spec: str, modules: list[Path]) -> list[Path]:
    """The modules a relative specifier can load: one file, or every match of a template's pattern."""
    pattern = re.sub(r"\$\{[^}]*\}", "*", spec)
    target = (module.parent / pattern).resolve()
    if "*" not in pattern:
        return [target]
    return [m for m in modules if fnmatch(str(m), str(target))]


def import_graph() -> tuple[dict[Path, list[Path]], list[str]]:
    """Each module's imports (as resolved paths), and a line per import that names no existing file."""
    modules = sorted(p.resolve() for p in JS.rglob("*.js"))
    graph, broken = {}, []
    for module in modules:
        graph[module] = []
        for spec in _specifiers(module.read_text(encoding="utf-8")):
            targets = [t for t in _resolve(module, spec, modules) if t.is_file()]
            if not targets:
                broken.append(f"{_name(module)} imports {spec!r}, which is no file")
            graph[module] += targets
    return graph, broken


def _name(path: Path) -> str:
    return path.relative_to(JS.resolve()).as_posix()


def find_cycles(graph: dict[Path, list[Path]]) -> list[list[Path]]:
    """One circle per back edge met in a depth-first walk: any tangle of modules shows at least one."""
    cycles, done, path, on_path = [], set(), [], {}

    def walk(node):
        on_path[node] = len(path)
        path.append(node)
        for nxt in graph.get(node, ()):
            if nxt in on_path:
                cycles.append(path[on_path[nxt]:] + [nxt])
            elif nxt not in done:
                walk(nxt)
        path.pop()
        del on_path[node]
        done.add(node)

    for node in graph:
        if node not in done:
            walk(node)
    return cycles


def test_the_graph_is_read():
    """Guards the patterns: known imports of each kind are found, or a silent miss would pass everything."""
    graph, _ = import_graph()
    edges = {(_name(a), _name(b)) for a, targets in graph.items() for b in targets}
    assert ("replay.js", "client.js") in edges  # import { … } from
    assert ("export-bar.js", "lib/export.js") in edges  # import("…")
    assert ("article/diagrams.js", "elements/he-tokens.js") in edges  # import(`…${name}.js`)


def test_every_relative_import_names_a_file():
    _, broken = import_graph()
    assert not broken, "\n".join(broken)


def test_no_module_imports_itself_through_others():
    graph, _ = import_graph()
    cycles = [" → ".join(_name(p) for p in cycle) for cycle in find_cycles(graph)]
    assert not cycles, "import circles in static/js:\n" + "\n".join(cycles)
