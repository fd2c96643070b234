"""The "Sharing 256 MiB with another process" section of BENCHMARKS.md, from one run's
target/bench/share.json (bench/src/bin/share.rs) and target/bench/numpy_shared.json
(bench/python/numpy_shared.py). report.py includes it; run alone, it replaces (or appends) just
this section in BENCHMARKS.md:

    .venv/bin/python bench/python/share_section.py
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "target" / "bench"
TITLE = "## Sharing 256 MiB with another process (medians, p25–p75)"


def section(bench=BENCH):
    """The section's lines, or [] when the bench has not run."""
    rs, py = bench / "share.json", bench / "numpy_shared.json"
    if not rs.exists() or not py.exists():
        return []
    r, p = json.loads(rs.read_text()), json.loads(py.read_text())
    size = r["bytes"]
    ms = lambda s: f"{s['median'] * 1e3:.2f} ({s['p25'] * 1e3:.2f}–{s['p75'] * 1e3:.2f})"
    gbs = lambda s: f"{size / s['median'] / 1e9:.1f}"
    out = [TITLE + "\n"]
    out.append(
        "Commands: `cargo run --release -p dlport-bench --bin share`, then "
        "`.venv/bin/python bench/python/numpy_shared.py` (Python "
        f"{p['python']}, NumPy {p['numpy']}), one right after the other. Each of "
        f"{r['rounds']} rounds (after one warm-up) is timed from the producer's first call to the "
        "consumer's reply, the consumer being another process started once: **open** = the "
        "consumer holds a tensor (or NumPy array) over the 256 MiB; **read** = it has also summed "
        "every uint64 element (so the mapping's page faults, or the pipe's buffer, are paid).\n")
    out.append("| how | open, ms | read, ms | read, GB/s |")
    out.append("|---|---|---|---|")
    for row in r["rows"] + p["rows"]:
        out.append(f"| {row['name']} | {ms(row['open_s'])} | {ms(row['read_s'])} | {gbs(row['read_s'])} |")
    out.append("")
    med = lambda row, k: row[k]["median"] * 1e3
    zero, copy, pipe = r["rows"]
    shm, shm_copy = p["rows"]
    out.append(
        f"Opening moves no bytes: dlport's share of a memfd tensor opens in {med(zero, 'open_s'):.2f} ms "
        f"(Python's shared_memory attach + `np.ndarray`: {med(shm, 'open_s'):.2f} ms), while the pipe "
        f"takes {med(pipe, 'open_s'):.0f} ms to deliver the bytes "
        f"({med(pipe, 'open_s') / med(zero, 'open_s'):.0f}×). Reading every byte once adds the "
        f"mapping's page faults: {med(zero, 'read_s'):.0f} ms, against {med(pipe, 'read_s'):.0f} ms "
        f"through the pipe ({med(pipe, 'read_s') / med(zero, 'read_s'):.1f}×) and "
        f"{med(shm, 'read_s'):.0f} ms for NumPy over shared_memory. A tensor that is not in a memfd "
        f"pays one copy into one, as `CopyPolicy` allows: {med(copy, 'open_s'):.0f} ms (a compact "
        "tensor is written with one `pwrite`, with no page fault per page), against "
        f"{med(shm_copy, 'open_s'):.0f} ms for copying a NumPy array into a new shared_memory "
        "block.\n")
    if "load" in r:
        # The bench's own processes (producer and consumer) make a load of about 1; above the
        # machine's core count, other work shared it.
        load, cores = float(r["load"]), r.get("cores")
        busy = isinstance(cores, int) and load > cores
        out.append(
            f"Load average during the run: {r['load']} on {cores or '?'} cores"
            + (" (other builds shared the machine), hence the wide spreads: compare within "
               "this table.\n" if busy else " (the bench's own two processes).\n"))
    return out


def main():
    lines = section()
    if not lines:
        sys.exit("run the share benches first (scripts/bench.sh)")
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    block = "\n".join(lines) + "\n"
    if TITLE in text:
        head, rest = text.split(TITLE, 1)
        nxt = rest.find("\n## ")
        text = head + block + (rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)
    print("wrote the sharing section of BENCHMARKS.md")


if __name__ == "__main__":
    main()
