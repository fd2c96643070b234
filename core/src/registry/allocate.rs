//! Allocation as a registry operation: [`Registry::allocate`] (through the backend serving a
//! device) and [`Registry::allocate_on`] (through a chosen one), the door of every allocation a
//! user asks for (the C ABI's `dlport_alloc`, the Python exchange API's allocator): the size is
//! checked against the limit in force, the registry's and the process's, before the backend is
//! asked, whatever the backend.

use super::Registry;
use crate::backend::Backend;
use crate::device::{Device, DeviceField};
use crate::dtype::DataType;
use crate::error::Error;
use crate::tensor::Tensor;

impl Registry {
    /// Allocates a compact tensor (zeroed where the backend can) of `dtype` and `shape` on
    /// `device`, through the backend that serves it ([`resolve`](Self::resolve)): the one door
    /// of an allocation, [`allocate_on`](Self::allocate_on) with that backend.
    pub fn allocate(
        &self,
        device: Device,
        dtype: DataType,
        shape: &[i64],
    ) -> Result<Tensor, Error> {
        let device = device.check(DeviceField::Requested)?;
        self.allocate_on(self.resolve(device)?.as_ref(), device, dtype, shape)
    }

    /// Allocates as [`allocate`](Self::allocate) does, through a chosen `backend` (one of this
    /// registry's, or a plugin found by name): its size is checked against the limit in force,
    /// the lowest of this registry's and the process's, before the backend is asked
    /// ([`Backend::allocate`](crate::backend::Backend::allocate)). Over it is
    /// [`DispatchError::AllocationLimit`](crate::error::DispatchError::AllocationLimit), with
    /// nothing allocated.
    pub fn allocate_on(
        &self,
        backend: &dyn Backend,
        device: Device,
        dtype: DataType,
        shape: &[i64],
    ) -> Result<Tensor, Error> {
        let device = device.check(DeviceField::Requested)?;
        let bytes = crate::copy::compact_bytes(dtype, shape)?;
        crate::limit::check_alloc(bytes as u128, Some(self.alloc_limit(None)))?;
        backend.allocate(device, dtype, shape)
    }
}
