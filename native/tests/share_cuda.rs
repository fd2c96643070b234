//! CUDA device memory shared with another process through CUDA IPC (feature `cuda`, Linux, a
//! GPU), under `dlport_testkit::harness`, as `cuda.rs`: where no driver answers (or the feature is off) each
//! test prints SKIPPED with the reason and counts as skipped. The closing line reads
//! "share_cuda: N passed, N failed, N skipped". The peer is this binary again, started with
//! `DLPORT_SHARE_ROLE` set and its end of a socketpair as stdin.

use dlport_testkit::harness::{self, Check};

const TESTS: [&str; 2] = [
    "a_child_writes_device_memory_the_parent_sees_and_the_export_is_released_once",
    "a_child_killed_with_sigkill_lets_the_device_memory_go",
];

#[cfg(all(feature = "cuda", target_os = "linux"))]
mod peer;

#[cfg(all(feature = "cuda", target_os = "linux"))]
mod gpu {
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    use cudarc::driver::result;
    use dlport_native::dlport_core::abi::DeviceType;
    use dlport_native::dlport_core::{Device, ExportBuilder, ExportOptions, ImportOptions, Tensor};
    use dlport_native::share::{self, HandleKind, Shared};

    pub use super::peer::ROLE;
    use super::peer::{e, line, spawn};

    const N: usize = 1 << 20;

    /// Why the tests cannot run here, if they cannot.
    pub fn unavailable() -> Option<String> {
        match dlport_native::cuda::probe() {
            Err(err) => Some(err.to_string()),
            Ok(0) => Some("the CUDA driver sees no device".into()),
            Ok(_) => None,
        }
    }

    /// A device tensor holding 0, 1, 2, … and the host values read back from any tensor.
    fn device_iota() -> Result<Tensor, String> {
        let r = dlport_native::registry();
        let host = ExportBuilder::from_vec((0..N).map(|i| i as f32).collect(), &[N as i64])
            .build()
            .map_err(e)?;
        let opts = ImportOptions {
            device: Some(Device::cuda(0)),
            ..Default::default()
        };
        r.from_dlpack(host, &opts).map_err(e)
    }

    fn to_host(t: &Tensor) -> Result<Vec<f32>, String> {
        let r = dlport_native::registry();
        let m = r.to_dlpack(t, &ExportOptions::versioned()).map_err(e)?;
        let opts = ImportOptions {
            device: Some(Device::cpu()),
            ..Default::default()
        };
        r.from_dlpack(m, &opts)
            .map_err(e)?
            .to_vec::<f32>()
            .map_err(e)
    }

    /// Shares `t` (an export that keeps it alive) and waits until every user let go.
    fn share(t: &Tensor) -> Result<Shared, String> {
        let m = dlport_native::registry()
            .to_dlpack(t, &ExportOptions::versioned())
            .map_err(e)?;
        let s = share::share_managed(m, &Default::default()).map_err(e)?;
        if s.descriptor().kind != HandleKind::CudaIpc {
            return Err(format!("shared as {:?}", s.descriptor().kind));
        }
        Ok(s)
    }

    fn released(t: &Tensor) -> Result<(), String> {
        let start = Instant::now();
        while t.buffer().users() != 0 {
            if start.elapsed() > Duration::from_secs(10) {
                return Err(format!("{} users left after 10 s", t.buffer().users()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    pub fn write_and_release() -> Result<(), String> {
        let t = device_iota()?;
        let s = share(&t)?;
        let (mut child, sock) = spawn("writer")?;
        s.send(&sock).map_err(e)?;
        drop(s);
        let msg = line(&sock)?;
        if msg != "wrote" {
            return Err(format!("child: {msg}"));
        }
        let v = to_host(&t)?;
        if let Some(i) = (0..N).find(|&i| v[i] != -(i as f32)) {
            return Err(format!(
                "element {i} = {} was not written by the child",
                v[i]
            ));
        }
        if !child.0.wait().map_err(e)?.success() {
            return Err("the child failed".into());
        }
        released(&t)
    }

    pub fn sigkill() -> Result<(), String> {
        let t = device_iota()?;
        let s = share(&t)?;
        let (mut child, sock) = spawn("holder")?;
        s.send(&sock).map_err(e)?;
        drop(s);
        let msg = line(&sock)?;
        if msg != "holding" {
            return Err(format!("child: {msg}"));
        }
        if t.buffer().users() == 0 {
            return Err("the export was released while the child held it".into());
        }
        child.0.kill().map_err(e)?;
        child.0.wait().map_err(e)?;
        released(&t)
    }

    pub fn child(role: &str) {
        let fd = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .expect("stdin");
        let mut sock = UnixStream::from(fd);
        let outcome = (|| -> Result<(), String> {
            let opened = Shared::recv(&sock).map_err(e)?.open().map_err(e)?;
            let view = opened.view();
            if view.device().device_type != DeviceType::CUDA {
                return Err(format!("opened on {}", view.device()));
            }
            let ptr = view.data() as usize as u64 + view.byte_offset();
            let ctx = dlport_native::cuda::context(0).map_err(e)?;
            ctx.bind_to_thread().map_err(e)?;
            let mut host = vec![0f32; N];
            // SAFETY: the opened mapping holds N floats at `ptr`; `host` holds N floats.
            unsafe { result::memcpy_dtoh_sync(&mut host, ptr) }.map_err(e)?;
            if (0..N).any(|i| host[i] != i as f32) {
                return Err("the child did not read the producer's values".into());
            }
            if role == "holder" {
                writeln!(sock, "holding").map_err(e)?;
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            let negated: Vec<f32> = (0..N).map(|i| -(i as f32)).collect();
            // SAFETY: writes N floats into the opened mapping (the parent waits for "wrote").
            unsafe { result::memcpy_htod_sync(ptr, &negated) }.map_err(e)?;
            drop(opened);
            writeln!(sock, "wrote").map_err(e)
        })();
        if let Err(err) = outcome {
            let _ = writeln!(sock, "error {err}");
            std::process::exit(2);
        }
    }
}

fn main() {
    #[cfg(all(feature = "cuda", target_os = "linux"))]
    if let Ok(role) = std::env::var(gpu::ROLE) {
        gpu::child(&role);
        return;
    }
    #[cfg(all(feature = "cuda", target_os = "linux"))]
    let (tests, why_not): (Vec<Check>, _) = (
        vec![gpu::write_and_release, gpu::sigkill],
        gpu::unavailable(),
    );
    #[cfg(not(all(feature = "cuda", target_os = "linux")))]
    let (tests, why_not): (Vec<Check>, _) = (
        vec![|| Ok(()), || Ok(())],
        Some("built without the `cuda` feature, or not on Linux".to_string()),
    );
    let checks: Vec<(&str, Check)> = TESTS.iter().copied().zip(tests).collect();
    harness::run("share_cuda", &checks, why_not.as_deref());
}
