#!/usr/bin/env python3
"""The module graph of a crate has no cycle.

Usage: scripts/module-graph-check.py [--design FILE] [SRC_DIR ...]   (default: core/src)
       scripts/module-graph-check.py --print core/src   (also prints every edge)

A node is a module that has a file of its own (`lib.rs`, `a.rs`, `a/mod.rs`, `a/b.rs`; an
inline `mod x { … }` belongs to its file's node). An edge A -> B means that A's code names an
item that is *defined* in B: every `use` path and every `crate::…`, `super::…`, `self::…` path
(or a path through a module name brought into scope by `use`) is followed through the `use`
re-exports it meets (named and glob) to the module that defines the item, as cargo-modules'
`dependencies --acyclic` resolves them. A facade's `pub use child::X` is a name, not an edge
(paths through it reach the child); everything else counts, so a facade whose own code uses a
child that names an item defined in the facade closes a cycle. The crate root's re-exports do
count: an inner module that names an item defined in lib.rs closes a cycle through it, and so
does a call into a root function (`crate::helper()`) whose body names a child module by its
bare name (`room::f()`): a module's code naming a child by its bare name is an edge too.
`scripts/module-graph-test.sh` plants such a cycle and shows that the check fails on it.

Test modules (`#[cfg(test)] mod …`, inline or in a file of their own) are left out: they may
reach anything. Outside them a glob import of the crate's own items (`use super::*`) is
refused, since it would hide what a module uses; a facade's glob re-export of its own
submodule (`pub use codes::*`) is fine. The check fails (exit 1) naming each cycle and the
line that makes each edge. It also holds the graph against the crate's rooms table in
DESIGN.md (or `--design FILE`) and refuses a line there that points out of the repository:
scripts/module_rooms.py. Only the standard library is used; no build is needed (about a second).
"""

import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_rooms  # noqa: E402  (beside this script)

ITEM = re.compile(
    r"^(?:pub(?:\([^)]*\))?\s+)?(?:(?:unsafe|const|async|extern\s+\"[^\"]*\")\s+)*"
    r"(struct|enum|trait|fn|type|const|static|union|mod)\s+([A-Za-z_]\w*)",
    re.M,
)
MACRO = re.compile(r"^\s*macro_rules!\s*([A-Za-z_]\w*)", re.M)
USE = re.compile(r"(?:^|[;{}\s])(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);", re.S)
# `#[cfg(test)]` or `#[cfg(all(test, …))]`, other attributes, then `mod name`.
TEST_MOD = r"#\[cfg\((?:test|all\(\s*test\b[^\]]*\))\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*"
PATH = re.compile(r"\b((?:crate|super|self)(?:\s*::\s*[A-Za-z_]\w*)+)")


def strip(text):
    """The code without comments, string and char literals (their places kept as spaces)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r(#*)"', text[i:i + 10]) and not (
            i and (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^'\\])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^'\\])'", text[i:i + 4])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code):
    """`code` without its inline `#[cfg(test)] mod name { … }` blocks (lines kept)."""
    while True:
        m = re.search(TEST_MOD + r"\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + "\n" * code.count("\n", m.start(), j) + code[j:]


def test_module_files(code):
    return set(re.findall(TEST_MOD + r";", code))


def use_paths(tree):
    """The paths of a `use` tree: [(segments, binding)], the binding `*` for a glob."""
    out = []

    def split_top(t):
        parts, depth, cur = [], 0, ""
        for ch in t:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        parts.append(cur)
        return [p.strip() for p in parts if p.strip()]

    def walk(prefix, t):
        t = t.strip()
        brace = t.find("{")
        if brace >= 0:
            head = [s.strip() for s in t[:brace].split("::") if s.strip()]
            for part in split_top(t[brace + 1 : t.rindex("}")]):
                walk(prefix + head, part)
            return
        m = re.match(r"^(.*?)\s+as\s+([A-Za-z_]\w*)$", t)
        body, alias = (m.group(1), m.group(2)) if m else (t, None)
        segs = prefix + [s.strip() for s in body.split("::") if s.strip()]
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        if segs:
            out.append((segs, alias or segs[-1]))

    walk([], re.sub(r"\s+", " ", tree))
    return out


def inline_relative(segs, depth):
    """A path written inside `depth` inline modules, made relative to the file's module: each
    leading `super` climbs out of one inline module first."""
    while depth and segs and segs[0] == "super":
        segs = ["self"] + segs[1:] if len(segs) == 1 else segs[1:]
        depth -= 1
        if segs[0] != "super":
            segs = ["self"] + segs
            break
    return segs


class Module:
    def __init__(self, path, file):
        self.path = path  # tuple of names; () is the crate root
        self.file = file
        self.children = {}
        self.inline = set()
        self.defs = set()
        self.uses = []  # (segments, binding, line)
        self.reexports = set()  # the lines of its `pub use` / `pub(crate) use` declarations
        self.code = ""
        self.inline_spans = []  # (start, end) of each inline `mod x { … }` body

    def inline_depth(self, pos):
        """How many inline modules enclose offset `pos` of the code."""
        return sum(1 for a, b in self.inline_spans if a <= pos < b)

    @property
    def name(self):
        return "crate" + "".join("::" + p for p in self.path)


def load(src):
    modules = {}
    tests = set()
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, src)[:-3].split(os.sep)
            if rel == ["lib"] or rel == ["main"]:
                path = ()
            elif rel[-1] == "mod":
                path = tuple(rel[:-1])
            else:
                path = tuple(rel)
            with open(full, encoding="utf-8") as fh:
                raw = fh.read()
            code = strip(raw)
            for t in test_module_files(code):
                tests.add(path + (t,))
            m = Module(path, full)
            m.code = drop_test_modules(code)
            modules[path] = m
    for t in tests:
        modules.pop(t, None)
    # Test-only files under a test module.
    for p in list(modules):
        if any(p[: len(t)] == t for t in tests):
            modules.pop(p, None)
    for p, m in modules.items():
        if p and p[:-1] in modules:
            modules[p[:-1]].children[p[-1]] = m
    for m in modules.values():
        for kind, name in ITEM.findall(m.code):
            if kind == "mod":
                if name not in m.children:
                    m.inline.add(name)
            else:
                m.defs.add(name)
        m.defs.update(MACRO.findall(m.code))
        for im in re.finditer(r"\bmod\s+\w+\s*\{", m.code):
            depth, j = 1, im.end()
            while j < len(m.code) and depth:
                depth += {"{": 1, "}": -1}.get(m.code[j], 0)
                j += 1
            m.inline_spans.append((im.end(), j))
        for u in USE.finditer(m.code):
            line = m.code.count("\n", 0, u.start(2)) + 1
            for segs, name in use_paths(u.group(2)):
                segs = inline_relative(segs, m.inline_depth(u.start(2)))
                m.uses.append((segs, name, line))
                if u.group(1):
                    m.reexports.add(line)
    return modules


class Resolver:
    def __init__(self, modules):
        self.modules = modules

    def start(self, mod, segs):
        """Where a path's first segment points: (module, remaining segments) or None."""
        first = segs[0]
        if first == "crate":
            return self.modules[()], segs[1:]
        if first == "super":
            return self.modules.get(mod.path[:-1]), segs[1:]
        if first == "self":
            return mod, segs[1:]
        if first in mod.children:
            return mod, segs
        return None

    def resolve(self, mod, segs, seen=None):
        """The module defining what `segs` names from `mod`, or None (outside the crate)."""
        seen = set() if seen is None else seen
        key = (mod.path, tuple(segs))
        if key in seen:
            return None
        seen.add(key)
        s = self.start(mod, segs)
        if s is None:
            # A name bound by a `use` of this module (`layout::validate` after `use crate::layout`).
            for usegs, name, _ in mod.uses:
                if name == segs[0] and usegs != segs[:1]:
                    return self.resolve(mod, usegs + segs[1:], seen)
            return None
        cur, rest = s
        if cur is None:
            return None
        while rest:
            seg = rest[0]
            if seg == "super":
                cur = self.modules.get(cur.path[:-1])
                if cur is None:
                    return None
                rest = rest[1:]
                continue
            if seg == "self":
                rest = rest[1:]
                continue
            if seg in cur.children:
                cur = cur.children[seg]
                rest = rest[1:]
                continue
            if seg in cur.inline:
                rest = rest[1:]
                continue
            if seg == "*":
                return cur
            if seg in cur.defs:
                return cur
            bound = False
            for usegs, name, _ in cur.uses:
                if name == seg:
                    bound = True
                    found = self.resolve(cur, usegs, seen)
                    if found is not None:
                        return found
            if bound:
                # A name `use`d from outside the crate (`use dlport_pyo3::adapter` in lib.rs):
                # a path through it leaves the crate.
                return None
            for usegs, name, _ in cur.uses:
                if name == "*":
                    target = self.resolve_module(cur, usegs[:-1])
                    if target is not None and target is not cur:
                        found = self.resolve(target, ["self", seg], seen)
                        if found is not None:
                            return found
            return cur
        return cur

    def resolve_module(self, mod, segs):
        s = self.start(mod, segs) if segs else (mod, [])
        if s is None or s[0] is None:
            return None
        cur, rest = s
        for seg in rest:
            if seg == "super":
                cur = self.modules.get(cur.path[:-1])
            elif seg == "self":
                continue
            else:
                cur = cur.children.get(seg)
            if cur is None:
                return None
        return cur


def edges_of(modules, globs):
    r = Resolver(modules)
    edges = {}  # (from, to) -> "file:line"

    def add(mod, target, line):
        if target is None or target is mod:
            return
        edges.setdefault((mod.path, target.path), "%s:%d" % (mod.file, line))

    for mod in modules.values():
        aliases = {}
        for segs, name, line in mod.uses:
            if name == "*":
                # A facade's `pub use child::*` re-exports (followed by `resolve`); a plain
                # glob import would hide what the module uses, so it is refused outside tests.
                inside = r.start(mod, segs) is not None
                if inside and line not in mod.reexports:
                    globs.append("%s:%d: `use %s` (name the items used)" % (mod.file, line, "::".join(segs)))
                continue
            target_mod = r.resolve_module(mod, segs)
            if target_mod is not None:
                aliases[name] = target_mod
                continue
            target = r.resolve(mod, segs)
            # A facade's re-export of its own submodules' items is a name, not a use: the
            # paths that go through it are resolved to the defining submodule. Everything else
            # counts, the facade's own code using a submodule and a submodule using the facade.
            if line in mod.reexports and target is not None and mod.path and (
                target.path[: len(mod.path)] == mod.path
            ):
                continue
            add(mod, target, line)
        for m in PATH.finditer(mod.code):
            # `pub(in crate::a)` names the module an item is visible to; it uses nothing there.
            if re.search(r"\bpub\s*\(\s*in\s*$", mod.code[max(0, m.start() - 16) : m.start()]):
                continue
            # `use crate::a::{X, b::Y}`: the group's prefix; its members are the edges (above).
            if re.match(r"\s*::\s*\{", mod.code[m.end() : m.end() + 8]):
                continue
            segs = inline_relative([s.strip() for s in m.group(1).split("::")], mod.inline_depth(m.start()))
            line = mod.code.count("\n", 0, m.start()) + 1
            add(mod, r.resolve(mod, segs), line)
        # A module's own code naming a child module by its bare name (`room::f()` in lib.rs,
        # no `use`, no `crate::`): an edge to what the path names. `use` statements are left
        # out here (handled above, facades' re-exports included).
        bare = USE.sub(lambda u: "\n" * u.group(0).count("\n"), mod.code)
        for cname in mod.children:
            if cname in aliases or any(name == cname for _, name, _ in mod.uses):
                continue
            for m in re.finditer(r"(?<![\w:])" + re.escape(cname) + r"((?:\s*::\s*[A-Za-z_]\w*)+)", bare):
                segs = [s.strip() for s in m.group(1).split("::") if s.strip()]
                line = bare.count("\n", 0, m.start()) + 1
                add(mod, r.resolve(mod, ["self", cname] + segs), line)
        for name, target in aliases.items():
            for m in re.finditer(r"(?<![\w:])" + re.escape(name) + r"((?:\s*::\s*[A-Za-z_]\w*)+)", mod.code):
                segs = [s.strip() for s in m.group(1).split("::") if s.strip()]
                line = mod.code.count("\n", 0, m.start()) + 1
                add(mod, r.resolve(target, ["self"] + segs), line)
    return edges


def cycles(nodes, edges):
    graph = {n: sorted({b for (a, b) in edges if a == n}) for n in nodes}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    # One concrete cycle per strongly connected component (a shortest one through its first node).
    result = []
    for comp in out:
        comp_set = set(comp)
        start = min(comp)
        prev = {start: None}
        queue = [start]
        found = None
        while queue and found is None:
            nxt = []
            for v in queue:
                for w in graph[v]:
                    if w == start:
                        found = v
                        break
                    if w in comp_set and w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            queue = nxt
        path = [found]
        while prev[path[-1]] is not None:
            path.append(prev[path[-1]])
        path.reverse()
        result.append((sorted(comp), path + [start]))
    return result


def name(path):
    return "crate" + "".join("::" + p for p in path)


def main(argv):
    show = "--print" in argv
    argv = [a for a in argv if a != "--print"]
    design = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "DESIGN.md")
    if argv[:1] == ["--design"]:
        design, argv = argv[1], argv[2:]
    dirs = argv or ["core/src"]
    failed = False
    for line in module_rooms.outside_links(design):
        failed = True
        print("a link out of the repository: " + line, file=sys.stderr)
    for src in dirs:
        modules = load(src)
        globs = []
        edges = edges_of(modules, globs)
        for g in globs:
            failed = True
            print("glob import outside a test module: " + g, file=sys.stderr)
        if show:
            for (a, b), where in sorted(edges.items()):
                print("  %s -> %s   (%s)" % (name(a), name(b), where))
        found = cycles(list(modules), edges)
        for comp, path in found:
            failed = True
            print("module cycle in %s: %s" % (src, " -> ".join(name(p) for p in path)), file=sys.stderr)
            for a, b in zip(path, path[1:]):
                print("    %s -> %s at %s" % (name(a), name(b), edges[(a, b)]), file=sys.stderr)
            if len(comp) > len(path) - 1:
                print("    (the knot holds %d modules: %s)" % (len(comp), ", ".join(name(p) for p in comp)),
                      file=sys.stderr)
        disagree, rooms = module_rooms.check(design, src, modules, edges)
        for e in disagree:
            failed = True
            print("rooms table of %s: %s" % (src, e), file=sys.stderr)
        print("module-graph check: %s: %d modules, %d edges, %d cycles%s"
              % (src, len(modules), len(edges), len(found),
                 ", rooms table: %d rows, %d disagreements" % (rooms, len(disagree)) if rooms else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
