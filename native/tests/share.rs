//! Two real processes share tensors (`dlport_native::share`): this binary runs the tests and,
//! started again by them with `DLPORT_SHARE_ROLE` set, plays the peer, its end of a
//! `socketpair` as its stdin. The harness is our own (no libtest), so a child process runs
//! only its role; the closing line reads "share: N passed, N failed".
//!
//! Shown: the child writes and the parent sees it through its own mapping (the same memfd
//! inode, the same physical pages: no byte is sent); each side's release runs exactly once
//! (mapping counts, a counting storage); a child killed with SIGKILL still lets the memory go
//! (nothing of it is left in the parent once it released its tensor); a producer that is
//! killed leaves its memory to the consumer that holds it.

#[cfg(target_os = "linux")]
mod peer;

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::c_void;
    use std::io::Write;
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use dlport_native::dlport_core::{
        CopyPolicy, DataType, ExportBuilder, ManagedTensor, TensorStorage,
    };
    use dlport_native::share::{self, ShareOptions, Shared, mapping_counts};

    use super::peer::{ROLE, e, line, spawn};

    type Test = fn() -> Result<(), String>;

    pub fn main() {
        if let Ok(role) = std::env::var(ROLE) {
            child(&role);
            return;
        }
        let tests: &[(&str, Test)] = &[
            (
                "child_writes_and_the_parent_sees_the_same_pages",
                same_pages,
            ),
            (
                "foreign_memory_is_copied_only_as_allowed_and_released_once",
                foreign_copy,
            ),
            ("a_child_killed_with_sigkill_lets_the_memory_go", sigkill),
            (
                "a_killed_producer_leaves_its_memory_to_the_consumer",
                producer_killed,
            ),
        ];
        let filter: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        let (mut passed, mut failed) = (0, 0);
        for (name, f) in tests {
            if !filter.is_empty() && !filter.iter().any(|x| name.contains(x.as_str())) {
                continue;
            }
            match f() {
                Ok(()) => {
                    println!("test {name} ... ok");
                    passed += 1;
                }
                Err(e) => {
                    println!("test {name} ... FAILED: {e}");
                    failed += 1;
                }
            }
        }
        println!("share: {passed} passed, {failed} failed");
        if failed != 0 {
            std::process::exit(1);
        }
    }

    // ── helpers ──

    fn ino(fd: &impl AsFd) -> Result<u64, String> {
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
            .map(|m| m.ino())
            .map_err(e)
    }

    /// Whether any mapping of `pid` (or any open fd of this process, for `None`) is the memfd
    /// with inode `ino`.
    fn holds(pid: Option<u32>, ino: u64) -> Result<bool, String> {
        let who = pid.map_or("self".to_owned(), |p| p.to_string());
        let maps = std::fs::read_to_string(format!("/proc/{who}/maps")).map_err(e)?;
        let mapped = maps.lines().any(|l| {
            l.split_whitespace().nth(4) == Some(&ino.to_string()) && l.contains("memfd:dlport")
        });
        let open = pid.is_none()
            && std::fs::read_dir("/proc/self/fd")
                .map_err(e)?
                .filter_map(Result::ok)
                .any(|d| std::fs::metadata(d.path()).is_ok_and(|m| m.ino() == ino));
        Ok(mapped || open)
    }

    fn never() -> ShareOptions {
        ShareOptions {
            copy: CopyPolicy::Never,
            ..Default::default()
        }
    }

    fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
        if cond { Ok(()) } else { Err(what()) }
    }

    // ── the tests ──

    fn same_pages() -> Result<(), String> {
        let before = mapping_counts();
        let n = 1 << 16;
        let mut t = share::alloc(DataType::INT32, &[n]).map_err(e)?;
        // SAFETY: nobody else has the memory yet.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        for (i, x) in t.as_mut_slice::<i32>().map_err(e)?.iter_mut().enumerate() {
            *x = i as i32;
        }
        let shared = share::share(&t.view(), &never()).map_err(e)?;
        let our_ino = ino(&shared.fds()[0])?;
        let (mut child, sock) = spawn("writer")?;
        shared.send(&sock).map_err(e)?;
        drop(shared);
        let opened = line(&sock)?;
        check(
            opened == format!("opened ino={our_ino} sum_ok=true"),
            || format!("child: {opened:?}, expected the inode {our_ino}"),
        )?;
        check(line(&sock)? == "wrote", || "child did not write".into())?;
        // The child wrote through its own mapping; ours shows it: the same pages.
        let v = t.as_slice::<i32>().map_err(e)?;
        let wrong = (0..n as usize).find(|&i| v[i] != 3 * i as i32 + 1);
        check(wrong.is_none(), || {
            format!("element {wrong:?} was not written by the child")
        })?;
        let counts = line(&sock)?;
        check(counts == "mapped=1 unmapped=1", || {
            format!("child's releases: {counts}")
        })?;
        let status = child.wait().map_err(e)?;
        check(status.success(), || format!("child: {status}"))?;
        drop(t);
        let after = mapping_counts();
        check((after.0 - before.0, after.1 - before.1) == (1, 1), || {
            format!("parent's mappings made/released: {before:?} -> {after:?}")
        })?;
        check(!holds(None, our_ino)?, || "the memfd is still held".into())
    }

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    /// Host memory that is not a memfd, counting its release.
    struct Counted(Vec<f64>);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    // SAFETY: a Vec's buffer does not move with it and is owned alone.
    unsafe impl TensorStorage for Counted {
        fn data_ptr(&mut self) -> *mut c_void {
            self.0.as_mut_ptr().cast()
        }
        fn byte_len(&self) -> usize {
            self.0.len() * 8
        }
    }

    fn foreign_copy() -> Result<(), String> {
        let before = mapping_counts();
        // A column-major 4 × 8 matrix in a Vec.
        let data: Vec<f64> = (0..32).map(f64::from).collect();
        let t = ExportBuilder::new(Counted(data), DataType::FLOAT64, &[4, 8])
            .strides(&[1, 4])
            .build()
            .map_err(e)?;
        let err = share::share(&t.view(), &never()).unwrap_err().to_string();
        check(
            err.contains("copy policy is Never") && err.contains("another process can map"),
            || err.clone(),
        )?;
        check(mapping_counts() == before, || {
            "a refused share mapped memory".into()
        })?;
        let shared = share::share(&t.view(), &ShareOptions::default()).map_err(e)?;
        drop(t);
        check(DROPS.load(Ordering::SeqCst) == 1, || {
            "the original was not released once".into()
        })?;
        let (mut child, sock) = spawn("reader")?;
        shared.send(&sock).map_err(e)?;
        drop(shared);
        let got = line(&sock)?;
        // Row-major values of the column-major matrix: element (i, j) = i + 4 j.
        let want: Vec<String> = (0..4)
            .flat_map(|i| (0..8).map(move |j| (i + 4 * j).to_string()))
            .collect();
        check(got == format!("values {}", want.join(",")), || {
            format!("child read {got}")
        })?;
        check(line(&sock)? == "mapped=1 unmapped=1", || {
            "child's release".into()
        })?;
        check(child.wait().map_err(e)?.success(), || "child failed".into())?;
        check(DROPS.load(Ordering::SeqCst) == 1, || {
            "released more than once".into()
        })?;
        // The copy's producer-side mapping was made and dropped inside `share`.
        let after = mapping_counts();
        check(after.0 - before.0 == after.1 - before.1, || {
            format!("mappings left: {before:?} -> {after:?}")
        })
    }

    fn sigkill() -> Result<(), String> {
        let before = mapping_counts();
        let n = 64 << 20;
        let mut t = share::alloc(DataType::UINT8, &[n]).map_err(e)?;
        // SAFETY: nobody else has the memory yet.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        t.as_mut_slice::<u8>().map_err(e)?.fill(5);
        let shared = share::share(&t.view(), &never()).map_err(e)?;
        let our_ino = ino(&shared.fds()[0])?;
        let (mut child, sock) = spawn("holder")?;
        shared.send(&sock).map_err(e)?;
        drop(shared);
        let msg = line(&sock)?;
        check(msg == format!("holding sum={}", 5 * n), || {
            format!("child: {msg}")
        })?;
        check(holds(Some(child.id()), our_ino)?, || {
            "the child does not map the memfd".into()
        })?;
        child.kill().map_err(e)?;
        let status = child.wait().map_err(e)?;
        check(status.signal() == Some(9), || {
            format!("child ended with {status}")
        })?;
        // The parent's tensor is untouched by the peer's death, and its release runs once.
        check(
            t.as_slice::<u8>().map_err(e)?.iter().all(|&b| b == 5),
            || "the data changed".into(),
        )?;
        // Until it releases its tensor, the parent maps the memfd (so the check below can fail).
        check(holds(None, our_ino)?, || {
            "the parent's mapping is not seen".into()
        })?;
        drop(t);
        let after = mapping_counts();
        check((after.0 - before.0, after.1 - before.1) == (1, 1), || {
            format!("parent's mappings made/released: {before:?} -> {after:?}")
        })?;
        // Nobody holds the memfd any more: the kernel frees its pages.
        check(!holds(None, our_ino)?, || {
            "the memfd is still held here".into()
        })
    }

    fn producer_killed() -> Result<(), String> {
        let before = mapping_counts();
        let (mut child, sock) = spawn("producer")?;
        let shared = Shared::recv(&sock).map_err(e)?;
        check(line(&sock)? == "sent", || {
            "the producer did not report".into()
        })?;
        child.kill().map_err(e)?;
        check(child.wait().map_err(e)?.signal() == Some(9), || {
            "not killed".into()
        })?;
        // The producer is gone; its memory lives in the memfd we hold.
        let t = shared.open().map_err(e)?;
        drop(shared);
        let v = t.as_slice::<u16>().map_err(e)?;
        let ok = v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u16).wrapping_mul(7));
        check(ok && v.len() == 4096, || {
            "the producer's values are gone".into()
        })?;
        drop(t);
        let after = mapping_counts();
        check((after.0 - before.0, after.1 - before.1) == (1, 1), || {
            format!("mappings made/released: {before:?} -> {after:?}")
        })
    }

    // ── the child's roles ──

    fn child(role: &str) {
        let fd = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .expect("stdin");
        let sock = UnixStream::from(fd);
        if let Err(err) = run_child(role, &sock) {
            eprintln!("child {role}: {err}");
            let _ = writeln!(&sock, "error {err}");
            std::process::exit(2);
        }
    }

    fn report_counts(mut sock: &UnixStream) -> Result<(), String> {
        let (m, u) = mapping_counts();
        writeln!(sock, "mapped={m} unmapped={u}").map_err(e)
    }

    fn run_child(role: &str, mut sock: &UnixStream) -> Result<(), String> {
        match role {
            "writer" => {
                let s = Shared::recv(&sock).map_err(e)?;
                let our_ino = ino(&s.fds()[0])?;
                let mut t: ManagedTensor = s.open().map_err(e)?;
                drop(s);
                let sum_ok = t
                    .as_slice::<i32>()
                    .map_err(e)?
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == i as i32);
                writeln!(sock, "opened ino={our_ino} sum_ok={sum_ok}").map_err(e)?;
                // SAFETY: the parent waits for "wrote" before it reads; nobody else writes.
                unsafe { t.assume_exclusive() }.map_err(e)?;
                for (i, x) in t.as_mut_slice::<i32>().map_err(e)?.iter_mut().enumerate() {
                    *x = 3 * i as i32 + 1;
                }
                writeln!(sock, "wrote").map_err(e)?;
                drop(t);
                report_counts(sock)
            }
            "reader" => {
                let t = Shared::recv(&sock).map_err(e)?.open().map_err(e)?;
                let v: Vec<String> = t
                    .as_slice::<f64>()
                    .map_err(e)?
                    .iter()
                    .map(|x| x.to_string())
                    .collect();
                writeln!(sock, "values {}", v.join(",")).map_err(e)?;
                drop(t);
                report_counts(sock)
            }
            "holder" => {
                let t = Shared::recv(&sock).map_err(e)?.open().map_err(e)?;
                let sum: u64 = t
                    .as_slice::<u8>()
                    .map_err(e)?
                    .iter()
                    .map(|&b| u64::from(b))
                    .sum();
                writeln!(sock, "holding sum={sum}").map_err(e)?;
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
            "producer" => {
                let mut t = share::alloc(DataType::UINT16, &[4096]).map_err(e)?;
                // SAFETY: nobody else has the memory yet.
                unsafe { t.assume_exclusive() }.map_err(e)?;
                for (i, x) in t.as_mut_slice::<u16>().map_err(e)?.iter_mut().enumerate() {
                    *x = (i as u16).wrapping_mul(7);
                }
                share::share(&t.view(), &never())
                    .map_err(e)?
                    .send(&sock)
                    .map_err(e)?;
                writeln!(sock, "sent").map_err(e)?;
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
            other => Err(format!("unknown role {other}")),
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    println!("share: 0 passed, 0 failed, 4 skipped (sharing between processes is Linux-only)");
}
