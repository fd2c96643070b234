//! The DLPack 1.3 C exchange API (`dlpack.h`: `DLPackExchangeAPI`, declared in
//! `dlport_core::abi`): dlport's static table as a producer, and finding and calling another
//! type's table as a consumer.
//!
//! Every entry that touches Python attaches to the interpreter (the caller normally is: then
//! attaching costs a thread-local read), catches panics, and reports failure as -1 with a
//! Python exception set, as the header asks. None of them synchronises: dlport's own device
//! work is synchronous, so the current work stream is the default one (NULL).

use std::ffi::{CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{NonNull, null_mut};
use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};

use dlport_core::abi::{
    DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackExchangeAPI,
    DLPackExchangeAPIHeader, DLPackSetError, DLPackVersion, DLTensor, DeviceType,
    FLAG_IS_SUBBYTE_TYPE_PADDED, RawManaged,
};
use dlport_core::{CopyPolicy, ImportOptions};
use pyo3::exceptions::{PyRuntimeError, PySystemError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::adapter::{self, Failure, Kind};
use crate::cpython;
use crate::errors::buffer_error;
use crate::tensor::PyTensor;

/// dlport's table. A static: the header requires it to live as long as the process.
struct Table(DLPackExchangeAPI);

// SAFETY: immutable after compilation; `prev_api` is NULL and never written.
unsafe impl Sync for Table {}

static API: Table = Table(DLPackExchangeAPI {
    header: DLPackExchangeAPIHeader {
        version: DLPackVersion::new(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION),
        prev_api: null_mut(),
    },
    managed_tensor_allocator: Some(allocator),
    managed_tensor_from_py_object_no_sync: Some(from_py_object),
    managed_tensor_to_py_object_no_sync: Some(to_py_object),
    dltensor_from_py_object_no_sync: Some(dltensor_from_py_object),
    current_work_stream: Some(current_work_stream),
});

const CAPSULE_NAME: &std::ffi::CStr = c"dlpack_exchange_api";

/// The value of `Tensor.__dlpack_c_exchange_api__`: a capsule named "dlpack_exchange_api" over
/// dlport's static table.
pub fn api_capsule(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let table = (&raw const API.0).cast_mut().cast::<c_void>();
    // SAFETY: a non-NULL pointer to a static, a static name, no destructor.
    let capsule = unsafe { ffi::PyCapsule_New(table, CAPSULE_NAME.as_ptr(), None) };
    if capsule.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference we own.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// Runs an entry that touches Python: attaches, catches panics, turns an error into -1 with
/// the Python exception set.
fn entry(f: impl FnOnce(Python<'_>) -> PyResult<()>) -> c_int {
    Python::attach(|py| match catch_unwind(AssertUnwindSafe(|| f(py))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            e.restore(py);
            -1
        }
        Err(_) => {
            PyRuntimeError::new_err("dlport panicked in the DLPack exchange API").restore(py);
            -1
        }
    })
}

/// The `dlport.Tensor` behind an object pointer, or a `TypeError`.
///
/// # Safety
/// `py_obj` is NULL or a live Python object that stays alive while `py` is attached.
unsafe fn tensor_of<'a, 'py>(
    py: Python<'py>,
    py_obj: *mut c_void,
) -> PyResult<Borrowed<'a, 'py, PyTensor>> {
    if py_obj.is_null() {
        return Err(crate::errors::value_error("py_object is NULL"));
    }
    // SAFETY: a live object (contract), borrowed for the call.
    let any = unsafe { Borrowed::from_ptr(py, py_obj.cast::<ffi::PyObject>()) };
    any.cast::<PyTensor>().map_err(|_| {
        crate::errors::type_error(format!(
            "dlport's exchange API takes dlport.Tensor objects, got {}",
            crate::capsule::type_name(&any)
        ))
    })
}

/// `managed_tensor_from_py_object_no_sync`: a versioned export of a `dlport.Tensor` (a counted
/// reference to its memory, on the device it presents), owned by the caller.
///
/// # Safety
/// Called attached to the interpreter with a live object and a writable `out`.
unsafe extern "C" fn from_py_object(
    py_obj: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    entry(|py| {
        let out = NonNull::new(out).ok_or_else(|| crate::errors::value_error("out is NULL"))?;
        // SAFETY: forwarded contract.
        let t = unsafe { tensor_of(py, py_obj) }?;
        let RawManaged::Versioned(p) = t.get().export_versioned()? else {
            return Err(PySystemError::new_err(
                "a versioned export came back legacy",
            ));
        };
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(p.as_ptr()) };
        Ok(())
    })
}

/// `managed_tensor_to_py_object_no_sync`: a new `dlport.Tensor` viewing the tensor, which it
/// owns from then on. On failure the tensor stays the caller's: everything that can refuse it
/// (version, layout, device) is checked before ownership is taken, so a caller that releases
/// it after a failure (as tvm-ffi does) cannot release it twice.
///
/// # Safety
/// Called attached to the interpreter; `tensor` is an owned managed tensor handed over on
/// success; `out` writable.
unsafe extern "C" fn to_py_object(
    tensor: *mut DLManagedTensorVersioned,
    out: *mut *mut c_void,
) -> c_int {
    entry(|py| {
        let out = NonNull::new(out).ok_or_else(|| crate::errors::value_error("out is NULL"))?;
        // The class is prepared before its first instance (an extension's table can be asked
        // before the extension made a tensor itself); nothing is taken yet.
        crate::ready::ready(py)?;
        // SAFETY: a live tensor (contract); nothing is taken.
        let raw = unsafe { adapter::check_view(tensor) }.map_err(not_taken)?;
        let view_only = ImportOptions {
            copy: CopyPolicy::Never,
            ..ImportOptions::default()
        };
        // SAFETY: owned and handed over (contract); check_view showed it imports as a view.
        let imported = unsafe { adapter::import(raw, &view_only, false) }?;
        // Were the object allocation to fail, this handle keeps the tensor alive for good: a
        // leak, never a deleter call the caller does not expect.
        let keep = imported.clone();
        let obj =
            Py::new(py, PyTensor::new(imported, None)).inspect_err(|_| std::mem::forget(keep))?;
        // SAFETY: writable (contract); the new reference goes to the caller.
        unsafe { out.as_ptr().write(obj.into_ptr().cast()) };
        Ok(())
    })
}

/// A refusal of `managed_tensor_to_py_object_no_sync` before anything was taken: says so, in
/// place of what core's message says of the entries that take what they refuse ("the tensor
/// was released"), so that the caller releases it, once.
fn not_taken(f: Failure) -> Failure {
    let message = f.message.replace("the tensor was released; ", "");
    Failure {
        message: format!(
            "{message} (the tensor was not taken: it is still the caller's, to release once)"
        ),
        ..f
    }
}

/// `dltensor_from_py_object_no_sync`: lends the tensor's own `DLTensor` fields (its shape and
/// strides arrays live as long as the object). A bare `DLTensor` has no flags, so a read-only or
/// padded sub-byte tensor is refused (`BufferError`) rather than lent without them.
///
/// # Safety
/// Called attached to the interpreter with a live object and a writable `out`.
unsafe extern "C" fn dltensor_from_py_object(py_obj: *mut c_void, out: *mut DLTensor) -> c_int {
    entry(|py| {
        let out = NonNull::new(out).ok_or_else(|| crate::errors::value_error("out is NULL"))?;
        // SAFETY: forwarded contract.
        let t = unsafe { tensor_of(py, py_obj) }?;
        let (h, device) = (t.get().tensor(), t.get().device());
        if h.is_read_only() || h.flags() & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
            return Err(buffer_error(
                "the tensor is read-only or has padded sub-byte elements, which a bare DLTensor \
                 cannot say: take a managed tensor (managed_tensor_from_py_object_no_sync)",
            ));
        }
        let ndim = h.shape().len();
        let (shape, strides) = if ndim == 0 {
            (null_mut(), null_mut())
        } else {
            (
                h.shape().as_ptr().cast_mut(),
                h.strides().as_ptr().cast_mut(),
            )
        };
        let lent = DLTensor {
            data: h.buffer().ptr(),
            device,
            ndim: ndim as i32,
            dtype: h.dtype(),
            shape,
            strides,
            byte_offset: h.byte_offset(),
        };
        // SAFETY: writable (contract).
        unsafe { out.as_ptr().write(lent) };
        Ok(())
    })
}

/// `current_work_stream`: dlport's device work is synchronous, so its stream is the default
/// one, NULL, for every device.
///
/// # Safety
/// `out` is writable or NULL.
unsafe extern "C" fn current_work_stream(_: DeviceType, _: i32, out: *mut *mut c_void) -> c_int {
    if out.is_null() {
        return entry(|_| Err(crate::errors::value_error("out_current_stream is NULL")));
    }
    // SAFETY: writable (contract).
    unsafe { out.write(null_mut()) };
    0
}

/// `managed_tensor_allocator`: a zeroed compact tensor like `prototype` (its dtype, shape and
/// device), from the backend serving that device. Errors go to `set_error` with the Python
/// exception's name as the kind; it touches no Python itself.
///
/// # Safety
/// `prototype` is NULL or a readable DLTensor whose `shape` holds `ndim` extents; `out` is
/// writable; `set_error` is NULL or callable with `error_ctx`.
unsafe extern "C" fn allocator(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<DLPackSetError>,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded contract.
        unsafe { allocate_like(prototype, out) }
    }))
    .unwrap_or_else(|_| {
        Err(Failure::new(
            Kind::Buffer,
            "dlport panicked in managed_tensor_allocator",
        ))
    });
    let Err(failure) = outcome else { return 0 };
    if let Some(set_error) = set_error {
        let kind = match failure.kind {
            Kind::Buffer => c"BufferError",
            Kind::Value => c"ValueError",
            Kind::Type => c"TypeError",
            Kind::Memory => c"MemoryError",
        };
        let message = CString::new(failure.message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: callable with its context (contract); both strings live across the call.
        unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
    }
    -1
}

/// The allocator's work.
///
/// # Safety
/// As [`allocator`].
unsafe fn allocate_like(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
) -> Result<(), Failure> {
    let null = |what: &str| Failure::new(Kind::Value, format!("{what} is NULL"));
    if out.is_null() {
        return Err(null("out"));
    }
    // SAFETY: NULL or readable (contract).
    let proto = unsafe { prototype.as_ref() }.ok_or_else(|| null("prototype"))?;
    let ndim = adapter::check_ndim(proto.ndim)?;
    let shape: &[i64] = if ndim == 0 {
        &[]
    } else if proto.shape.is_null() {
        return Err(null("prototype.shape"));
    } else {
        // SAFETY: `ndim` readable extents (contract), ndim checked against MAX_NDIM.
        unsafe { std::slice::from_raw_parts(proto.shape, ndim) }
    };
    let RawManaged::Versioned(p) = adapter::allocate(proto.device, proto.dtype, shape)? else {
        return Err(Failure::new(
            Kind::Buffer,
            "a versioned export came back legacy",
        ));
    };
    // SAFETY: writable (contract).
    unsafe { out.write(p.as_ptr()) };
    Ok(())
}

/// How `from_dlpack` takes a tensor from objects of one type.
#[derive(Clone, Copy, Debug)]
pub enum Route {
    /// Through the type's DLPack exchange API.
    Exchange(&'static DLPackExchangeAPI),
    /// Through `__dlpack__`; `ask_device`: whether `__dlpack_device__` can add anything to the
    /// capsule's device.
    Dunder {
        /// Ask `__dlpack_device__` first (every type but NumPy's host-only `ndarray`).
        ask_device: bool,
        /// Immutable arrays (`jax.Array`): READ_ONLY whatever the capsule says (JAX < 0.12's has no flags).
        immutable: bool,
    },
}

/// The route for a producer type.
///
/// The exchange API, as a consumer finds it: `type.__dlpack_c_exchange_api__`, a capsule named
/// "dlpack_exchange_api" over a table of major version 1 (walking `prev_api` for one) whose
/// `managed_tensor_from_py_object_no_sync` is set; anything else (no attribute, another name,
/// another major version) means `__dlpack__`. `numpy.ndarray` holds host memory only and its
/// capsule always says `kDLCPU`, so its `__dlpack_device__` (always `(1, 0)`) is not asked.
///
/// Routes are cached in [`ROUTES`], keyed by the type's address and the version tags of the
/// type and its metatype ([`cpython::versions`]). The cache holds no reference: a type lives
/// as long as it would without dlport. A type that is modified (an attribute set or deleted on
/// it, a base or its metaclass) has new tags when next looked up, so its old entry no longer
/// matches and its route is found again; a new type at a dead one's address has other tags.
#[inline]
pub fn route(ty: Borrowed<'_, '_, PyType>) -> PyResult<Route> {
    let versions = cpython::versions(ty);
    let entry = &ROUTES[slot(ty)];
    if versions.is_some()
        && entry.ty.load(Ordering::Relaxed) == ty.as_ptr() as usize
        && Some(entry.versions.load(Ordering::Relaxed)) == versions
    {
        return Ok(decode(entry.code.load(Ordering::Relaxed)));
    }
    route_slow(ty, versions)
}

/// Cached routes: direct-mapped by the type's address (a type whose slot another type took
/// is looked up again).
static ROUTES: [Entry; SLOTS] = [const {
    Entry {
        ty: AtomicUsize::new(0),
        versions: AtomicU64::new(0),
        code: AtomicIsize::new(0),
    }
}; SLOTS];

const SLOTS: usize = 256;

/// One cached route: the type's address, its and its metatype's version tags, and the route's
/// code. Read and written only attached (an abi3 module runs under the GIL), so the three
/// fields always belong together.
struct Entry {
    ty: AtomicUsize,
    versions: AtomicU64,
    code: AtomicIsize,
}

/// The slot of a type's entry (type objects are at least 16-byte aligned).
#[inline]
fn slot(ty: Borrowed<'_, '_, PyType>) -> usize {
    (ty.as_ptr() as usize >> 4) % SLOTS
}

/// [`route`] for a type without a matching entry: looked up, and cached when the type's tags
/// were current before the lookup and are the same after it (a lookup that runs Python code,
/// a descriptor on the metaclass, may modify the type; a type's first lookup gives it its tag,
/// so its second call caches).
#[inline(never)]
fn route_slow(ty: Borrowed<'_, '_, PyType>, before: Option<u64>) -> PyResult<Route> {
    let py = ty.py();
    let code = match ty
        .getattr_opt(pyo3::intern!(py, "__dlpack_c_exchange_api__"))?
        .and_then(|attr| find_table(&attr))
    {
        // torch's table ignores the conjugate and negative bits, the layout, meta, quantized
        // and requires_grad tensors, where its `__dlpack__` refuses them: torch tensors take
        // `__dlpack__`, so that dlport gives exactly torch's own values and refusals.
        Some(_) if is_torch_tensor(&ty) => ASK_DEVICE,
        Some(table) => std::ptr::from_ref(table) as isize,
        None if is_exactly(&ty, &["numpy"], "ndarray") => SKIP_DEVICE,
        // jaxlib's `ArrayImpl` (`jax.Array`; `jaxlib.xla_extension` before `jaxlib._jax`).
        None if is_exactly(&ty, &["jaxlib._jax", "jaxlib.xla_extension"], "ArrayImpl") => IMMUTABLE,
        None => ASK_DEVICE,
    };
    if let Some(versions) = before.filter(|&v| cpython::versions(ty) == Some(v)) {
        let entry = &ROUTES[slot(ty)];
        entry.ty.store(ty.as_ptr() as usize, Ordering::Relaxed);
        entry.versions.store(versions, Ordering::Relaxed);
        entry.code.store(code, Ordering::Relaxed);
    }
    Ok(decode(code))
}

const ASK_DEVICE: isize = 0;
const SKIP_DEVICE: isize = -1;
const IMMUTABLE: isize = -2;

/// A route code back as a route.
#[inline]
fn decode(code: isize) -> Route {
    match code {
        ASK_DEVICE | SKIP_DEVICE | IMMUTABLE => Route::Dunder {
            ask_device: code != SKIP_DEVICE,
            immutable: code == IMMUTABLE,
        },
        // SAFETY: a positive code is the address of a table `find_table` accepted; the header
        // requires tables to live as long as the process.
        address => Route::Exchange(unsafe { &*(address as *const DLPackExchangeAPI) }),
    }
}

/// Exactly the type `qualname` of one of `modules` (not a subclass, which may answer
/// `__dlpack_device__` or export its own way).
fn is_exactly(ty: &Borrowed<'_, '_, PyType>, modules: &[&str], qualname: &str) -> bool {
    let name = |r: PyResult<Bound<'_, pyo3::types::PyString>>| r.map(|s| s.to_string()).ok();
    name(ty.module()).is_some_and(|m| modules.contains(&m.as_str()))
        && name(ty.qualname()).as_deref() == Some(qualname)
}

/// `torch.Tensor` or a subclass: a type whose MRO holds `torch._C.TensorBase`. Looked up once
/// per type (the route is cached), so the check costs nothing per call.
fn is_torch_tensor(ty: &Borrowed<'_, '_, PyType>) -> bool {
    let name = |r: PyResult<Bound<'_, pyo3::types::PyString>>| r.map(|s| s.to_string()).ok();
    ty.mro().iter().any(|t| {
        let Ok(t) = t.cast::<PyType>() else {
            return false;
        };
        name(t.module()).as_deref() == Some("torch._C")
            && name(t.qualname()).as_deref() == Some("TensorBase")
    })
}

/// How many tables `find_table` reads along a `prev_api` chain: DLPack has had one major
/// version with a table, so a real chain holds one or two; a longer one (a cycle, which would
/// otherwise be walked forever, with no Python code running to let Ctrl-C stop it) is not used.
const MAX_CHAIN: usize = 16;

/// The usable table behind an attribute value, if any: the first of major version 1 among the
/// first [`MAX_CHAIN`] tables of its `prev_api` chain. A type without one takes `__dlpack__`.
fn find_table(attr: &Bound<'_, PyAny>) -> Option<&'static DLPackExchangeAPI> {
    if !crate::capsule::is_capsule(attr) {
        return None;
    }
    // SAFETY: a capsule; IsValid never raises.
    if unsafe { ffi::PyCapsule_IsValid(attr.as_ptr(), CAPSULE_NAME.as_ptr()) } != 1 {
        return None;
    }
    // SAFETY: valid with this name: GetPointer returns its pointer without raising.
    let mut header = unsafe { ffi::PyCapsule_GetPointer(attr.as_ptr(), CAPSULE_NAME.as_ptr()) }
        .cast::<DLPackExchangeAPIHeader>();
    for _ in 0..MAX_CHAIN {
        if header.is_null() {
            return None;
        }
        // SAFETY: a table the producer keeps for the process's lifetime; its header is stable.
        let h = unsafe { &*header };
        if h.version.major == DLPACK_MAJOR_VERSION {
            // SAFETY: major version 1: the whole DLPackExchangeAPI follows the header.
            let table = unsafe { &*header.cast::<DLPackExchangeAPI>() };
            return table.managed_tensor_from_py_object_no_sync.map(|_| table);
        }
        header = h.prev_api;
    }
    None
}

/// Exports `obj` through its type's table: the managed tensor its producer made, owned by the
/// caller. Nothing Python-level (`__dlpack__`) is called.
pub fn take_from(api: &DLPackExchangeAPI, obj: &Bound<'_, PyAny>) -> PyResult<RawManaged> {
    let export = api
        .managed_tensor_from_py_object_no_sync
        .ok_or_else(|| PySystemError::new_err("exchange API without an export function"))?;
    let mut out: *mut DLManagedTensorVersioned = null_mut();
    // SAFETY: the table's own function, called attached with an object of its type and a
    // writable out-pointer, as the header specifies.
    let status = unsafe { export(obj.as_ptr().cast(), &mut out) };
    if status != 0 {
        return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
            PySystemError::new_err(format!(
                "the DLPack exchange API of {} failed without setting an exception",
                crate::capsule::type_name(obj)
            ))
        }));
    }
    NonNull::new(out).map(RawManaged::Versioned).ok_or_else(|| {
        buffer_error(format!(
            "the DLPack exchange API of {} returned success and a NULL tensor",
            crate::capsule::type_name(obj)
        ))
    })
}
