//! The CUDA probe turns a missing driver into an error; nothing panics.

#[cfg(feature = "cuda")]
#[test]
fn probe_returns_an_error_instead_of_panicking() {
    let outcome = std::panic::catch_unwind(dlport_native::cuda::probe);
    let result = outcome.expect("the probe must never panic");
    // SAFETY: only tries to open the library.
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    match result {
        Ok(n) => assert!(
            present,
            "probe found {n} device(s) without a driver library"
        ),
        Err(e) => {
            if !present {
                assert_eq!(
                    e,
                    dlport_core::Error::DriverNotFound {
                        api: "CUDA",
                        library: "libcuda.so.1"
                    }
                );
                assert!(
                    e.to_string()
                        .starts_with("no CUDA driver: libcuda.so.1 not found"),
                    "{e}"
                );
            }
            // Everything built on the probe reports the same error, without a panic.
            let backend = std::panic::catch_unwind(dlport_native::cuda::CudaBackend::new).unwrap();
            assert_eq!(backend.unwrap_err(), e);
            // The pinned backend falls back to mlock, claiming plain host memory.
            let pinned =
                std::panic::catch_unwind(dlport_native::pinned::PinnedBackend::new).unwrap();
            assert_eq!(pinned.device(), dlport_core::Device::CPU);
        }
    }
}
