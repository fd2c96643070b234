//! `dlport_wrap`: foreign memory with a caller's release callback becomes a DLPack tensor.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use dlport_core::abi::{DLManagedTensorVersioned, DLPackVersion, DLTensor, DeviceType};
use dlport_core::error::LayoutError;
use dlport_core::{DataType, Device, Error, ManagedTensor};

use super::args::out_ptr;
use super::status::entry;
use super::tracker::give;

/// The release callback of `dlport_wrap`: called exactly once, with the `ctx` given to
/// `dlport_wrap`, when nobody uses the memory any more (or at once when `dlport_wrap` fails). It
/// may run on any thread and must not unwind.
pub type DlportReleaseFn = Option<unsafe extern "C" fn(ctx: *mut c_void)>;

/// Runs the caller's release callback once, when dropped.
pub(crate) struct CallerRelease {
    release: DlportReleaseFn,
    ctx: *mut c_void,
}

// SAFETY: `dlport_wrap`'s contract: the callback may run on any thread, with its context.
unsafe impl Send for CallerRelease {}

impl Drop for CallerRelease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            // SAFETY: the caller's callback with the caller's context, called once (`take`).
            unsafe { release(self.ctx) };
        }
    }
}

/// The managed tensor `dlport_wrap` builds over caller memory: the header, the shape and
/// strides it points to, and the caller's release, which runs when this is dropped.
pub(crate) struct Wrapped {
    header: DLManagedTensorVersioned,
    _shape: Box<[i64]>,
    _strides: Box<[i64]>,
    _release: CallerRelease,
}

/// The deleter of `dlport_wrap`'s tensors: frees the block, which runs the caller's release.
///
/// # Safety
/// `managed` is NULL or the header of a live `Wrapped` block (its `manager_ctx`), released once.
pub(crate) unsafe extern "C" fn wrapped_deleter(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: the header of a live block whose manager_ctx is the block (contract).
    let block = unsafe { (*managed).manager_ctx }.cast::<Wrapped>();
    // SAFETY: allocated by Box::into_raw in `dlport_wrap` and released once (contract).
    drop(unsafe { Box::from_raw(block) });
}

/// Wraps caller-owned memory as a DLPack managed tensor (versioned when `to_versioned` is
/// non-zero, legacy otherwise), without a copy: DLPack's "external reference". `data`,
/// `device_*`, `code`/`bits`/`lanes`, `ndim`, `shape`, `strides` (NULL: compact row-major),
/// `byte_offset` and `flags` (`DLPACK_FLAG_BITMASK_*`) are those of the DLTensor; they are
/// validated as any import is (ndim, extents, dtype widths, address range, known flags), and
/// flags the legacy form cannot carry (READ_ONLY, IS_SUBBYTE_TYPE_PADDED) are refused for it
/// with `DLPORT_ERR_FLAG_NOT_REPRESENTABLE`. `shape` and `strides` are copied: the caller may
/// free them when the call returns.
///
/// Ownership: `release(ctx)` is called exactly once on every path. On success `*out` owns the
/// memory; `release(ctx)` runs when the tensor's deleter is called (or `dlport_release`, or the
/// import that consumed it is freed), on any thread. On every error, including a NULL `out`,
/// `release(ctx)` has run before `dlport_wrap` returns. `release` may be NULL: the caller then
/// keeps the memory and must keep it alive until the tensor is released.
///
/// # Safety
/// `data` + `byte_offset` addresses the tensor's bytes, valid (and not written by the caller
/// while READ_ONLY is set) until `release(ctx)` runs; `shape` (and `strides`, when not NULL) is
/// readable for `ndim` values when `ndim` is in range; `out` is NULL or writable; `release` is
/// NULL or a function that may be called once with `ctx` from any thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlport_wrap(
    data: *mut c_void,
    device_type: i32,
    device_id: i32,
    code: u8,
    bits: u8,
    lanes: u16,
    ndim: i32,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
    flags: u64,
    to_versioned: c_int,
    release: DlportReleaseFn,
    ctx: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    // Made before anything can fail: every path drops it exactly once, or hands it to the
    // tensor, whose deleter drops it.
    let guard = CallerRelease { release, ctx };
    entry(move || {
        let out = out_ptr(out, "out")?;
        let n = dlport_core::layout::check_ndim(i64::from(ndim))?;
        if n > 0 && shape.is_null() {
            return Err(Error::Layout(LayoutError::NullShape { ndim }).into());
        }
        let copy = |p: *const i64| -> Box<[i64]> {
            if n == 0 {
                Box::default()
            } else {
                // SAFETY: readable for `n` values (contract), `n` bounded by MAX_NDIM.
                unsafe { std::slice::from_raw_parts(p, n) }.into()
            }
        };
        let mut shape = copy(shape);
        // DLPack >= 1.2 requires explicit strides: NULL means compact row-major, computed here
        // (saturating: an overflowing shape is refused by the validation below, by name).
        let mut strides = if strides.is_null() {
            let mut compact = vec![1i64; n].into_boxed_slice();
            for i in (0..n.saturating_sub(1)).rev() {
                compact[i] = compact[i + 1].saturating_mul(shape[i + 1].max(1));
            }
            compact
        } else {
            copy(strides)
        };
        let header = DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: null_mut(),
            deleter: Some(wrapped_deleter),
            flags,
            dl_tensor: DLTensor {
                data,
                device: Device::new(DeviceType(device_type), device_id),
                ndim,
                dtype: DataType::new(dlport_core::abi::TypeCode(code), bits, lanes),
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset,
            },
        };
        let block = Box::into_raw(Box::new(Wrapped {
            header,
            _shape: shape,
            _strides: strides,
            _release: guard,
        }));
        // SAFETY: just allocated and not shared yet. The header's shape and strides point into
        // the block's boxes, which do not move; its manager_ctx is the block, for the deleter.
        unsafe { (*block).header.manager_ctx = block.cast() };
        // SAFETY: an owned versioned tensor handed over: its deleter frees the block (running
        // the caller's release); `from_raw_versioned` releases it on every error.
        let m = unsafe { ManagedTensor::from_raw_versioned(&raw mut (*block).header) }?;
        give(m, to_versioned != 0, out)
    })
}
