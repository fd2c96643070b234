//! Memory sync: [`sync_managed()`] makes managed (unified) memory host-readable before the
//! host reads it.

use dlport_core::Error;

/// Makes managed (unified) memory host-readable: synchronises every CUDA device when a driver
/// is present; a no-op otherwise (no device can be writing it). With a driver, [`registry()`](crate::registry())
/// hands `kDLCUDAManaged` imports to the CUDA backend; a caller reading managed memory from the
/// host calls this first.
pub fn sync_managed() -> Result<(), Error> {
    #[cfg(feature = "cuda")]
    match crate::cuda::probe() {
        Ok(_) => return crate::cuda::synchronize_all(),
        Err(Error::Backend(dlport_core::error::BackendError::DriverNotFound { .. })) => {
            return Ok(());
        }
        Err(e) => return Err(e),
    }
    #[allow(unreachable_code)]
    Ok(())
}
