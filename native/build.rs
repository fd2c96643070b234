//! Build script: the platform conditions, named once.

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
    println!("cargo::rerun-if-changed=build.rs");
}
