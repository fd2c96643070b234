//! Tensors shared with another process on the same machine (dlport-native's `share`):
//! `dlport.share`, `dlport.Shared` and `dlport.open_shared`.
//!
//! A tensor travels as a descriptor (bytes) plus file descriptors: over a Unix stream socket
//! (`Shared.send` / `Shared.recv`, `SCM_RIGHTS`) or through a transport of the caller's own
//! (`Shared.descriptor`, `Shared.fds`, `open_shared`). Linux only in this release: elsewhere
//! every entry raises `BufferError`, naming the platform.
//!
//! Errors: what the data cannot do as asked (`copy=False` on memory that needs a copy, device
//! memory without a share path) is `BufferError`, as everywhere in the package; a malformed
//! descriptor, a wrong number of fds, an fd that is not a sealed memfd or a READ_ONLY descriptor
//! whose memfd is not write-sealed is `ValueError` (a bad argument); a failed `sendmsg`/`recvmsg` is `OSError`. Each carries the core's message and
//! `code`.

use pyo3::prelude::*;

use crate::PyTensor;
use crate::adapter::Failure;
#[cfg(unix)]
use crate::adapter::Kind;
#[cfg(unix)]
use crate::import;

/// A tensor ready for another process: its descriptor and the fds that travel with it. The fds
/// close when it is garbage-collected; the memory lives while any process maps it.
#[pyclass(module = "dlport", name = "Shared", frozen)]
pub struct PyShared {
    #[cfg(unix)]
    inner: dlport_native::share::Shared,
}

#[cfg(unix)]
mod imp {
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

    use dlport_native::share::Descriptor;
    use pyo3::exceptions::PyOSError;
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyList};

    use super::{Failure, Kind, PyShared, PyTensor, import, io};
    use crate::capsule::type_name;

    /// The core's `BackendError::Unsupported` and `AllocationFailed` codes, and `Failed` (an
    /// operating-system call).
    const UNSUPPORTED: u32 = 28;
    const ALLOCATION_FAILED: u32 = 29;
    const OS_FAILED: u32 = 32;

    /// An error about the descriptor or the fds handed in: `ValueError` (bad argument values),
    /// except what the platform cannot do (`BufferError`) and a failed allocation.
    fn argument_error(f: Failure) -> PyErr {
        match f.code {
            UNSUPPORTED | ALLOCATION_FAILED => f.into(),
            _ => Failure {
                kind: Kind::Value,
                ..f
            }
            .into(),
        }
    }

    /// An error of `send`/`recv`: a failed socket call is `OSError`; the rest as
    /// [`argument_error`].
    fn socket_error(f: Failure) -> PyErr {
        if f.code != OS_FAILED {
            return argument_error(f);
        }
        let err = PyOSError::new_err(f.message);
        Python::attach(|py| {
            let _ = err.value(py).setattr("code", f.code);
        });
        err
    }

    /// `sock.fileno()`, checked to be a descriptor number.
    fn fileno(sock: &Bound<'_, PyAny>) -> PyResult<RawFd> {
        let Some(f) = sock.getattr_opt("fileno")? else {
            return Err(crate::errors::type_error(format!(
                "expected a socket.socket (AF_UNIX, SOCK_STREAM), got {}",
                type_name(sock)
            )));
        };
        let fd: RawFd = f.call0()?.extract()?;
        if fd < 0 {
            return Err(crate::errors::value_error(format!(
                "the socket's fileno() is {fd}: the socket is closed"
            )));
        }
        Ok(fd)
    }

    /// Borrows fd numbers the caller says are open (checked `>= 0` here; native checks that
    /// each is open, a sealed memfd and long enough before mapping anything).
    fn borrow_fds(fds: &[RawFd]) -> PyResult<Vec<BorrowedFd<'_>>> {
        fds.iter()
            .map(|&fd| {
                if fd < 0 {
                    return Err(crate::errors::value_error(format!(
                        "fds contains {fd}: a file descriptor is a number >= 0"
                    )));
                }
                // SAFETY: `fd` is not -1. It is borrowed only for the call (the vector lives
                // in the caller's frame): the caller passes fds it keeps open meanwhile (the
                // documented contract); a number that is not open is only read by `fcntl`,
                // which reports EBADF, and a live one is only inspected and `dup`ed.
                Ok(unsafe { BorrowedFd::borrow_raw(fd) })
            })
            .collect()
    }

    /// The held tensor of `x`: a `dlport.Tensor` itself, else imported by `from_dlpack`.
    fn tensor_of(x: &Bound<'_, PyAny>) -> PyResult<Py<PyTensor>> {
        if let Ok(t) = x.cast::<PyTensor>() {
            return Ok(t.clone().unbind());
        }
        Ok(import::from_dlpack(x, None, None, None, None, None)?.unbind())
    }

    pub(super) fn share(
        x: &Bound<'_, PyAny>,
        copy: Option<bool>,
        read_only: bool,
    ) -> PyResult<PyShared> {
        let py = x.py();
        let t = tensor_of(x)?;
        let tensor = t.get().tensor();
        // A copy into the memfd can be large: let other threads run meanwhile.
        let inner = py.detach(|| io::share(tensor, copy, read_only))?;
        Ok(PyShared { inner })
    }

    pub(super) fn open_shared(descriptor: &[u8], fds: Vec<RawFd>) -> PyResult<PyTensor> {
        let d = Descriptor::from_bytes(descriptor).map_err(|e| argument_error(e.into()))?;
        let borrowed = borrow_fds(&fds)?;
        let tensor = io::open_shared(&d, &borrowed).map_err(argument_error)?;
        Ok(PyTensor::new(tensor, None))
    }

    impl PyShared {
        pub(super) fn descriptor_bytes<'py>(
            &self,
            py: Python<'py>,
        ) -> PyResult<Bound<'py, PyBytes>> {
            let bytes = self
                .inner
                .descriptor()
                .to_bytes()
                .map_err(|e| argument_error(e.into()))?;
            Ok(PyBytes::new(py, &bytes))
        }

        pub(super) fn fd_list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
            PyList::new(py, self.inner.fds().iter().map(AsRawFd::as_raw_fd))
        }

        pub(super) fn is_copy(&self) -> bool {
            self.inner.is_copy()
        }

        pub(super) fn open_here(&self) -> PyResult<PyTensor> {
            let fds: Vec<BorrowedFd<'_>> = self.inner.fds().iter().map(AsFd::as_fd).collect();
            let tensor = io::open_shared(self.inner.descriptor(), &fds).map_err(argument_error)?;
            Ok(PyTensor::new(tensor, None))
        }

        pub(super) fn send_to(&self, sock: &Bound<'_, PyAny>) -> PyResult<()> {
            let fd = fileno(sock)?;
            // SAFETY: `fd` is >= 0 and is `sock`'s, which this call holds a reference to; the
            // borrow ends with the call (a socket closed by another thread meanwhile makes
            // `sendmsg` fail with EBADF, an OSError).
            let socket = unsafe { BorrowedFd::borrow_raw(fd) };
            let inner = &self.inner;
            sock.py()
                .detach(|| inner.send(&socket).map_err(Failure::from))
                .map_err(socket_error)
        }

        pub(super) fn recv_from(sock: &Bound<'_, PyAny>) -> PyResult<Self> {
            let fd = fileno(sock)?;
            // SAFETY: as in `send`.
            let socket = unsafe { BorrowedFd::borrow_raw(fd) };
            // Blocks until the peer sends: other threads run meanwhile.
            let inner = sock
                .py()
                .detach(|| dlport_native::share::Shared::recv(&socket).map_err(Failure::from))
                .map_err(socket_error)?;
            Ok(Self { inner })
        }

        pub(super) fn repr(&self) -> String {
            let d = self.inner.descriptor();
            format!(
                "dlport.Shared(kind={:?}, shape={:?}, dtype={}, device={}, fds={:?})",
                d.kind,
                d.shape,
                d.dtype,
                d.device,
                self.inner
                    .fds()
                    .iter()
                    .map(AsRawFd::as_raw_fd)
                    .collect::<Vec<_>>()
            )
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyList};

    use super::{Failure, PyShared, PyTensor};
    use crate::adapter::Kind;

    fn unsupported() -> PyErr {
        Failure::new(
            Kind::Buffer,
            "sharing tensors between processes is Linux only in this release (memfd seals and \
             SCM_RIGHTS as Linux has them)",
        )
        .into()
    }

    pub(super) fn share(
        _x: &Bound<'_, PyAny>,
        _copy: Option<bool>,
        _read_only: bool,
    ) -> PyResult<PyShared> {
        Err(unsupported())
    }

    pub(super) fn open_shared(_descriptor: &[u8], _fds: Vec<i64>) -> PyResult<PyTensor> {
        Err(unsupported())
    }

    impl PyShared {
        pub(super) fn descriptor_bytes<'py>(
            &self,
            _py: Python<'py>,
        ) -> PyResult<Bound<'py, PyBytes>> {
            Err(unsupported())
        }
        pub(super) fn fd_list<'py>(&self, _py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
            Err(unsupported())
        }
        pub(super) fn is_copy(&self) -> bool {
            false
        }
        pub(super) fn open_here(&self) -> PyResult<PyTensor> {
            Err(unsupported())
        }
        pub(super) fn send_to(&self, _sock: &Bound<'_, PyAny>) -> PyResult<()> {
            Err(unsupported())
        }
        pub(super) fn recv_from(_sock: &Bound<'_, PyAny>) -> PyResult<Self> {
            Err(unsupported())
        }
        pub(super) fn repr(&self) -> String {
            "dlport.Shared()".into()
        }
    }
}

/// Shares `x` (any DLPack producer, or a `dlport.Tensor`) with other processes on this
/// machine. Host memory travels in a sealed memfd: dlport's own (a tensor opened from a
/// descriptor) without a copy, anything else copied into a new one as `copy` allows (`None`:
/// if needed; `False`: never, else `BufferError`; `True`: always). CUDA memory travels through
/// CUDA IPC, kept alive until every peer let go. `read_only`: the peers get it READ_ONLY, in
/// memory no process that receives it can write, whatever it does with the fd (reopening it
/// through `/proc`, `mmap`, `ftruncate`, `pwrite`): the memfd is sealed against writes
/// (`F_SEAL_FUTURE_WRITE`, Linux 5.1 or later; the producer's own mapping keeps writing), or the
/// share is a copy sealed `F_SEAL_WRITE` (memory that is not one of dlport's memfds, a memfd
/// shared writable before, an older kernel), which `copy=False` refuses with `BufferError`.
/// CUDA memory cannot be shared read-only (CUDA IPC maps it writable): `BufferError`.
#[pyfunction]
#[pyo3(
    signature = (x, /, *, copy=None, read_only=None),
    text_signature = "(x, /, *, copy=None, read_only=False)"
)]
pub fn share(
    x: &Bound<'_, PyAny>,
    copy: Option<&Bound<'_, PyAny>>,
    read_only: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyShared> {
    let read_only = crate::args::flag(read_only, "read_only")?;
    imp::share(x, crate::args::copy(copy)?, read_only)
}

/// Opens a shared tensor in this process without a copy: `descriptor` is `Shared.descriptor`
/// from the sharing process, `fds` the file descriptors that came with it (borrowed: they stay
/// the caller's, and may be closed once this returns).
#[pyfunction]
#[pyo3(signature = (descriptor, fds))]
pub fn open_shared(descriptor: &[u8], fds: Vec<i64>) -> PyResult<PyTensor> {
    #[cfg(unix)]
    {
        let fds = fds
            .into_iter()
            .map(|fd| {
                std::os::fd::RawFd::try_from(fd).map_err(|_| {
                    crate::errors::value_error(format!(
                        "fds contains {fd}: not a file descriptor number"
                    ))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        imp::open_shared(descriptor, fds)
    }
    #[cfg(not(unix))]
    imp::open_shared(descriptor, fds)
}

#[pymethods]
impl PyShared {
    /// The descriptor's bytes (a few dozen; at most 1144): dtype, shape, strides, device and
    /// the kind of handle. Send them with `fds` to the opening process.
    #[getter]
    fn descriptor<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        self.descriptor_bytes(py)
    }

    /// The file descriptors that travel with the descriptor, in order. Borrowed: they are open
    /// while this object lives (and closed with it).
    #[getter]
    fn fds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        self.fd_list(py)
    }

    /// Whether `share` copied the memory into a new memfd (memory that is not one of dlport's
    /// memfds, or one whose seals do not allow the share as asked): the peers then see a
    /// snapshot, not the producer's later writes. False for a received `Shared`.
    #[getter]
    fn copied(&self) -> bool {
        self.is_copy()
    }

    /// Opens the tensor in this process (a new mapping of the same memory).
    fn open(&self) -> PyResult<PyTensor> {
        self.open_here()
    }

    /// Sends the descriptor and its fds over a connected Unix stream socket (a
    /// `socket.socket` with AF_UNIX, SOCK_STREAM; SCM_RIGHTS). The fds stay open here too.
    fn send(&self, sock: &Bound<'_, PyAny>) -> PyResult<()> {
        self.send_to(sock)
    }

    /// Receives one descriptor and its fds from a connected Unix stream socket (blocking).
    #[staticmethod]
    fn recv(sock: &Bound<'_, PyAny>) -> PyResult<Self> {
        Self::recv_from(sock)
    }

    fn __repr__(&self) -> String {
        self.repr()
    }
}

/// The two calls of dlport-native's `share` the package makes, over the registry's tensors.
#[cfg(unix)]
mod io {
    use dlport_core::{CopyPolicy, ExportOptions, ImportOptions, Tensor};

    use crate::adapter::{self, Failure};

    /// Shares a tensor with other processes (dlport-native's `share`): host memory through a
    /// sealed memfd (dlport's own memfds, such as an opened tensor's, without a copy; anything else
    /// copied into a new one as the array-API `copy` allows), CUDA memory through CUDA IPC. The
    /// tensor is exported as a reference first, so its memory lives as long as the share needs it.
    pub fn share(
        t: &Tensor,
        copy: Option<bool>,
        read_only: bool,
    ) -> Result<dlport_native::share::Shared, Failure> {
        let exported = adapter::registry().to_dlpack(
            t,
            &ExportOptions {
                dl_device: Some(t.device()),
                ..ExportOptions::versioned()
            },
        )?;
        let options = dlport_native::share::ShareOptions {
            copy: CopyPolicy::from_copy(copy),
            read_only,
            max_alloc: None,
        };
        Ok(dlport_native::share::share_managed(exported, &options)?)
    }

    /// Opens a shared tensor in this process (dlport-native's `open`: zero copy, the fds are
    /// duplicated) and imports it onto the registry as a view.
    pub fn open_shared(
        descriptor: &dlport_native::share::Descriptor,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<Tensor, Failure> {
        let opened = dlport_native::share::open(descriptor, fds)?;
        let options = ImportOptions {
            copy: CopyPolicy::Never,
            ..ImportOptions::default()
        };
        Ok(adapter::registry().from_dlpack(opened, &options)?)
    }
}
