"""Replaces (or appends) the adapters section of BENCHMARKS.md from criterion's estimates of
`cargo bench -p dlport-bench --bench adapters --features adapters` (one run)."""

import json
import pathlib
import subprocess

import sections  # this directory

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRIT = ROOT / "target" / "criterion"
HEADING = "## Adapters: dlport-core against dlpark 0.10 for the same crate"


def estimates():
    """{(group, function): (median, lower, upper)} in ns, for every criterion benchmark."""
    out = {}
    for d in CRIT.glob("*/*/new/benchmark.json"):
        meta = json.loads(d.read_text())
        est = json.loads((d.parent / "estimates.json").read_text())["median"]
        ci = est["confidence_interval"]
        out[(meta["group_id"], meta["function_id"])] = (
            est["point_estimate"], ci["lower_bound"], ci["upper_bound"])
    return out


def fmt(t):
    v, lo, hi = t
    if v >= 10_000:
        return f"{v / 1000:.1f} µs [{lo / 1000:.1f}, {hi / 1000:.1f}]"
    return f"{v:.1f} ns [{lo:.1f}, {hi:.1f}]"


def section():
    est = estimates()
    groups = sorted({g for g, _ in est if g.split(":")[0] in ("ndarray", "image", "candle")},
                    key=lambda g: (["ndarray", "image", "candle"].index(g.split(":")[0]), g))
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        HEADING,
        "",
        "Command: `cargo bench -p dlport-bench --bench adapters --features adapters` (one run, "
        f"criterion medians and 95% intervals; {rustc}), then "
        "`python3 bench/python/adapters_report.py`. dlport keeps every check it makes elsewhere "
        "(full validation on import, the storage-size and address checks on export). Export: "
        "one fresh container per timed export, made outside the timing → a DLPack tensor → "
        "released (the deleter drops the container). Import: a foreign versioned tensor → "
        "validated → the adapter's view or container → released. Goal: ≤ 1.0 × dlpark. On this "
        "shared 2-core machine a row's median moves by about 10 % from one run to the next (the "
        "CPU's two speeds), so rows whose intervals overlap are ties. Where they differ: the "
        "copies (candle's import: one copy in dlport, two in dlpark) and the checks (dlport's "
        "export builder checks the layout, the storage size and the address range, which is "
        "what puts the ndarray export above dlpark's, 532 against 499 instructions per export, "
        "while dlport allocates once and dlpark twice). dlpark has no row where it refuses the input: negative strides "
        "(ndarray import), `ArcArray`s (ndarray export) and strided images (image import, a copy "
        "in dlport) are dlport's alone and not timed against it.",
        "",
        "| what | dlport | dlpark 0.10 | ratio | goal |",
        "|---|---|---|---|---|",
    ]
    for g in groups:
        fns = {f: t for (gg, f), t in est.items() if gg == g}
        ours = next((t for f, t in fns.items() if f.startswith("dlport")), None)
        peer = next((t for f, t in fns.items() if f.startswith("dlpark")), None)
        if ours is None or peer is None:
            continue
        ratio = ours[0] / peer[0]
        mark = "✅" if ratio <= 1.0 else "❌"
        lines.append(f"| {g} | {fmt(ours)} | {fmt(peer)} | {ratio:.2f} × | ≤ 1.0 {mark} |")
    return "\n".join(lines) + "\n"


def main():
    sections.replace(HEADING, section())
    print("wrote the adapters section of BENCHMARKS.md")


if __name__ == "__main__":
    main()
