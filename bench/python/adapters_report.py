"""Replaces (or appends) the adapters section of BENCHMARKS.md from one run of
`cargo bench -p dlport-bench --bench adapters --features adapters`: criterion's estimates of
each side's time, and the bench's paired ratios (`target/criterion/adapters-paired.json`)."""

import json
import pathlib
import re
import shutil
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


def paired():
    """{group: row} of the bench's paired timing."""
    path = CRIT / "adapters-paired.json"
    return {r["group"]: r for r in json.loads(path.read_text())}


PROFILE = ROOT / "target" / "release" / "profile_adapters"


def callgrind_total(n, what):
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(PROFILE),
           str(n), what]
    err = subprocess.run(cmd, capture_output=True, text=True).stderr
    return int(re.search(r"refs:\s+([\d,]+)", err).group(1).replace(",", ""))


def per_op(what):
    return (callgrind_total(20_000, what) - callgrind_total(10_000, what)) / 10_000


def instructions():
    """{crate: (dlport, dlpark)} instructions per export, the container's own cost taken out;
    empty without valgrind or the profile driver."""
    if not (shutil.which("valgrind") and PROFILE.exists()):
        return {}
    out = {}
    for crate in ("ndarray", "image", "candle"):
        none = per_op(f"{crate}-none")
        out[crate] = (per_op(f"{crate}-dlport") - none, per_op(f"{crate}-dlpark") - none)
    return out


def fmt(t):
    v, lo, hi = t
    if v >= 10_000:
        return f"{v / 1000:.1f} µs [{lo / 1000:.1f}, {hi / 1000:.1f}]"
    return f"{v:.1f} ns [{lo:.1f}, {hi:.1f}]"


def section():
    est = estimates()
    pairs = paired()
    groups = sorted({g for g, _ in est if g.split(":")[0] in ("ndarray", "image", "candle")},
                    key=lambda g: (["ndarray", "image", "candle"].index(g.split(":")[0]), g))
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    some = next(iter(pairs.values()))
    lines = [
        HEADING,
        "",
        "Command: `cargo bench -p dlport-bench --bench adapters --features adapters` (one run; "
        f"{rustc}), then `cargo build --release -p dlport-bench --features adapters --bin "
        "profile_adapters` and `python3 bench/python/adapters_report.py`. dlport keeps every check it "
        "makes elsewhere (full validation on import, the storage-size and address checks on "
        "export). Export: one fresh container per timed export, made outside the timing → a "
        "DLPack tensor → released (the deleter drops the container). Import: a foreign "
        "versioned tensor → validated → the adapter's view or container → released. Goal: "
        "≤ 1.0 × dlpark.",
        "",
        "Each row is timed twice in the run. The times are criterion's (medians and 95% "
        "intervals), each side measured on its own. The ratio is the paired one: the bench "
        f"starts {some['processes']} processes of its own for each row; each alternates the two "
        f"sides in rounds of {some['ops_per_round']} operations (the order reversing every round, "
        "up to 1,000 rounds or 1 s) and takes the median over rounds of dlport's time against "
        "dlpark's in the same round; the row's ratio is the median over the processes, with "
        "their lowest and highest. Two effects make a ratio of criterion's medians move between "
        "runs on this shared machine, and the paired timing removes both. The CPU changes speed "
        "between criterion's measurements of the two sides (about 10 % on a row's ratio), while "
        "within a round both sides run at the same speed. And a row's times move from process "
        "to process of the same binary (by up to 1.6 ×, where the heap and the stack lie), "
        "while its ratio moves much less: the processes' lowest and highest are in the table.",
        "",
        "Where they differ: the copies (candle's import: one copy in dlport, two in dlpark), and "
        "the allocations (an export is one allocation in dlport, two in dlpark). dlpark has no "
        "row where it refuses the input: negative strides (ndarray import), `ArcArray`s (ndarray "
        "export) and strided images (image import, a copy in dlport) are dlport's alone and not "
        "timed against it.",
        "",
        "The image export is the row that had been over the goal (1.07 × [1.05, 1.16] at "
        "845b62c, although dlport ran 0.71 × dlpark's instructions). Its constructor, "
        "`ExportBuilder::from_image`, was the one adapter constructor without `#[inline]`, and "
        "in the bench it was not inlined: it returned the builder (over 200 bytes: two inline "
        "dimension lists) through memory, and the caller copied it at once with 16-byte loads of "
        "what the callee had just stored in 8-byte stores. A load that spans several recent "
        "stores cannot take its value from them and waits for them to reach the cache: a "
        "store-forwarding stall, inferred from the code and from the fix (this virtual machine "
        "offers no performance counters to count it). With `#[inline]` (c4478a4) the copy is "
        "gone, and the row is below.",
        "",
        "| what | dlport | dlpark 0.10 | ratio (paired) [lowest, highest process] | goal |",
        "|---|---|---|---|---|",
    ]
    for g in groups:
        fns = {f: t for (gg, f), t in est.items() if gg == g}
        ours = next((t for f, t in fns.items() if f.startswith("dlport")), None)
        peer = next((t for f, t in fns.items() if f.startswith("dlpark")), None)
        pair = pairs.get(g)
        if ours is None or peer is None or pair is None:
            continue
        ratio = pair["ratio"]
        mark = "✅" if ratio <= 1.0 else "❌"
        lines.append(f"| {g} | {fmt(ours)} | {fmt(peer)} | {ratio:.2f} × "
                     f"[{pair['ratio_min']:.2f}, {pair['ratio_max']:.2f}] | ≤ 1.0 {mark} |")
    counts = instructions()
    if counts:
        lines += [
            "",
            "Instructions per export, counted by callgrind in `profile_adapters` (a 4×4 "
            "`Array2<f32>`, a 64×64 `Rgb<u8>` image, a clone of a 64×64 f32 candle tensor; each "
            "export released, malloc and free included, the container's own making and dropping "
            "taken out):",
            "",
            "| export | dlport | dlpark 0.10 | ratio |",
            "|---|---|---|---|",
        ]
        for crate, (ours, peer) in counts.items():
            lines.append(f"| {crate} | {ours:,.0f} | {peer:,.0f} | {ours / peer:.2f} × |")
    return "\n".join(lines) + "\n"


def main():
    sections.replace(HEADING, section())
    print("wrote the adapters section of BENCHMARKS.md")


if __name__ == "__main__":
    main()
