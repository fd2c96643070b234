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
                    dlport_core::Error::Backend(dlport_core::error::BackendError::DriverNotFound {
                        driver: &dlport_core::error::Driver {
                            api: "CUDA",
                            library: "libcuda.so.1"
                        }
                    })
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
            assert_eq!(pinned.device(), dlport_core::Device::cpu());
        }
    }
}

/// A driver error names the call, the code and what to do, and its source is cudarc's own
/// error value, which a caller can downcast.
#[cfg(feature = "cuda")]
#[test]
fn a_driver_error_carries_cudarcs_error_as_its_source() {
    use cudarc::driver::DriverError;
    use cudarc::driver::sys::CUresult;
    use std::error::Error as _;

    let e = dlport_native::cuda::driver_error(
        "cuMemAlloc",
        DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
    );
    assert_eq!(e.code(), 32);
    assert_eq!(
        e.to_string(),
        format!(
            "backend \"cuda\": cuMemAlloc failed with code {}: out of memory: free tensors or \
             allocate less",
            CUresult::CUDA_ERROR_OUT_OF_MEMORY as i32
        )
    );
    let source = e.source().expect("cudarc's error");
    assert_eq!(
        source.downcast_ref::<DriverError>(),
        Some(&DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY))
    );
    assert_eq!(e.clone(), e, "a clone shares the source");
    let unknown = dlport_native::cuda::driver_error(
        "cuLaunchKernel",
        DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED),
    );
    assert!(
        unknown
            .to_string()
            .ends_with("cuLaunchKernel failed with code 719: the CUDA driver reported an error"),
        "{unknown}"
    );
    assert_eq!(
        unknown
            .source()
            .and_then(|s| s.downcast_ref::<DriverError>()),
        Some(&DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED))
    );
}
