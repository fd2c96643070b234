//! [`DLPackTensor`]: a PyO3 argument that takes any DLPack producer, and a return value that
//! gives Python a `dlport.Tensor`.

use dlport_core::{Device, Tensor};
use pyo3::prelude::*;

use crate::adapter::{Held, Requirements};
use crate::{PyTensor, import};

/// What an import asks for, as `dlport.from_dlpack(x, device=, copy=, layout=, align=)`; the
/// default (plain extraction) is the producer's memory as it is, never copied unless needed.
///
/// ```
/// use dlport_core::Device;
/// use dlport_pyo3::ImportOptions;
///
/// // Host memory, row-major compact and 64-byte aligned; a copy only where needed.
/// let options = ImportOptions::new().device(Device::cpu()).copy(None).compact(64);
/// assert_eq!(options.device, Some(Device::cpu()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// The device the tensor must be on (`None`: the data's own). Device memory is copied to
    /// the host where `copy` allows; pinned or managed memory presents as `cpu` unless this
    /// names its own class.
    pub device: Option<Device>,
    /// The array API's `copy`: `None` copies only if needed, `Some(true)` always,
    /// `Some(false)` never (a `BufferError` where a copy would be needed).
    pub copy: Option<bool>,
    /// The layout and alignment the tensor must have (`None`: whatever the producer gave).
    pub requirements: Option<Requirements>,
}

impl ImportOptions {
    /// The defaults: the producer's memory, as it is.
    pub const fn new() -> Self {
        Self {
            device: None,
            copy: None,
            requirements: None,
        }
    }

    /// On `device` (`from_dlpack(device=)`).
    pub const fn device(mut self, device: Device) -> Self {
        self.device = Some(device);
        self
    }

    /// The array API's `copy` (`from_dlpack(copy=)`).
    pub const fn copy(mut self, copy: Option<bool>) -> Self {
        self.copy = copy;
        self
    }

    /// Row-major compact and aligned to `align` bytes, a power of two from 1 to 4096
    /// (`from_dlpack(layout="compact", align=)`): a view where the memory already is, else one
    /// copy where `copy` allows.
    pub const fn compact(mut self, align: usize) -> Self {
        self.requirements = Some(Requirements {
            compact: true,
            align,
        });
        self
    }
}

/// A tensor from any DLPack producer, held by dlport — and, returned from an extension
/// function, a `dlport.Tensor` for Python.
///
/// As an argument (`fn f(x: DLPackTensor)`) it imports the object exactly as
/// `dlport.from_dlpack(x)` does, with the default [`ImportOptions`]; [`Self::extract_with`]
/// takes other options. The tensor is a view of the producer's memory (no copy unless one was
/// asked for or needed): the producer's memory stays alive while the tensor, or any export of
/// it, lives. A failure is the package's exception (a `BufferError`, `ValueError` or
/// `TypeError`) naming the field and the value.
///
/// As a return value it becomes a [`PyTensor`] (`dlport.Tensor` of this extension), a DLPack
/// producer whose consumers (`numpy.from_dlpack`, `jax.dlpack.from_dlpack`, `torch.from_dlpack`)
/// take the same memory without a copy.
#[derive(Clone, Debug)]
pub struct DLPackTensor {
    held: Held,
    /// The device it presents (`__dlpack_device__`).
    device: Device,
}

impl DLPackTensor {
    /// Imports `obj` (an object with `__dlpack__`, or a bare DLPack capsule) as `options` ask.
    pub fn extract_with(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<Self> {
        crate::ready(obj.py())?;
        if let Some(r) = options.requirements {
            if !r.align.is_power_of_two() || r.align > 4096 {
                return Err(crate::errors::value_error(format!(
                    "ImportOptions.requirements.align = {} is out of range: it must be a power \
                     of two from 1 to 4096 (bytes)",
                    r.align
                )));
            }
        }
        let (device, copy) = (options.device, options.copy);
        import::take(obj, device, copy, options.requirements, |held| {
            Ok(Self::from_held(held, device))
        })
    }

    /// A held tensor, presenting the device `requested` asked for (see `Held::presented`).
    fn from_held(held: Held, requested: Option<Device>) -> Self {
        let device = held.presented(requested);
        Self { held, device }
    }

    /// The tensor: shape, strides, dtype, device and typed access to host memory
    /// (`tensor().view()`, `to_vec`).
    pub fn tensor(&self) -> &Tensor {
        self.held.tensor()
    }

    /// The tensor, owned.
    pub fn into_tensor(self) -> Tensor {
        self.held.into_tensor()
    }

    /// The device it presents (`__dlpack_device__`): the memory's own, except pinned or managed
    /// memory, which presents as `cpu` unless the import named its class.
    pub fn device(&self) -> Device {
        self.device
    }
}

impl From<Tensor> for DLPackTensor {
    /// A dlport tensor (made by `Tensor::from_vec`, a backend's `allocate`, or taken from
    /// another `DLPackTensor`) to return to Python.
    fn from(tensor: Tensor) -> Self {
        Self::from_held(Held::from_tensor(tensor), None)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for DLPackTensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Self::extract_with(&obj, &ImportOptions::default())
    }
}

impl<'py> IntoPyObject<'py> for DLPackTensor {
    type Target = PyTensor;
    type Output = Bound<'py, PyTensor>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTensor>> {
        crate::ready(py)?;
        Bound::new(py, PyTensor::with_device(self.held, self.device))
    }
}

impl From<DLPackTensor> for PyTensor {
    fn from(t: DLPackTensor) -> Self {
        PyTensor::with_device(t.held, t.device)
    }
}
