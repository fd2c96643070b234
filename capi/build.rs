//! Build script: the platform condition of sharing, named once; the SONAME of the shared
//! library; and the cfg that only cbindgen reads.

use cfg_aliases::cfg_aliases;

fn main() {
    // As dlport-native names it: sharing host memory with another process (sealed memfds and
    // SCM_RIGHTS) is Linux only. Elsewhere `share`'s stub room stands in.
    cfg_aliases! {
        memfd_share: { target_os = "linux" },
    }
    // `dlpack_h` is never set: cbindgen maps `cfg(not(dlpack_h))` to
    // `#if !defined(DLPACK_DLPACK_H_)` (see src/cabi.rs and cbindgen.toml).
    println!("cargo::rustc-check-cfg=cfg(dlpack_h)");
    println!("cargo::rerun-if-changed=build.rs");
    // The SONAME carries the C ABI's major version (`DLPORT_ABI_VERSION_MAJOR`, the crate's
    // major version), so programs linked against libdlport.so.0 never load an incompatible
    // .so.1. ELF platforms only; macOS's install name and Windows' DLL name are set by the
    // packager.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd"
    ) {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libdlport.so.{major}");
    }
}
