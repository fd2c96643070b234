//! `dlport.pjrt`: PJRT plugins from Python. Load a plugin by path (`pjrt_load`, which
//! registers its client in the package's registry), list its devices, make a PJRT buffer from
//! any DLPack producer (`PjrtClient.from_dlpack`), export a buffer to any consumer
//! (`__dlpack__`, `__dlpack_device__`), and run StableHLO on buffers (`PjrtClient.compile`,
//! `PjrtExecutable.execute`). Arguments are parsed here as for every other class (`args`);
//! every decision is the registry's (`adapter::registry`: `Registry::decide_on` for the
//! client's backend on import, `adapter::export` on export); the mechanisms are
//! dlport-native's `pjrt` room.

use dlport_core::abi::DeviceType;
use dlport_core::{CopyPolicy, ExportOptions, ImportOptions};
use dlport_native::interop::pjrt::register_default;
use dlport_native::pjrt::{ClientOptions, PjrtBuffer, PjrtClient, PjrtExecutable, PjrtPlugin};
use pyo3::prelude::*;

use crate::adapter::{self, Failure};
use crate::{args, capsule, import};

/// A PJRT client: a plugin's devices as DLPack devices.
#[pyclass(module = "dlport.pjrt", name = "PjrtClient", frozen)]
pub struct PyPjrtClient {
    client: PjrtClient,
}

/// A PJRT buffer held by dlport: a DLPack producer (`__dlpack__`, `__dlpack_device__`).
#[pyclass(module = "dlport.pjrt", name = "PjrtBuffer", frozen)]
pub struct PyPjrtBuffer {
    buffer: PjrtBuffer,
}

/// A compiled StableHLO program.
#[pyclass(module = "dlport.pjrt", name = "PjrtExecutable", frozen)]
pub struct PyPjrtExecutable {
    exe: PjrtExecutable,
}

/// Loads the PJRT plugin library at `path` (`GetPjrtApi`; its table checked, initialized once
/// per process), creates a client and registers it as a backend of the package's registry
/// (`pjrt:<platform>`; a later client of the same platform takes its place), so that a tensor
/// on its device type resolves to it in `dlport.from_dlpack`. `device_type` (a DLPack code)
/// names the device type of the plugin's memory (without it: the platform table's, kDLExtDev
/// for an unknown name). Loading runs the library's code: load only plugins you trust.
#[pyfunction]
#[pyo3(signature = (path, /, *, device_type=None))]
pub fn pjrt_load(py: Python<'_>, path: &str, device_type: Option<i32>) -> PyResult<PyPjrtClient> {
    let client = py.detach(|| {
        let plugin = PjrtPlugin::load(path)?;
        let options = ClientOptions {
            device_type: device_type.map(DeviceType),
            ..ClientOptions::default()
        };
        let client = PjrtClient::create(&plugin, &options)?;
        // The package's registry is the process-wide default (`adapter::registry`).
        adapter::registry();
        register_default(&client)?;
        Ok::<_, dlport_core::Error>(client)
    });
    Ok(PyPjrtClient {
        client: client.map_err(Failure::from)?,
    })
}

impl PyPjrtClient {
    /// The Python value of a client made elsewhere (`dlport.jax.client`: JAX's own, borrowed).
    pub(crate) fn of(client: PjrtClient) -> Self {
        Self { client }
    }
}

#[pymethods]
impl PyPjrtClient {
    /// The platform name (`cpu`, `cuda`, `xpu`, …).
    #[getter]
    fn platform(&self) -> &'static str {
        self.client.platform()
    }

    /// The DLPack device type of the platform's memory.
    #[getter]
    fn device_type(&self) -> i32 {
        self.client.device_type().0
    }

    /// The addressable devices, as `(device_type, device_id)` pairs.
    #[getter]
    fn devices(&self) -> Vec<(i32, i32)> {
        self.client
            .devices()
            .iter()
            .map(|d| (d.device.device_type.0, d.device.device_id))
            .collect()
    }

    /// What the plugin lacks of what dlport uses, one line per function.
    #[getter]
    fn missing(&self) -> Vec<String> {
        self.client.plugin().missing()
    }

    /// The plugin's PJRT API version, `(major, minor)`.
    #[getter]
    fn api_version(&self) -> (i32, i32) {
        self.client.plugin().api_version()
    }

    /// The plugin's `PJRT_Api.struct_size` (bytes: a newer minor has more functions).
    #[getter]
    fn struct_size(&self) -> usize {
        self.client.plugin().struct_size()
    }

    /// The extensions the plugin lists, as `(type, name or None for a type newer than the
    /// header dlport reads, struct_size)`.
    #[getter]
    fn extensions(&self) -> Vec<(i32, Option<&'static str>, usize)> {
        self.client.plugin().extensions()
    }

    /// A PJRT buffer of any DLPack producer's tensor, as the package's registry decides for
    /// this client: a view of its memory when the plugin can view it (a dtype PJRT has,
    /// row-major, a 64-byte-aligned non-NULL first element, not read-only, on this platform's
    /// device type, or host memory on a CPU platform); else one copy of host memory when
    /// `copy` allows (`None`: when needed; `True`: always; `False`: never, raising
    /// `BufferError` naming the reason), under the allocation limit in force. `device` is the
    /// target device id.
    #[pyo3(name = "from_dlpack", signature = (x, /, *, copy=None, device=None))]
    fn buffer_from_dlpack(
        &self,
        x: &Bound<'_, PyAny>,
        copy: Option<&Bound<'_, PyAny>>,
        device: Option<i32>,
    ) -> PyResult<PyPjrtBuffer> {
        let policy = CopyPolicy::from_copy(args::copy(copy)?);
        // The producer's tensor, held by dlport without a copy, then lent to PJRT by a
        // counted reference: released when PJRT's view of it is destroyed.
        let managed = import::take(
            x,
            &ImportOptions {
                copy: CopyPolicy::Never,
                ..ImportOptions::default()
            },
            |tensor| {
                adapter::registry()
                    .to_dlpack(&tensor, &ExportOptions::default())
                    .map_err(|e| Failure::from(e).into())
            },
        )?;
        let options = ImportOptions {
            copy: policy,
            ..ImportOptions::default()
        };
        let buffer = x
            .py()
            .detach(|| {
                self.client
                    .import_with(adapter::registry(), managed, &options, device)
            })
            .map_err(Failure::from)?;
        Ok(PyPjrtBuffer { buffer })
    }

    /// Compiles a StableHLO program given as MLIR text, for one device.
    fn compile(&self, py: Python<'_>, mlir: &str) -> PyResult<PyPjrtExecutable> {
        let exe = py.detach(|| self.client.compile_mlir(mlir));
        Ok(PyPjrtExecutable {
            exe: exe.map_err(Failure::from)?,
        })
    }
}

#[pymethods]
impl PyPjrtExecutable {
    /// Runs the program on `args` (buffers of the same client), no input donated; returns the
    /// outputs as buffers.
    #[pyo3(signature = (*args))]
    fn execute(
        &self,
        py: Python<'_>,
        args: Vec<PyRef<'_, PyPjrtBuffer>>,
    ) -> PyResult<Vec<PyPjrtBuffer>> {
        let buffers: Vec<&PjrtBuffer> = args.iter().map(|b| &b.buffer).collect();
        let outs = py
            .detach(|| self.exe.execute(&buffers))
            .map_err(Failure::from)?;
        Ok(outs
            .into_iter()
            .map(|buffer| PyPjrtBuffer { buffer })
            .collect())
    }
}

#[pymethods]
impl PyPjrtBuffer {
    /// DLPack export by the package's registry, with the arguments every `__dlpack__` of
    /// dlport takes and the same answers: without a copy an external reference to the buffer,
    /// held until the consumer releases it; `max_version` >= (1, 0) gives the versioned form;
    /// `stream` is checked and handed off by DLPack's rules for the buffer's device;
    /// `dl_device` and `copy` copy where asked and allowed (a host buffer is `kDLCPU`).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = args::export_options(stream, max_version, dl_device, copy)?;
        let m = py
            .detach(|| {
                let t = self.buffer.to_tensor()?;
                adapter::export(&t, t.device(), &options)
            })
            .map_err(PyErr::from)?;
        capsule::wrap(py, m.into_raw())
    }

    /// `(device_type, device_id)` of the buffer's memory.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        self.device()
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> PyResult<Vec<i64>> {
        Ok(self.buffer.info().map_err(Failure::from)?.shape)
    }

    /// The element type, as dlport names it (`float32`).
    #[getter]
    fn dtype(&self) -> PyResult<String> {
        Ok(self.buffer.info().map_err(Failure::from)?.dtype.to_string())
    }

    /// The address of the buffer's memory (`PJRT_Buffer_OpaqueDeviceMemoryDataPointer`,
    /// under an external reference held for the call).
    #[getter]
    fn data_ptr(&self, py: Python<'_>) -> PyResult<usize> {
        let t = py
            .detach(|| self.buffer.to_tensor())
            .map_err(Failure::from)?;
        let view = t.view().map_err(Failure::from)?;
        let view = view.tensor_ref();
        Ok(view.data() as usize + view.byte_offset() as usize)
    }

    /// The `PJRT_Buffer*`, for calls through the plugin's own C API (valid while this object
    /// lives).
    #[getter]
    fn raw(&self) -> usize {
        self.buffer.as_raw() as usize
    }
}

impl PyPjrtBuffer {
    fn device(&self) -> PyResult<(i32, i32)> {
        let d = self.buffer.info().map_err(Failure::from)?.device;
        Ok((d.device_type.0, d.device_id))
    }
}

/// Adds the PJRT classes and `pjrt_load` to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPjrtClient>()?;
    m.add_class::<PyPjrtBuffer>()?;
    m.add_class::<PyPjrtExecutable>()?;
    m.add_function(wrap_pyfunction!(pjrt_load, m)?)?;
    Ok(())
}
