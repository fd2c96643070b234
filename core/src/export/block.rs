//! The allocation block: one heap block holds the managed header, the shape and strides
//! arrays and the storage; `manager_ctx` points at it and the deleter frees it at once.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ffi::c_void;

use crate::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor};
use crate::device::Device;
use crate::dtype::DataType;
use crate::managed::RawManaged;

use super::*;

/// Shape followed by strides: inline up to [`Dims::INLINE`] dimensions (no allocation), on the
/// heap beyond.
#[derive(Clone, Debug)]
pub(crate) enum Dims {
    Inline {
        ndim: u8,
        buf: [i64; 2 * Dims::INLINE],
    },
    Heap(Box<[i64]>),
}

impl Dims {
    /// Dimensions kept inline.
    pub(crate) const INLINE: usize = 8;

    /// `shape` followed by `ndim` zeroed strides.
    pub(crate) fn with_shape(shape: &[i64]) -> Self {
        let ndim = shape.len();
        if ndim <= Self::INLINE {
            let mut buf = [0i64; 2 * Self::INLINE];
            buf[..ndim].copy_from_slice(shape);
            Self::Inline {
                ndim: ndim as u8,
                buf,
            }
        } else {
            let mut v = Vec::with_capacity(2 * ndim);
            v.extend_from_slice(shape);
            v.resize(2 * ndim, 0);
            Self::Heap(v.into_boxed_slice())
        }
    }

    /// From a `shape ++ strides` slice.
    pub(crate) fn from_slice(all: &[i64]) -> Self {
        let n = all.len() / 2;
        let mut d = Self::with_shape(&all[..n]);
        d.as_mut_slice()[n..].copy_from_slice(&all[n..]);
        d
    }

    pub(crate) fn ndim(&self) -> usize {
        match self {
            Self::Inline { ndim, .. } => usize::from(*ndim),
            Self::Heap(b) => b.len() / 2,
        }
    }

    pub(crate) fn as_slice(&self) -> &[i64] {
        match self {
            Self::Inline { ndim, buf } => &buf[..2 * usize::from(*ndim)],
            Self::Heap(b) => b,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [i64] {
        match self {
            Self::Inline { ndim, buf } => &mut buf[..2 * usize::from(*ndim)],
            Self::Heap(b) => b,
        }
    }

    pub(crate) fn shape(&self) -> &[i64] {
        &self.as_slice()[..self.ndim()]
    }

    pub(crate) fn strides(&self) -> &[i64] {
        &self.as_slice()[self.ndim()..]
    }

    /// Shape and strides of a view.
    pub(crate) fn of_view(view: &crate::tensor::TensorRef<'_>) -> Self {
        let mut d = Self::with_shape(view.shape());
        let n = d.ndim();
        for (slot, s) in d.as_mut_slice()[n..].iter_mut().zip(view.strides()) {
            *slot = s;
        }
        d
    }
}

/// The `data` field of a managed tensor.
///
/// # Safety
/// `raw` points to a live, initialised managed tensor.
pub(crate) unsafe fn raw_data(raw: RawManaged) -> *mut c_void {
    match raw {
        // SAFETY: live and initialised (contract).
        RawManaged::Versioned(p) => unsafe { (*p.as_ptr()).dl_tensor.data },
        // SAFETY: as above.
        RawManaged::Legacy(p) => unsafe { (*p.as_ptr()).dl_tensor.data },
    }
}

/// Which struct to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Versioned,
    Legacy,
}

/// The metadata of an export, already checked.
pub(crate) struct Parts {
    pub(crate) device: Device,
    pub(crate) dtype: DataType,
    pub(crate) byte_offset: u64,
    pub(crate) flags: u64,
    /// `shape` followed by `strides`.
    pub(crate) dims: Dims,
}

/// The heap block behind `manager_ctx`: header first, then the arrays and the storage.
#[repr(C)]
pub(crate) struct Ctx<H, S> {
    header: H,
    dims: Dims,
    storage: S,
}

pub(crate) fn assemble<S: TensorStorage>(storage: S, parts: Parts, form: Form) -> RawManaged {
    let ndim = parts.dims.ndim();
    let tensor = DLTensor {
        data: core::ptr::null_mut(),
        device: parts.device,
        ndim: ndim as i32,
        dtype: parts.dtype,
        shape: core::ptr::null_mut(),
        strides: core::ptr::null_mut(),
        byte_offset: parts.byte_offset,
    };
    match form {
        Form::Versioned => {
            let header = DLManagedTensorVersioned {
                version: DLPackVersion::CURRENT,
                manager_ctx: core::ptr::null_mut(),
                deleter: Some(delete_versioned::<S>),
                flags: parts.flags,
                dl_tensor: tensor,
            };
            let ctx = Box::into_raw(Box::new(Ctx {
                header,
                dims: parts.dims,
                storage,
            }));
            // SAFETY: `ctx` is a fresh, exclusively owned allocation; the header is its first
            // field (repr(C)), so a pointer to the block is a pointer to the header.
            unsafe { fill(ctx, |h| (&mut h.dl_tensor, &mut h.manager_ctx)) };
            RawManaged::Versioned(
                // SAFETY: Box::into_raw never returns NULL.
                unsafe { core::ptr::NonNull::new_unchecked(ctx.cast()) },
            )
        }
        Form::Legacy => {
            let header = DLManagedTensor {
                dl_tensor: tensor,
                manager_ctx: core::ptr::null_mut(),
                deleter: Some(delete_legacy::<S>),
            };
            let ctx = Box::into_raw(Box::new(Ctx {
                header,
                dims: parts.dims,
                storage,
            }));
            // SAFETY: as above.
            unsafe { fill(ctx, |h| (&mut h.dl_tensor, &mut h.manager_ctx)) };
            // SAFETY: Box::into_raw never returns NULL.
            RawManaged::Legacy(unsafe { core::ptr::NonNull::new_unchecked(ctx.cast()) })
        }
    }
}

/// Points the header's tensor at the block's own arrays and storage, and `manager_ctx` at the
/// block.
///
/// # Safety
/// `ctx` is a live, exclusively owned block from `Box::into_raw`.
pub(crate) unsafe fn fill<H, S: TensorStorage>(
    ctx: *mut Ctx<H, S>,
    fields: impl FnOnce(&mut H) -> (&mut DLTensor, &mut *mut c_void),
) {
    // SAFETY: exclusive access per the contract.
    let block = unsafe { &mut *ctx };
    let ndim = block.dims.ndim();
    let data = block.storage.data_ptr();
    let dims = block.dims.as_mut_slice().as_mut_ptr();
    let (tensor, manager_ctx) = fields(&mut block.header);
    tensor.data = data;
    tensor.shape = if ndim == 0 {
        core::ptr::null_mut()
    } else {
        dims
    };
    tensor.strides = if ndim == 0 {
        core::ptr::null_mut()
    } else {
        // SAFETY: `dims` holds 2 × ndim values, so the offset stays inside the array.
        unsafe { dims.add(ndim) }
    };
    *manager_ctx = ctx.cast();
}

/// The deleter of versioned exports: frees the whole block, dropping the storage.
///
/// # Safety
/// Called once, by DLPack's contract, with a tensor built by [`assemble`] for this `S`.
pub(crate) unsafe extern "C" fn delete_versioned<S: TensorStorage>(
    managed: *mut DLManagedTensorVersioned,
) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `manager_ctx` was set by `fill` to the Box<Ctx<_, S>> block, released only here.
    drop(unsafe {
        Box::from_raw(
            (*managed)
                .manager_ctx
                .cast::<Ctx<DLManagedTensorVersioned, S>>(),
        )
    });
}

/// The deleter of legacy exports.
///
/// # Safety
/// As [`delete_versioned`].
pub(crate) unsafe extern "C" fn delete_legacy<S: TensorStorage>(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: as in `delete_versioned`.
    drop(unsafe { Box::from_raw((*managed).manager_ctx.cast::<Ctx<DLManagedTensor, S>>()) });
}
