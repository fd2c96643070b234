"""Runs every fenced code block of the READMEs as a user pastes it (scripts/snippets-test.sh).

Each README is one session, its blocks in the order they appear: a fresh $HOME, a fresh venv of
the python3 on PATH first on PATH (the "CPython with pip" the READMEs ask for), and the clone as
the working directory, to which each heading of the README returns (a section starts from the
clone, as its reader does). How each block runs:

  sh, bash     in the session's shell: the working directory and the variables a block sets
               (`prefix=...`, `cd ...`) carry over to the next block; `set -e -o pipefail`.
  python       saved to a file and run with the session's python, from its working directory.
  pycon, or a  a transcript: run by doctest (ELLIPSIS, NORMALIZE_WHITESPACE), outputs compared.
  text block
  of `>>> `
  rust         every Rust block of every README is a binary of one fresh cargo project (its
               dependencies: the README's ```toml block before it, `git = ...` turned into a path
               to the clone; a `# #[cfg(feature = "X")]` line turns on dlport-core's feature X and
               adds the crate X at core's version), built once, each binary run.
  toml         the dependencies of the Rust blocks after it in the same README (parsed).
  text         compared with output: a text block whose first line is `$ COMMAND` runs COMMAND in
               the session and compares what it prints with the lines after it; a text block
               after `<!-- snippet: output -->` is compared with what the runnable block before
               it printed (stdout: its last lines, after what the build steps before the command
               printed). `...` matches anything (also across lines);
               `<!-- snippet: vary REGEX -->` lines replace REGEX's matches on both sides first.
  any block    after `<!-- file: PATH -->` is saved as PATH (relative to the session's working
               directory, `~/` to its $HOME), for the blocks after it to build or run; in a
               saved Cargo.toml, `git = "https://github.com/dlport/dlport"` becomes a path to
               the clone (the machines that run the tests cannot reach GitHub).

`<!-- snippet: skip (why) -->` before a block prints it SKIPPED with the reason. A block that is
none of the above (a ```c block without a file marker, a text block that is not an output) fails,
saying to mark it. One line per block: `FILE:LINE LANG passed|failed|SKIPPED (why) [seconds]`, then
`snippets: N passed, N failed, N skipped`; a failure shows the end of what the block printed.

Usage: snippets.py --clone DIR --state DIR --homes DIR [README ...]   (default: every README)
  --homes: where the sessions' $HOMEs go: outside the repository, so that a cargo project made
  there is not taken for a member of dlport's workspace.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib

READMES = [
    "README.md",
    "core/README.md",
    "native/README.md",
    "capi/README.md",
    "plugins/opencl/README.md",
    "python/README.md",
    "python/pyo3/README.md",
    "wasm/README.md",
]
# Where the crates of a git dependency are in the clone.
CRATES = {
    "dlport-core": "core",
    "dlport-native": "native",
    "dlport-wasm": "wasm",
    "dlport-pyo3": "python/pyo3",
}
TIMEOUT = 3600  # seconds a block may run (a cold wasm or wheel build is the longest)
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(file|snippet):\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, path, line, lang, code, markers, section):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.section = section  # the line of the heading it is under
        self.file = None  # <!-- file: PATH -->
        self.skip = None  # <!-- snippet: skip (why) -->
        self.output = False  # <!-- snippet: output -->
        self.vary = []  # <!-- snippet: vary REGEX -->
        for kind, arg in markers:
            if kind == "file":
                self.file = arg
            elif arg.startswith("skip"):
                self.skip = arg[4:].strip().strip("()") or "no reason given"
            elif arg == "output":
                self.output = True
            elif arg.startswith("vary "):
                self.vary.append(arg[5:])
            else:
                raise SystemExit(f"{path}:{line}: unknown marker <!-- snippet: {arg} -->")

    def where(self):
        return f"{self.path}:{self.line}"


def parse(root, path):
    """The fenced blocks of a Markdown file, with the marker comments right before each."""
    lines = open(os.path.join(root, path), encoding="utf-8").read().split("\n")
    blocks, markers, i, section = [], [], 0, 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        f = FENCE.match(lines[i])
        if m:
            markers.append(m.groups())
        elif f:
            start, j = i, i + 1
            while j < len(lines) and lines[j] != "```":
                j += 1
            if j == len(lines):
                raise SystemExit(f"{path}:{start + 1}: a fence that is never closed")
            code = "\n".join(lines[i + 1 : j]) + "\n"
            blocks.append(Block(path, start + 1, f.group(1) or "text", code, markers, section))
            markers, i = [], j
        elif lines[i].strip() and not lines[i].startswith("<!--"):
            markers = []
            if lines[i].startswith("#"):
                section = i + 1
        i += 1
    return blocks


def matches(expected, actual, vary):
    """Whether `actual` is what `expected` shows (`...` a wildcard, `vary` regexes masked)."""

    def norm(text):
        for rx in vary:
            text = re.sub(rx, "<VARY>", text)
        return "\n".join(l.rstrip() for l in text.strip("\n").split("\n"))

    pattern = ".*?".join(re.escape(part) for part in norm(expected).split("..."))
    # The last lines: what a block's build steps print before the command shown is not shown.
    return re.fullmatch(r"(?:.*\n)?" + pattern, norm(actual), re.S) is not None


class Session:
    """One README's shell: a fresh $HOME and venv, the clone as its first working directory."""

    def __init__(self, homes, clone, name):
        self.home = os.path.join(homes, name)
        shutil.rmtree(self.home, ignore_errors=True)
        os.makedirs(self.home)
        self.tmp = os.path.join(self.home, ".snippets")
        os.makedirs(self.tmp)
        venv = os.path.join(self.home, ".venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        env = dict(os.environ, HOME=self.home, VIRTUAL_ENV=venv, PYTHONUNBUFFERED="1")
        env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env["PATH"]
        self.envfile = os.path.join(self.tmp, "env")
        self.cwdfile = os.path.join(self.tmp, "cwd")
        with open(self.envfile, "w") as f:
            for k, v in env.items():
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
                    f.write(f"export {k}={shquote(v)}\n")
        with open(self.cwdfile, "w") as f:
            f.write(clone)
        self.n = 0

    def cd(self, path):
        with open(self.cwdfile, "w") as f:
            f.write(path)

    def cwd(self):
        return open(self.cwdfile).read().strip()

    def path(self, name):
        if name.startswith("~/"):
            return os.path.join(self.home, name[2:])
        return os.path.join(self.cwd(), name)

    def run(self, script):
        """Runs bash code in the session; (ok, stdout, stdout and stderr)."""
        self.n += 1
        body = os.path.join(self.tmp, f"block{self.n}.sh")
        with open(body, "w") as f:
            f.write(script)
        wrapper = f"""
set -a
. {shquote(self.envfile)}
set +a
cd "$(cat {shquote(self.cwdfile)})"
save() {{
  export -p | grep -vE '^declare -x (PWD|OLDPWD|SHLVL|_)=' > {shquote(self.envfile)}
  pwd > {shquote(self.cwdfile)}
}}
trap save EXIT
set -a -e -o pipefail
. {shquote(body)}
"""
        out_path, err_path = body + ".out", body + ".log"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            try:
                p = subprocess.run(["bash", "-c", wrapper], stdout=out, stderr=err, timeout=TIMEOUT,
                                   stdin=subprocess.DEVNULL)
                ok = p.returncode == 0
            except subprocess.TimeoutExpired:
                ok = False
                err.write(f"\n(timed out after {TIMEOUT} s)\n")
        stdout = open(out_path, errors="replace").read()
        return ok, stdout, stdout + open(err_path, errors="replace").read()


# A block that builds the Python package from source as a user does: `pip install` of ./python.
PIP_FROM_SOURCE = re.compile(r"\bpip install\b[^\n]*\./python\b")


def build_times(block, log, took):
    """Prints the build times a block shows, one `[build-time] ...` line each, so that a log (a
    cold run's) yields them: the lines the scripts it ran printed (scripts/install-c.sh), and for
    a `pip install` of ./python, which prints none, the block's own time (pip builds the wheel
    from source first, then installs it and the extras the block names)."""
    for line in log.splitlines():
        if line.startswith("[build-time] "):
            print(f"{line} ({block.where()})", flush=True)
    if PIP_FROM_SOURCE.search(block.code):
        load = " ".join(open("/proc/loadavg").read().split()[:3])
        print(f"[build-time] wheel: {took:.0f} s (pip install ./python at {block.where()}, the "
              f"wheel built from source, then it and the block's extras installed; load {load})",
              flush=True)


def shquote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def tail(text, n=40):
    lines = text.rstrip("\n").split("\n")
    return "\n".join("      | " + l for l in lines[-n:])


class Runner:
    def __init__(self, clone, state, homes):
        self.clone, self.state, self.homes = clone, state, homes
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}
        self.rust = []  # (block, dependencies) of every README, built together at the end
        self.t0 = time.monotonic()  # when the block being run started

    def report(self, block, status, why="", log=""):
        key = "skipped" if status == "SKIPPED" else status
        self.counts[key] += 1
        lang = block.lang + (f" -> {block.file}" if block.file else "")
        took = time.monotonic() - self.t0
        took = f" [{took:.0f} s]" if took >= 1 else ""
        print(f"{block.where()} {lang} {status}{f' ({why})' if why else ''}{took}", flush=True)
        self.t0 = time.monotonic()
        if status == "failed" and log:
            print(tail(log), flush=True)

    def readme(self, path):
        blocks = parse(self.clone, path)
        if not blocks:
            return
        session = Session(self.homes, self.clone, path.replace("/", "_").replace(".", "_"))
        deps, last_out, section = {}, None, 0
        self.t0 = time.monotonic()
        for b in blocks:
            if b.section != section:
                section = b.section
                session.cd(self.clone)
            if b.skip:
                self.report(b, "SKIPPED", b.skip)
                continue
            if b.file:
                dest = session.path(b.file)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                code = b.code
                if os.path.basename(dest) == "Cargo.toml":
                    code = re.sub(r'^([\w-]+)(\s*=\s*\{\s*)git\s*=\s*"https://github.com/dlport/dlport"',
                                  lambda m: f'{m[1]}{m[2]}path = "{os.path.join(self.clone, CRATES[m[1]])}"',
                                  code, flags=re.M)
                with open(dest, "w", encoding="utf-8") as f:
                    f.write(code)
                self.report(b, "passed", f"saved as {dest.replace(session.home, '~')}")
                continue
            if b.lang in ("sh", "bash", "shell", "console"):
                ok, last_out, log = session.run(b.code)
                took = time.monotonic() - self.t0
                self.report(b, "passed" if ok else "failed", log=log)
                build_times(b, log, took)
            elif b.lang == "python":
                script = os.path.join(session.tmp, f"block_{b.line}.py")
                with open(script, "w") as f:
                    f.write(b.code)
                ok, last_out, log = session.run(f"python {shquote(script)}\n")
                self.report(b, "passed" if ok else "failed", log=log)
            elif b.lang == "pycon" or (b.lang == "text" and b.code.startswith(">>> ")):
                doc = os.path.join(session.tmp, f"block_{b.line}.txt")
                with open(doc, "w") as f:
                    f.write(b.code)
                ok, _, log = session.run(
                    f"python -m doctest -o ELLIPSIS -o NORMALIZE_WHITESPACE {shquote(doc)}\n")
                self.report(b, "passed" if ok else "failed", "doctest", log)
            elif b.lang == "text" and b.code.startswith("$ "):
                command, _, expected = b.code[2:].partition("\n")
                ok, out, log = session.run(command + "\n")
                if ok and matches(expected, out, b.vary):
                    self.report(b, "passed", f"`{command}` printed what it shows")
                else:
                    self.report(b, "failed", f"`{command}` printed something else", log)
            elif b.lang == "text" and b.output:
                if last_out is None:
                    self.report(b, "failed", "an output marker with no block before it")
                elif matches(b.code, last_out, b.vary):
                    self.report(b, "passed", "the block before it printed this")
                else:
                    self.report(b, "failed", "the block before it printed something else", last_out)
            elif b.lang == "toml":
                try:
                    deps = tomllib.loads(b.code).get("dependencies", {})
                    self.report(b, "passed", "dependencies of the Rust blocks after it")
                except tomllib.TOMLDecodeError as e:
                    self.report(b, "failed", f"not TOML: {e}")
            elif b.lang == "rust":
                self.rust.append((b, dict(deps)))
            else:
                self.report(b, "failed", "not runnable as it stands: add <!-- file: PATH --> or "
                            "<!-- snippet: skip (why) --> before it")

    def rust_blocks(self):
        """Every Rust block a binary of one cargo project; built once, each one run."""
        if not self.rust:
            return
        core_deps = tomllib.load(open(os.path.join(self.clone, "core/Cargo.toml"), "rb"))["dependencies"]
        deps, features, bins = {}, set(), []
        for b, readme_deps in self.rust:
            used = {name for name in CRATES if name.replace("-", "_") in b.code}
            for name, spec in readme_deps.items():
                if name in CRATES and name in used:
                    spec = dict(spec) if isinstance(spec, dict) else {"version": spec}
                    spec.pop("git", None), spec.pop("branch", None), spec.pop("rev", None)
                    spec["path"] = os.path.join(self.clone, CRATES[name])
                    old = deps.get(name, {})
                    spec["features"] = sorted(set(old.get("features", [])) | set(spec.get("features", [])))
                    deps[name] = spec
            code = []
            for line in b.code.split("\n"):
                m = re.match(r"\s*# #\[cfg\((not\()?feature = \"(\w+)\"\)+\]", line)
                if m and not m.group(1):
                    features.add(m.group(2))
                code.append(line[2:] if line.startswith("# ") else ("" if line == "#" else line))
            code = "\n".join(code)
            if not re.search(r"\bfn main\b", code):
                code = "fn main() {\n" + code + "\n}\n"
            name = re.sub(r"\W", "_", b.path.lower()) + f"_{b.line}"
            bins.append((b, name, code))
        if not any(CRATES[n] == "core" for n in deps):
            deps["dlport-core"] = {"path": os.path.join(self.clone, "core")}
        for f in features:
            spec = core_deps[f]
            spec = dict(spec) if isinstance(spec, dict) else {"version": spec}
            spec.pop("optional", None)
            deps[f] = spec
            core = deps["dlport-core"]
            core["features"] = sorted(set(core.get("features", [])) | {f})
        project = os.path.join(self.state, "rust-snippets")
        shutil.rmtree(project, ignore_errors=True)
        os.makedirs(os.path.join(project, "src/bin"))
        manifest = ['[package]\nname = "readme-snippets"\nversion = "0.0.0"\nedition = "2024"\n'
                    'publish = false\n\n[workspace]\n\n[features]']
        manifest.append("default = [" + ", ".join(f'"{f}"' for f in sorted(features)) + "]")
        manifest += [f"{f} = []" for f in sorted(features)]
        manifest.append("\n[dependencies]")
        for name, spec in sorted(deps.items()):
            items = ", ".join(f"{k} = {toml_value(v)}" for k, v in spec.items())
            manifest.append(f"{name} = {{ {items} }}")
        with open(os.path.join(project, "Cargo.toml"), "w") as f:
            f.write("\n".join(manifest) + "\n")
        # The workspace's lock file pins the same versions the tests use.
        shutil.copy(os.path.join(self.clone, "Cargo.lock"), project)
        for _, name, code in bins:
            with open(os.path.join(project, "src/bin", name + ".rs"), "w") as f:
                f.write(code)
        for b, name, _ in bins:
            self.t0 = time.monotonic()
            p = subprocess.run(["cargo", "run", "-q", "--bin", name], cwd=project, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
            self.report(b, "passed" if p.returncode == 0 else "failed",
                        "a binary of a fresh cargo project, path dependencies", p.stdout)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clone", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--homes", required=True)
    ap.add_argument("readmes", nargs="*")
    args = ap.parse_args()
    runner = Runner(args.clone, args.state, args.homes)
    for path in args.readmes or READMES:
        if os.path.exists(os.path.join(args.clone, path)):
            runner.readme(path)
    runner.rust_blocks()
    c = runner.counts
    print(f"snippets: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped", flush=True)
    sys.exit(1 if c["failed"] else 0)


if __name__ == "__main__":
    main()
