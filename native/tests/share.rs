//! Two real processes share tensors (`dlport_native::share`): this binary runs the tests and,
//! started again by them with `DLPORT_SHARE_ROLE` set, plays the peer, its end of a
//! `socketpair` as its stdin. The harness is our own (no libtest), so a child process runs
//! only its role; the closing line reads "share: N passed, N failed".
//!
//! Shown: the child writes and the parent sees it through its own mapping (the same memfd
//! inode, the same physical pages: no byte is sent); each side's release runs exactly once
//! (mapping counts, a counting storage); a child killed with SIGKILL still lets the memory go
//! (nothing of it is left in the parent once it released its tensor); a producer that is
//! killed leaves its memory to the consumer that holds it. A read-only share is unwritable by
//! every process that receives it: an attacker child tries every way to write (the fd itself,
//! its reopen with `O_RDWR` through `/proc/self/fd`, the producer's own fds through
//! `/proc/<pid>/fd`; `pwrite`, `write`, writable and `mprotect`ed mappings, `ftruncate`,
//! `fallocate`, `F_ADD_SEALS`), reports each attempt, and passes the fd on to a process of its own
//! that tries again; every attempt is refused and the producer's bytes stay as they were.

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

    use dlport_native::dlport_core::backend::TensorStorage;
    use dlport_native::dlport_core::{CopyPolicy, DataType, ExportBuilder, ManagedTensor};
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
            (
                "a_read_only_share_of_a_memfd_is_unwritable_by_every_receiving_process",
                read_only_memfd,
            ),
            (
                "a_read_only_copy_of_foreign_memory_is_unwritable_by_every_receiving_process",
                read_only_foreign,
            ),
            (
                "a_memfd_shared_writable_before_is_shared_read_only_as_a_sealed_copy",
                read_only_after_writable,
            ),
            (
                "a_writable_share_cannot_be_resized_or_resealed_by_its_peer",
                writable_resize,
            ),
        ];
        // libtest's arguments as far as they select tests: names to run, and `--skip NAME`
        // (so that `cargo test -- --skip other` runs every test here instead of none).
        let (mut filter, mut skip) = (Vec::new(), Vec::new());
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            if a == "--skip" {
                skip.extend(args.next());
            } else if let Some(name) = a.strip_prefix("--skip=") {
                skip.push(name.to_owned());
            } else if !a.starts_with('-') {
                filter.push(a);
            }
        }
        let (mut passed, mut failed) = (0, 0);
        for (name, f) in tests {
            if (!filter.is_empty() && !filter.iter().any(|x| name.contains(x.as_str())))
                || skip.iter().any(|x| name.contains(x.as_str()))
            {
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

    // ── read-only shares under attack ──

    /// What an attacker tries on every fd it reaches (the received one, its reopen with
    /// `O_RDWR` through `/proc/self/fd`, and the sender's own fds through `/proc/<pid>/fd`), in
    /// the order the child reports them.
    const ATTEMPTS: [&str; 10] = [
        "pwrite",
        "write",
        "mmap(PROT_WRITE, MAP_SHARED)",
        "mprotect(PROT_WRITE) of a MAP_SHARED mapping",
        "ftruncate(shrink to 0)",
        "ftruncate(grow)",
        "fallocate(PUNCH_HOLE)",
        "fallocate(grow)",
        "F_ADD_SEALS(F_SEAL_FUTURE_WRITE)",
        "a MAP_PRIVATE write reaching the memfd",
    ];

    /// What a writable share's peer must not do either: resize the memory (shrinking it would
    /// make the producer's next read of a cut page SIGBUS) or change its seals.
    const RESIZES: [&str; 4] = [
        "ftruncate(shrink to 0)",
        "ftruncate(grow)",
        "fallocate(grow)",
        "F_ADD_SEALS(F_SEAL_FUTURE_WRITE)",
    ];

    /// The fds every attacker reaches, in the peer and in the process it passed the fd on to.
    const REACHED: [&str; 2] = ["received fd", "reopened O_RDWR via /proc/self/fd"];

    /// The producer's bytes (the attacker writes 0xA5, or zeroes with a punched hole).
    fn pattern(i: usize) -> u8 {
        ((i * 7 + 3) % 251) as u8
    }

    fn intact(bytes: &[u8], what: &str) -> Result<(), String> {
        let bad = bytes.iter().enumerate().find(|&(i, &b)| b != pattern(i));
        check(bad.is_none(), || {
            format!("{what}: the bytes changed, first at (index, value) {bad:?}")
        })
    }

    /// The message of a share that must be refused.
    fn refused(r: Result<Shared, dlport_native::dlport_core::Error>) -> Result<String, String> {
        match r {
            Ok(s) => Err(format!("shared, not refused: {s:?}")),
            Err(err) => Ok(err.to_string()),
        }
    }

    fn read_only() -> ShareOptions {
        ShareOptions {
            read_only: true,
            ..Default::default()
        }
    }

    /// Sends `shared` to an attacker child (which passes it on to a process of its own, which
    /// attacks again) and returns the report, every line printed.
    fn attack(shared: &Shared) -> Result<Vec<String>, String> {
        attack_with(|sock| shared.send(sock).map_err(e))
    }

    /// As [`attack`], the share sent by `send`.
    fn attack_with(
        send: impl FnOnce(&UnixStream) -> Result<(), String>,
    ) -> Result<Vec<String>, String> {
        let (mut child, sock) = spawn("attacker")?;
        send(&sock)?;
        let mut report = Vec::new();
        loop {
            let l = line(&sock)?;
            if l == "done" {
                break;
            }
            if l.starts_with("error ") {
                return Err(format!("attacker: {l}"));
            }
            println!("    {l}");
            report.push(l);
        }
        let status = child.wait().map_err(e)?;
        check(status.success(), || format!("attacker ended with {status}"))?;
        Ok(report)
    }

    /// Checks that each of `attempts` was made on each fd every attacker reached and that none
    /// got through (listing all that did).
    fn all_refused(report: &[String], attempts: &[&str]) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut through = Vec::new();
        for l in report {
            let Some(rest) = l.strip_prefix("attempt ") else {
                continue;
            };
            let [scope, fd, what, outcome] = rest.split('|').collect::<Vec<_>>()[..] else {
                return Err(format!("a report line that does not parse: {l}"));
            };
            if attempts.contains(&what) && !outcome.starts_with("refused") {
                through.push(format!("{scope}, {fd}: {what}: {outcome}"));
            }
            seen.insert(format!("{scope}|{fd}|{what}"));
        }
        for scope in ["peer", "passed on"] {
            for fd in REACHED {
                for what in attempts {
                    check(seen.contains(&format!("{scope}|{fd}|{what}")), || {
                        format!("{scope}, {fd}: {what} was not tried")
                    })?;
                }
            }
        }
        check(through.is_empty(), || {
            format!("{} attempts got through: {through:#?}", through.len())
        })
    }

    fn read_only_memfd() -> Result<(), String> {
        let n = 3 * 4096 + 5;
        let mut t = share::alloc(DataType::UINT8, &[n as i64]).map_err(e)?;
        // SAFETY: nobody else has the memory yet.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        for (i, b) in t.as_mut_slice::<u8>().map_err(e)?.iter_mut().enumerate() {
            *b = pattern(i);
        }
        // One of dlport's memfds: shared without a copy, write-sealed for everyone else.
        let ro_never = ShareOptions {
            copy: CopyPolicy::Never,
            read_only: true,
            ..Default::default()
        };
        let shared = share::share(&t.view(), &ro_never).map_err(e)?;
        check(!shared.is_copy(), || "the memfd was copied".into())?;
        all_refused(&attack(&shared)?, &ATTEMPTS)?;
        intact(t.as_slice::<u8>().map_err(e)?, "the producer's mapping")?;
        // The producer's own mapping stays writable, and the peers see its writes (no copy).
        // SAFETY: the peers are gone.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        t.as_mut_slice::<u8>().map_err(e)?[1] = 0xEE;
        let opened = shared.open().map_err(e)?;
        check(opened.is_read_only(), || "opened writable".into())?;
        check(opened.as_slice::<u8>().map_err(e)?[1] == 0xEE, || {
            "the read-only peer does not see the producer's write".into()
        })?;
        // A writable share of the same memory needs a copy now, and says so under Never.
        let err = refused(share::share(&t.view(), &never()))?;
        check(
            err.contains("shared read-only before") && err.contains("allow a copy"),
            || err.clone(),
        )?;
        let copy = share::share(&t.view(), &ShareOptions::default()).map_err(e)?;
        check(copy.is_copy(), || "the writable share is not a copy".into())?;
        let mut w = copy.open().map_err(e)?;
        check(!w.is_read_only(), || {
            "the writable copy opened read-only".into()
        })?;
        // SAFETY: nobody else maps the copy.
        unsafe { w.assume_exclusive() }.map_err(e)?;
        w.as_mut_slice::<u8>().map_err(e)?[0] = 0x11;
        check(t.as_slice::<u8>().map_err(e)?[0] == pattern(0), || {
            "the copy is the producer's memory".into()
        })
    }

    fn read_only_foreign() -> Result<(), String> {
        let (rows, cols) = (61, 67);
        let n = rows * cols;
        // Compact memory (copied with one pwrite) and a column-major view of the same bytes
        // (copied through a mapping): both copies are sealed before they leave.
        let compact =
            ExportBuilder::from_vec((0..n).map(pattern).collect::<Vec<u8>>(), &[n as i64])
                .build()
                .map_err(e)?;
        let transposed = ExportBuilder::from_vec(
            (0..n)
                .map(|k| pattern((k % rows) * cols + k / rows))
                .collect::<Vec<u8>>(),
            &[rows as i64, cols as i64],
        )
        .strides(&[1, rows as i64])
        .build()
        .map_err(e)?;
        for t in [&compact, &transposed] {
            let shared = share::share(&t.view(), &read_only()).map_err(e)?;
            check(shared.is_copy(), || "foreign memory was not copied".into())?;
            all_refused(&attack(&shared)?, &ATTEMPTS)?;
            let opened = shared.open().map_err(e)?;
            intact(opened.as_slice::<u8>().map_err(e)?, "the shared copy")?;
        }
        intact(compact.as_slice::<u8>().map_err(e)?, "the original")
    }

    fn read_only_after_writable() -> Result<(), String> {
        let n = 8192;
        let mut t = share::alloc(DataType::UINT8, &[n]).map_err(e)?;
        // SAFETY: nobody else has the memory yet.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        for (i, b) in t.as_mut_slice::<u8>().map_err(e)?.iter_mut().enumerate() {
            *b = pattern(i);
        }
        let writable = share::share(&t.view(), &never()).map_err(e)?;
        // Its seals are fixed now (the writable peers keep their promise), so a read-only
        // share is a write-sealed copy, refused under Never.
        let ro_never = ShareOptions {
            copy: CopyPolicy::Never,
            read_only: true,
            ..Default::default()
        };
        let err = refused(share::share(&t.view(), &ro_never))?;
        check(
            err.contains("shared writable before") && err.contains("allow a copy"),
            || err.clone(),
        )?;
        let ro = share::share(&t.view(), &read_only()).map_err(e)?;
        check(ro.is_copy() && !writable.is_copy(), || {
            "the read-only share is not a copy".into()
        })?;
        all_refused(&attack(&ro)?, &ATTEMPTS)?;
        intact(
            ro.open().map_err(e)?.as_slice::<u8>().map_err(e)?,
            "the copy",
        )?;
        intact(t.as_slice::<u8>().map_err(e)?, "the producer's mapping")?;
        let w = writable.open().map_err(e)?;
        check(!w.is_read_only(), || {
            "the writable share turned read-only".into()
        })
    }

    fn writable_resize() -> Result<(), String> {
        let n = 5 * 4096;
        let mut t = share::alloc(DataType::UINT8, &[n as i64]).map_err(e)?;
        // SAFETY: nobody else has the memory yet.
        unsafe { t.assume_exclusive() }.map_err(e)?;
        for (i, b) in t.as_mut_slice::<u8>().map_err(e)?.iter_mut().enumerate() {
            *b = pattern(i);
        }
        let shared = share::share(&t.view(), &never()).map_err(e)?;
        all_refused(&attack(&shared)?, &RESIZES)?;
        // Every page is still there: reading them all here would SIGBUS after a shrink.
        let sum: u64 = t
            .as_slice::<u8>()
            .map_err(e)?
            .iter()
            .map(|&b| u64::from(b))
            .sum();
        let size = std::fs::File::from(shared.fds()[0].try_clone().map_err(e)?)
            .metadata()
            .map_err(e)?
            .len();
        check(size == n as u64, || format!("the memfd is {size} bytes"))?;
        std::hint::black_box(sum);
        // The peers' writes were theirs to make: the share is still writable.
        check(!shared.open().map_err(e)?.is_read_only(), || {
            "the writable share turned read-only".into()
        })
    }

    // ── the attacker's tools (plain system calls on the fds it holds) ──

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    fn os(ok: bool) -> Result<(), String> {
        if ok {
            Ok(())
        } else {
            Err(format!("refused errno={}", errno()))
        }
    }

    /// Maps `len` bytes of `fd` shared with `prot` (adding PROT_WRITE with `mprotect` when
    /// `then_mprotect`) and writes a byte through the mapping.
    fn map_and_write(fd: i32, len: usize, prot: i32, then_mprotect: bool) -> Result<(), String> {
        // SAFETY: a new mapping chosen by the kernel; it overlaps nothing of ours.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return os(false);
        }
        // SAFETY: the mapping made above, `len` bytes.
        let r = if then_mprotect
            && unsafe { libc::mprotect(p, len, libc::PROT_READ | libc::PROT_WRITE) } != 0
        {
            os(false)
        } else {
            // SAFETY: a mapping of at least one writable byte.
            unsafe { p.cast::<u8>().write_volatile(0xA5) };
            Ok(())
        };
        // SAFETY: unmaps the mapping made above.
        unsafe { libc::munmap(p, len) };
        r
    }

    /// Writes a byte into a private writable mapping of `fd`; Ok only if the memfd shows it.
    fn private_write(fd: i32, len: usize) -> Result<(), String> {
        let mut before = [0u8];
        // SAFETY: reads one byte into a local buffer.
        if unsafe { libc::pread(fd, before.as_mut_ptr().cast(), 1, 0) } != 1 {
            return os(false);
        }
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a new mapping chosen by the kernel.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE, fd, 0) };
        if p == libc::MAP_FAILED {
            return os(false);
        }
        // SAFETY: a private writable mapping of at least one byte, unmapped after.
        unsafe {
            p.cast::<u8>().write_volatile(before[0] ^ 0x5A);
            libc::munmap(p, len);
        }
        let mut after = [0u8];
        // SAFETY: as above.
        unsafe { libc::pread(fd, after.as_mut_ptr().cast(), 1, 0) };
        if after[0] == before[0] ^ 0x5A {
            Ok(())
        } else {
            Err("refused (the write stayed in a private copy)".into())
        }
    }

    /// Every attempt of [`ATTEMPTS`] on `fd`, each reported as one line.
    fn attack_fd(
        mut sock: &UnixStream,
        scope: &str,
        label: &str,
        fd: i32,
        len: usize,
    ) -> Result<(), String> {
        let evil = [0xA5u8];
        let grow = (len + 4096) as libc::off_t;
        // SAFETY: plain system calls on an fd this process holds, with buffers that live
        // across each call; a refused call only sets errno.
        let results: [Result<(), String>; 10] = unsafe {
            [
                os(libc::pwrite(fd, evil.as_ptr().cast(), 1, 0) == 1),
                os(libc::lseek(fd, 0, libc::SEEK_SET) == 0
                    && libc::write(fd, evil.as_ptr().cast(), 1) == 1),
                map_and_write(fd, len, libc::PROT_READ | libc::PROT_WRITE, false),
                map_and_write(fd, len, libc::PROT_READ, true),
                os(libc::ftruncate(fd, 0) == 0),
                os(libc::ftruncate(fd, grow) == 0),
                os(libc::fallocate(
                    fd,
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    0,
                    len as libc::off_t,
                ) == 0),
                os(libc::fallocate(fd, 0, len as libc::off_t, 4096) == 0),
                os(libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_FUTURE_WRITE) == 0),
                private_write(fd, len),
            ]
        };
        for (what, r) in ATTEMPTS.iter().zip(results) {
            let outcome = r.err().unwrap_or_else(|| "GOT THROUGH".into());
            writeln!(sock, "attempt {scope}|{label}|{what}|{outcome}").map_err(e)?;
        }
        Ok(())
    }

    fn open_rw(path: &str) -> Result<std::os::fd::OwnedFd, String> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(Into::into)
            .map_err(|err| format!("refused errno={}", err.raw_os_error().unwrap_or(0)))
    }

    /// Attacks the received fd, its reopen through `/proc/self/fd`, and every fd of the sending
    /// process that is the same memfd (through `/proc/<pid>/fd`).
    fn attack_all(mut sock: &UnixStream, scope: &str, s: &Shared) -> Result<(), String> {
        let fd = s.fds()[0].as_raw_fd();
        let len = s.descriptor().byte_len as usize;
        attack_fd(sock, scope, REACHED[0], fd, len)?;
        match open_rw(&format!("/proc/self/fd/{fd}")) {
            Ok(rw) => attack_fd(sock, scope, REACHED[1], rw.as_raw_fd(), len)?,
            Err(why) => {
                for what in ATTEMPTS {
                    writeln!(
                        sock,
                        "attempt {scope}|{}|{what}|{why} (the reopen)",
                        REACHED[1]
                    )
                    .map_err(e)?;
                }
            }
        }
        let ours = ino(&s.fds()[0])?;
        let sender = std::os::unix::process::parent_id();
        let dir = format!("/proc/{sender}/fd");
        let entries = match std::fs::read_dir(&dir) {
            Ok(d) => d,
            Err(err) => return writeln!(sock, "note {dir}: {err}").map_err(e),
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if std::fs::metadata(&path).is_ok_and(|m| m.ino() == ours) {
                let label = format!("the sender's {} reopened O_RDWR", path.display());
                match open_rw(&path.to_string_lossy()) {
                    Ok(rw) => attack_fd(sock, scope, &label, rw.as_raw_fd(), len)?,
                    Err(why) => writeln!(sock, "note {label}: {why}").map_err(e)?,
                }
            }
        }
        Ok(())
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
            "attacker" | "relay" => {
                let s = Shared::recv(&sock).map_err(e)?;
                let scope = if role == "attacker" {
                    "peer"
                } else {
                    "passed on"
                };
                attack_all(sock, scope, &s)?;
                if role == "attacker" {
                    // Passing the fd on: another process gets it and tries again.
                    let (mut relay, rsock) = spawn("relay")?;
                    s.send(&rsock).map_err(e)?;
                    loop {
                        let l = line(&rsock)?;
                        if l == "done" {
                            break;
                        }
                        writeln!(sock, "{l}").map_err(e)?;
                    }
                    let status = relay.wait().map_err(e)?;
                    if !status.success() {
                        return Err(format!("the relay ended with {status}"));
                    }
                }
                writeln!(sock, "done").map_err(e)
            }
            other => Err(format!("unknown role {other}")),
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    println!("share: 0 passed, 0 failed, 9 skipped (sharing between processes is Linux-only)");
}
