"""Instructions per import and per export, counted by callgrind (deterministic, unlike the
clock on a shared machine): target/bench/import_export_profile.json, read by report.py.

Usage: python3 bench/python/import_export_profile.py [--no-build]   (needs valgrind; skips without)

Each driver (bench/src/bin/profile_import.rs, profile_export.rs) runs N = 10,000 and then
20,000 iterations under `valgrind --tool=callgrind`; the difference of the two totals divided
by 10,000 is the cost of one iteration, start-up excluded.
"""

import json
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "bench" / "import_export_profile.json"
BIN = ROOT / "target" / "release"
NDIMS = [1, 4, 16, 64]
IMPORTERS = ["dlport", "dlpark", "plain", "floor"]
EXPORTERS = ["dlport", "dlpark", "floor", "legacy", "convert", "foreign", "wrap"]


def total(binary, n, *args):
    """Instructions callgrind counts for one run of `binary n args...`."""
    p = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(BIN / binary), str(n), *map(str, args)],
        capture_output=True, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", p.stderr).group(1))


def per_iteration(binary, *args):
    return (total(binary, 20_000, *args) - total(binary, 10_000, *args)) // 10_000


def main():
    if shutil.which("valgrind") is None:
        print("import_export_profile.py: valgrind not found, no profile (BENCHMARKS.md leaves the table out)")
        return 0
    if "--no-build" not in sys.argv:
        subprocess.run(["cargo", "build", "--profile", "bench", "--locked", "-p", "dlport-bench",
                        "--bin", "profile_import", "--bin", "profile_export"], cwd=ROOT, check=True)
    result = {
        "import": {who: {str(d): per_iteration("profile_import", who, d) for d in NDIMS} for who in IMPORTERS},
        "export": {who: per_iteration("profile_export", who) for who in EXPORTERS},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
