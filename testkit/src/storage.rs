//! Storages of the tests' own.

use core::ffi::c_void;

use dlport_core::Device;
use dlport_core::backend::TensorStorage;

/// Host memory that claims a given device (pinned or managed memory without a driver): the
/// storage of tests of the host-accessible device classes.
pub struct HostAs(pub Vec<f32>, pub Device);

// SAFETY: a Vec's buffer, stable and owned alone; the device label does not change the memory.
unsafe impl TensorStorage for HostAs {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        self.0.len() * 4
    }
    fn device(&self) -> Device {
        self.1
    }
}
