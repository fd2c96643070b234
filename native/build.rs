//! Build script: the platform conditions, named once; the SONAME of the shared library; and
//! the cfg that only cbindgen reads.

use cfg_aliases::cfg_aliases;

fn main() {
    // What the platform and the build can do, named once (as wgpu-hal names its backends):
    // the code says `#[cfg(memfd_share)]`, never the conditions themselves. Where a room
    // cannot be built, `share/noop.rs` stands in for it.
    cfg_aliases! {
        // Sharing host memory with another process: sealed memfds and SCM_RIGHTS (Linux).
        memfd_share: { target_os = "linux" },
        // Sharing CUDA device memory with another process (CUDA IPC, whose lifetime is kept
        // by a pipe's fds): Linux with the `cuda` feature.
        cuda_ipc: { all(target_os = "linux", feature = "cuda") },
        // File descriptors, what the Rust API of sharing passes around (Unix).
        fds: { unix },
    }
    // `dlpack_h` is never set: cbindgen maps `cfg(not(dlpack_h))` to
    // `#if !defined(DLPACK_DLPACK_H_)` (see src/cabi.rs and cbindgen.toml).
    println!("cargo::rustc-check-cfg=cfg(dlpack_h)");
    println!("cargo::rerun-if-changed=build.rs");
    // The SONAME carries the C ABI's major version (`DLPORT_ABI_VERSION_MAJOR`, the crate's
    // major version), so programs linked against libdlport_native.so.0 never load an
    // incompatible .so.1. ELF platforms only; macOS's install name and Windows' DLL name are
    // set by the packager.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd"
    ) {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libdlport_native.so.{major}");
    }
}
