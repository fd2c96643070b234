//! Sharing 256 MiB with another process: dlport's memfd + SCM_RIGHTS share (no copy, and with
//! one copy of a tensor that is not in a memfd) against sending the same bytes over a pipe.
//! Each round is timed from the producer's first call until the consumer's reply: "open" once
//! the consumer holds the tensor, "read" once it has also summed every element (so the page
//! faults of the mapping, and the buffer the pipe fills, are paid). The consumer is this binary
//! again, started once and kept for every round. Writes `target/bench/share.json`; the Python
//! comparison (`bench/python/numpy_shared.py`) runs right after in `scripts/bench.sh`.
//!
//! `cargo run --release -p dlport-bench --bin share [--quick]`

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Instant;

use dlport_core::{CopyPolicy, DataType, ExportBuilder};
use dlport_native::share::{self, ShareOptions, Shared};

const BYTES: usize = 256 << 20;
const N: usize = BYTES / 8;
const ROLE: &str = "DLPORT_BENCH_SHARE_ROLE";

fn line(mut sock: &UnixStream) -> String {
    let (mut s, mut b) = (Vec::new(), [0u8; 1]);
    loop {
        assert_eq!(sock.read(&mut b).unwrap(), 1, "the consumer hung up");
        if b[0] == b'\n' {
            return String::from_utf8(s).unwrap();
        }
        s.push(b[0]);
    }
}

/// The consumer: commands on the socket (stdin), pipe data on fd 3.
fn consumer() {
    let mut sock = UnixStream::from(std::io::stdin().as_fd().try_clone_to_owned().unwrap());
    // SAFETY: fd 3 is the pipe's read end, placed there by the producer before exec and owned
    // by nothing else in this process.
    let mut pipe = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(3) };
    loop {
        let cmd = line(&sock);
        let (how, sum) = cmd.split_once(' ').unwrap_or((&cmd, ""));
        let sum = sum == "sum";
        let total: u64 = match how {
            "dlport" => {
                let t = Shared::recv(&sock).unwrap().open().unwrap();
                if sum {
                    t.as_slice::<u64>()
                        .unwrap()
                        .iter()
                        .fold(0u64, |a, &x| a.wrapping_add(x))
                } else {
                    t.view().numel()
                }
            }
            "pipe" => {
                let mut buf: Vec<u8> = Vec::with_capacity(BYTES);
                (&mut pipe)
                    .take(BYTES as u64)
                    .read_to_end(&mut buf)
                    .unwrap();
                assert_eq!(buf.len(), BYTES);
                if sum {
                    buf.chunks_exact(8)
                        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                        .fold(0u64, |a, x| a.wrapping_add(x))
                } else {
                    buf.len() as u64 / 8
                }
            }
            _ => return,
        };
        writeln!(sock, "{total}").unwrap();
    }
}

fn stats(mut t: Vec<f64>) -> serde_json::Value {
    t.sort_by(f64::total_cmp);
    let q = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
    serde_json::json!({ "median": q(0.5), "p25": q(0.25), "p75": q(0.75) })
}

fn main() {
    if std::env::var(ROLE).is_ok() {
        consumer();
        return;
    }
    let rounds = if std::env::args().any(|a| a == "--quick") {
        3
    } else {
        9
    };
    let (sock, theirs) = UnixStream::pair().unwrap();
    let (pipe_r, mut pipe_w) = std::io::pipe().unwrap();
    let pipe_r: OwnedFd = pipe_r.into();
    let raw_r = std::os::fd::AsRawFd::as_raw_fd(&pipe_r);
    // A 1 MiB pipe buffer (the default is 64 KiB), the largest an unprivileged process gets.
    // SAFETY: F_SETPIPE_SZ only resizes the pipe's buffer.
    unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&pipe_w),
            libc::F_SETPIPE_SZ,
            1 << 20,
        )
    };
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(ROLE, "consumer")
        .stdin(Stdio::from(OwnedFd::from(theirs)));
    // SAFETY: between fork and exec only dup2 runs (async-signal-safe), putting the pipe's
    // read end at fd 3 (without close-on-exec) for the consumer.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw_r, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(pipe_r);
    let want_sum = (0..N as u64).fold(0u64, |a, x| a.wrapping_add(x));

    // The producer's data: 0, 1, 2, … as u64, in a memfd and in a Vec.
    let mut in_memfd = share::alloc(DataType::UINT64, &[N as i64]).unwrap();
    // SAFETY: nobody else has this memory until it is shared below.
    unsafe { in_memfd.assume_exclusive() }.unwrap();
    for (i, x) in in_memfd
        .as_mut_slice::<u64>()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        *x = i as u64;
    }
    let in_vec = ExportBuilder::from_vec((0..N as u64).collect::<Vec<_>>(), &[N as i64])
        .build()
        .unwrap();
    let bytes_of_vec: Vec<u8> = in_vec.view().as_bytes().unwrap().to_vec();

    let never = ShareOptions {
        copy: CopyPolicy::Never,
        ..Default::default()
    };
    let if_needed = ShareOptions::default();
    let mut rows = Vec::new();
    for (name, method) in [
        ("dlport share + open, tensor in a memfd (no copy)", 0),
        (
            "dlport share + open, tensor in a Vec (one copy into a memfd)",
            1,
        ),
        ("pipe: write 256 MiB, read into a new buffer", 2),
    ] {
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..=rounds {
            for (k, sum) in ["", " sum"].into_iter().enumerate() {
                let start = Instant::now();
                match method {
                    0 | 1 => {
                        writeln!(&sock, "dlport{sum}").unwrap();
                        let view = if method == 0 {
                            in_memfd.view()
                        } else {
                            in_vec.view()
                        };
                        let opts = if method == 0 { &never } else { &if_needed };
                        let shared = share::share(&view, opts).unwrap();
                        shared.send(&sock).unwrap();
                    }
                    _ => {
                        writeln!(&sock, "pipe{sum}").unwrap();
                        pipe_w.write_all(&bytes_of_vec).unwrap();
                    }
                }
                let got: u64 = line(&sock).parse().unwrap();
                let elapsed = start.elapsed().as_secs_f64();
                assert_eq!(got, if k == 1 { want_sum } else { N as u64 });
                // Round 0 warms up (first faults, allocator growth) and is not counted.
                if round > 0 {
                    times[k].push(elapsed);
                }
            }
        }
        let [open, read] = times;
        let (open, read) = (stats(open), stats(read));
        println!(
            "{name}: open {:.2} ms, read {:.2} ms (medians of {rounds})",
            open["median"].as_f64().unwrap() * 1e3,
            read["median"].as_f64().unwrap() * 1e3
        );
        rows.push(serde_json::json!({ "name": name, "open_s": open, "read_s": read }));
    }
    writeln!(&sock, "quit").unwrap();
    child.wait().unwrap();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_owned();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let out = serde_json::json!({
        "bytes": BYTES, "rounds": rounds, "rows": rows, "load": load, "cores": cores,
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("share.json"), out.to_string()).unwrap();
    println!("wrote target/bench/share.json");
}
