"""The rooms tables of DESIGN.md, read by scripts/module-graph-check.py.

A crate's section of DESIGN.md (the `## ` heading that names its source folder in backticks,
`` (`core/src`, … ``) may hold a rooms table: a Markdown table whose header starts with `Room`
and ends with `Uses`. Where it does, the table is checked against the module graph:

- The Room cell names the room's files, in backticks, relative to the source folder: a file
  (`a/b.rs`, `a/mod.rs`, `lib.rs`) is that one module; a folder (`a/`) is every module under it
  that no row names more closely. A bare file after a path is its sibling (`plugin/import.rs`,
  `export.rs` is `plugin/export.rs`). Anything else in the cell is prose. A path must exist,
  under the source folder or (a build script) beside it.
- Each module belongs to the row whose path holds it most closely; a module no row holds fails.
- The Uses cell is a comma-separated list: a room by its name (the path without `.rs`, `/mod.rs`
  or the trailing `/`, or its last part alone: `plugin/error` or `error`; a name two rows share
  means the one in the user's own folder), `the rooms above` (every earlier row), `—` (none),
  or, in backticks, something outside the crate (`dlport_core`, `cudarc`): no module edge.
- Every edge between two rows must be drawn: the used row named in the user's Uses (or covered
  by `the rooms above`); edges inside one row are free. A named room must be above the user in
  the table (the table is in dependency order, so the rooms have no cycle), and the code must
  make the edge (the table draws no arrow that is not there).
"""

import os
import re

HEADER = re.compile(r"^\|\s*Room\s*\|.*\|\s*Uses\s*\|\s*$")
OUTSIDE = re.compile(r"https?://|\.\./[\w.-]")  # a web address, a path above the repository
NONE = {"", "—", "–", "-"}


def outside_links(design):
    """The lines of `design` that point out of the repository (a web address or a `../` path)."""
    with open(design, encoding="utf-8") as fh:
        return ["%s:%d: %s" % (os.path.relpath(design), n, line.strip())
                for n, line in enumerate(fh, 1) if OUTSIDE.search(line)]


class Row:
    def __init__(self, index, where, paths, uses):
        self.index, self.where, self.paths, self.uses = index, where, paths, uses
        self.names = set()
        for p in paths:
            norm = re.sub(r"(/mod\.rs|\.rs|/)$", "", p)
            parts = norm.split("/")
            self.names.update("/".join(parts[k:]) for k in range(len(parts)))
        self.dirs = {os.path.dirname(re.sub(r"(/mod\.rs|\.rs|/)$", "", p)) for p in self.paths}

    def __str__(self):
        return "row `%s` (%s)" % ("`, `".join(self.paths), self.where)


def read_table(design, src):
    """The rows of the rooms table of `src`'s section of `design`, or None where there is none."""
    rel = os.path.relpath(os.path.abspath(src), os.path.dirname(os.path.abspath(design)))
    rel = rel.replace(os.sep, "/")
    with open(design, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    in_section, in_table, rows = False, False, []
    for n, line in enumerate(lines, 1):
        if line.startswith("## "):
            if rows:
                break
            in_section = "`%s`" % rel in line
        elif in_section and HEADER.match(line):
            in_table = True
        elif in_table and line.startswith("|") and not re.match(r"^\|[-|\s]*\|$", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            paths, folder = [], ""
            for p in re.findall(r"`([^`]+)`", cells[0]):
                if not re.search(r"(\.rs|/)$", p):
                    continue
                if "/" in p.rstrip("/"):
                    folder = p.rstrip("/").rsplit("/", 1)[0] + "/"
                elif p.endswith(".rs"):
                    p = folder + p
                paths.append(p)
            rows.append(Row(len(rows), "%s:%d" % (os.path.relpath(design), n), paths, cells[-1]))
        elif in_table and rows:
            break
    return rows or None


def room_of(rows, relfile, path):
    """The row holding the module of file `relfile` and module path `path` (a tuple)."""
    best, best_len = None, -1
    for row in rows:
        for p in row.paths:
            if p.endswith("/"):
                parts = tuple(p.rstrip("/").split("/"))
                closeness = len(parts) if path[: len(parts)] == parts else -1
            else:
                closeness = 1000 if p == relfile else -1
            if closeness > best_len:
                best, best_len = row, closeness
    return best


def uses_of(rows, row, errors):
    """{used row: named (True) or covered by `the rooms above` (False)} of one row."""
    out = {}
    for item in (i.strip() for i in row.uses.split(",")):
        if item in NONE or item.startswith("`"):
            continue
        if item == "the rooms above":
            out.update((r.index, False) for r in rows[: row.index])
            continue
        found = [r for r in rows if item in r.names and r is not row]
        if len(found) > 1:
            found = [r for r in found if r.dirs & row.dirs]
        if len(found) != 1:
            errors.append("%s: Uses names `%s`, which is %s" % (
                row, item, "no room (something outside the crate is written in backticks)"
                if not found else "more than one room (write its path: `dir/%s`)" % item))
        elif found[0].index > row.index:
            errors.append("%s: Uses names `%s`, %s, which is below it (the table is in dependency"
                          " order: move the row)" % (row, item, found[0]))
        else:
            out[found[0].index] = True
    return out


def check(design, src, modules, edges):
    """The ways `src`'s module graph and its rooms table disagree (empty where they agree or
    where its section has no rooms table), and the table's row count (0 for none)."""
    rows = read_table(design, src)
    if rows is None:
        return [], 0
    errors = []
    for row in rows:
        for p in row.paths:
            if not any(os.path.exists(os.path.join(d, p)) for d in (src, os.path.dirname(src.rstrip("/")))):
                errors.append("%s: `%s` names no file under %s" % (row, p, src))
    where = {}
    for path, mod in modules.items():
        relfile = os.path.relpath(mod.file, src).replace(os.sep, "/")
        where[path] = room_of(rows, relfile, path)
        if where[path] is None:
            errors.append("module %s (%s) is in no row of the rooms table (%s): give it a row"
                          % (mod.name, mod.file, os.path.relpath(design)))
    drawn = {row.index: uses_of(rows, row, errors) for row in rows}
    made = set()
    for (a, b), at in sorted(edges.items()):
        ra, rb = where.get(a), where.get(b)
        if ra is None or rb is None or ra is rb:
            continue
        made.add((ra.index, rb.index))
        if rb.index not in drawn[ra.index]:
            errors.append("edge %s -> %s at %s: the rooms table does not draw it: %s uses `%s`,"
                          " not %s" % (modules[a].name, modules[b].name, at, ra, ra.uses, rb))
    for row in rows:
        for used, named in sorted(drawn[row.index].items()):
            if named and (row.index, used) not in made:
                errors.append("%s: Uses names %s, but no module of the row uses one of it"
                              " (remove it)" % (row, rows[used]))
    return errors, len(rows)
