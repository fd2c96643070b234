//! Installation: [`install()`] makes the native registry (every backend that works on this
//! machine, [`registry()`]) the process-wide default, once, and gives the machine's memory
//! ([`machine_memory()`]) as the process's default allocation limit; a limit the user set,
//! before or after, outranks it.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dlport_core::backend::CpuBackend;
use dlport_core::{Error, Registry};

/// Installs, once, the process-wide default registry that `dlport_core::from_dlpack` and
/// `to_dlpack` (and the C ABI) use: every backend that works on this machine ([`registry()`]).
///
/// Call it at the start of `main`. Calling it again returns the same registry. If another
/// default is already in force (installed by other code, or core's CPU-only default installed
/// by a `from_dlpack` that came first), it fails with `DispatchError::DefaultInstalled`, naming
/// that default's backends: a default is never replaced, since tensors name the backend that
/// made them.
pub fn install() -> Result<&'static Registry, Error> {
    let installed = install_or_default();
    let ours = |r: &Registry| std::ptr::eq(r, OURS.load(Ordering::Acquire));
    if !ours(installed) {
        // A thread that installed ours sets `OURS` before it unlocks: wait for it.
        ours_after_installers();
    }
    if ours(installed) {
        Ok(installed)
    } else {
        // The same refusal as core's, naming the default in force.
        registry().install_default()
    }
}

/// The registry [`install`] installed, if it did.
static OURS: AtomicPtr<Registry> = AtomicPtr::new(std::ptr::null_mut());

/// Held while a thread installs [`registry()`] as the default and records it in `OURS`.
static INSTALLING: Mutex<()> = Mutex::new(());

/// Waits for any install in progress to finish recording itself.
fn ours_after_installers() {
    drop(INSTALLING.lock().unwrap_or_else(PoisonError::into_inner));
}

/// The default in force, after installing [`registry()`] as the default if none was: the
/// registry the C ABI (dlport-capi) works on. Unlike [`install`], it never fails: where
/// another default came first, it is that one.
pub fn install_or_default() -> &'static Registry {
    if let Some(r) = Registry::get_default() {
        return r;
    }
    // One installer at a time, so that `OURS` is set before anyone compares with it.
    let _one = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(r) = Registry::get_default() {
        return r;
    }
    // The machine's memory is the process's default limit from now on (a limit the user set
    // outranks it: `dlport_core::set_alloc_limit`).
    if let Some(memory) = machine_memory() {
        dlport_core::backend::set_default_alloc_limit(memory);
    }
    match registry().install_default() {
        Ok(r) => {
            OURS.store(std::ptr::from_ref(r).cast_mut(), Ordering::Release);
            r
        }
        // Core's default was installed by a first use on another thread meanwhile.
        Err(_) => Registry::process_default(),
    }
}

/// A registry with every backend available here: the CPU and pinned backends always, the CUDA
/// backend when the `cuda` feature is on and a driver answers, the PJRT clients' host with the
/// `pjrt` feature, and the C plugins' host.
pub fn registry() -> Registry {
    registry_with_report().0
}

/// [`registry()`] plus one line per backend saying whether it was registered and why not.
pub fn registry_with_report() -> (Registry, Vec<String>) {
    let mut r = Registry::new();
    let mut report = Vec::new();
    // The machine's memory is the process's default limit (core's, the one home of the
    // default: `install_or_default`), never a limit of this registry's own, so that a limit
    // the user sets above it is the one in force here too.
    if let Some(memory) = machine_memory() {
        report.push(format!(
            "default allocation limit: {memory} bytes, the machine's memory (the smallest of \
             physical memory, the cgroup's memory.max and RLIMIT_AS/RLIMIT_DATA), once \
             installed; dlport_core::set_alloc_limit sets another"
        ));
    }
    let mut add = |r: &mut Registry, b: Arc<dyn dlport_core::backend::Backend>, note: String| {
        let name = b.name();
        match r.register(b) {
            Ok(()) => report.push(format!("{name}: registered ({note})")),
            Err(e) => report.push(format!("{name}: not registered: {e}")),
        }
    };
    add(
        &mut r,
        Arc::new(CpuBackend),
        "64-byte-aligned host memory".into(),
    );
    let pinned = crate::pinned::PinnedBackend::new();
    let note = pinned.describe().to_string();
    add(&mut r, Arc::new(pinned), note);
    #[cfg(feature = "cuda")]
    let cuda_missing = match crate::cuda::CudaBackend::new() {
        Ok(b) => {
            let note = format!("{} device(s)", b.device_count());
            add(&mut r, Arc::new(b), note);
            None
        }
        Err(e) => Some(format!("cuda: not registered: {e}")),
    };
    #[cfg(not(feature = "cuda"))]
    let cuda_missing = Some("cuda: not registered: built without the `cuda` feature".to_string());
    #[cfg(feature = "pjrt")]
    add(
        &mut r,
        Arc::new(crate::interop::pjrt::PjrtHost),
        "PJRT clients: dlport_pjrt_load, dlport.pjrt.load, interop::pjrt::register_default".into(),
    );
    // Last, so that among the backends reaching a device type none serves, a plugin's wins.
    add(
        &mut r,
        Arc::new(crate::plugin::PluginHost),
        "C plugins: dlport_register_backend, dlport_load_plugin".into(),
    );
    report.extend(cuda_missing);
    (r, report)
}

/// The most memory this process can really use: the smallest of physical memory, the cgroup's
/// limit (v2 `memory.max`, v1 `memory.limit_in_bytes`) and the soft `RLIMIT_AS` /
/// `RLIMIT_DATA`. Over-committed allocations past it would succeed and then be killed by the
/// OOM killer without an error, so [`install()`] makes it the process's default allocation
/// limit. `None` where the platform says nothing.
pub fn machine_memory() -> Option<u64> {
    #[cfg_attr(not(any(unix, windows)), allow(unused_mut))]
    let mut limits: Vec<u64> = Vec::new();
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads configuration values.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page > 0 {
            limits.push((pages as u64).saturating_mul(page as u64));
        }
        for resource in [libc::RLIMIT_AS, libc::RLIMIT_DATA] {
            let mut rl = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes one rlimit struct we own.
            if unsafe { libc::getrlimit(resource, &mut rl) } == 0
                && rl.rlim_cur != libc::RLIM_INFINITY
            {
                // rlim_t is u64 on Linux but not on every Unix.
                #[allow(clippy::unnecessary_cast)]
                limits.push(rl.rlim_cur as u64);
            }
        }
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
        // SAFETY: MEMORYSTATUSEX is plain data; all zeroes is a valid value.
        let mut status: MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
        status.dwLength = std::mem::size_of::<MEMORYSTATUSEX>() as u32;
        // SAFETY: writes one MEMORYSTATUSEX we own, whose dwLength is set.
        if unsafe { GlobalMemoryStatusEx(&mut status) } != 0 {
            limits.push(status.ullTotalPhys);
        }
    }
    #[cfg(target_os = "linux")]
    for path in [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ] {
        if let Some(v) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            limits.push(v);
        }
    }
    limits.into_iter().min()
}
