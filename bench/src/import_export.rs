//! The import and export benchmarks' shared parts: producer tensors of any `ndim`, and the plain
//! baseline of an import with every check dlport makes (`floor + checks`), used by
//! `benches/import_export.rs` and by the callgrind driver `profile_import`.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::abi::{
    DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    FLAG_IS_SUBBYTE_TYPE_PADDED, KNOWN_FLAGS,
};
use dlport_core::internal::{USER_ADDRESS_END, contiguity};
use dlport_core::{DataType, Device, layout::Contiguity};

/// How many times [`count_deleter`] ran.
pub static DELETED: AtomicUsize = AtomicUsize::new(0);

/// A deleter that only counts, so one producer struct can be imported over and over.
///
/// # Safety
/// Any pointer (it is not read).
pub unsafe extern "C" fn count_deleter(_: *mut DLManagedTensorVersioned) {
    DELETED.fetch_add(1, Ordering::Relaxed);
}

/// A reusable producer tensor: versioned 1.3, CPU, compact row-major strides, elements of `T`
/// (float32 unless said otherwise).
pub struct Producer<T = f32> {
    header: Box<DLManagedTensorVersioned>,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    _data: Vec<T>,
}

impl Producer {
    /// The bench shapes: `[120]`, `[2, 3, 4, 5]`, `[2; 16]`, and for 64 dimensions an extent
    /// of 2 on every fourth axis and 1 elsewhere (65,536 elements, as for 16).
    pub fn shape_for(ndim: usize) -> Vec<i64> {
        match ndim {
            1 => vec![120],
            4 => vec![2, 3, 4, 5],
            n if n <= 16 => vec![2; n],
            n => (0..n).map(|a| if a % 4 == 0 { 2 } else { 1 }).collect(),
        }
    }

    /// A float32 producer of [`shape_for(ndim)`](Self::shape_for), every element 1.0.
    pub fn new(ndim: usize) -> Self {
        Self::with(DataType::FLOAT32, &Self::shape_for(ndim), 1.0)
    }
}

impl<T: Copy> Producer<T> {
    /// A producer of `shape`, every element `fill`; `dtype` is what it says `T` is.
    pub fn with(dtype: DataType, shape: &[i64], fill: T) -> Self {
        let mut shape = shape.to_vec();
        let mut strides = vec![0i64; shape.len()];
        dlport_core::layout::compact_row_major(&shape, &mut strides).expect("a bench shape");
        let mut data = vec![fill; shape.iter().product::<i64>() as usize];
        let header = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion::new(1, 3),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_deleter),
            flags: 0,
            dl_tensor: DLTensor {
                data: data.as_mut_ptr().cast::<c_void>(),
                device: Device::cpu(),
                ndim: shape.len() as i32,
                dtype,
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset: 0,
            },
        });
        Self {
            header,
            _shape: shape,
            _strides: strides,
            _data: data,
        }
    }

    /// The managed tensor to hand over (its deleter only counts).
    pub fn ptr(&mut self) -> *mut DLManagedTensorVersioned {
        &mut *self.header
    }
}

/// The hand-written export floor's block: the header, the shape and strides of a 1-d tensor
/// and the vector, in one box; the deleter frees it.
#[repr(C)]
struct FloorCtx {
    header: DLManagedTensorVersioned,
    dims: [i64; 2],
    data: Vec<f32>,
}

unsafe extern "C" fn floor_deleter(m: *mut DLManagedTensorVersioned) {
    // SAFETY: created by Box::into_raw in `floor_export`, released once.
    drop(unsafe { Box::from_raw(m.cast::<FloorCtx>()) });
}

/// The export floor: a 1-d `Vec<f32>` as a versioned DLPack tensor, by hand, checking nothing.
#[inline(never)]
pub fn floor_export(data: Vec<f32>) -> *mut DLManagedTensorVersioned {
    let n = data.len() as i64;
    let ctx = Box::into_raw(Box::new(FloorCtx {
        header: DLManagedTensorVersioned {
            version: DLPackVersion::CURRENT,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(floor_deleter),
            flags: 0,
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: Device::cpu(),
                ndim: 1,
                dtype: DataType::FLOAT32,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        dims: [n, 1],
        data,
    }));
    // SAFETY: a fresh, exclusively owned block.
    unsafe {
        (*ctx).header.dl_tensor.data = (*ctx).data.as_mut_ptr().cast();
        (*ctx).header.dl_tensor.shape = std::ptr::addr_of_mut!((*ctx).dims).cast();
        (*ctx).header.dl_tensor.strides = std::ptr::addr_of_mut!((*ctx).dims).cast::<i64>().add(1);
        (*ctx).header.manager_ctx = ctx.cast::<c_void>();
    }
    ctx.cast()
}

/// The same export through dlpark 0.10's fixed allocation (the vector boxed as its context).
#[inline(never)]
pub fn dlpark_export(mut v: Vec<f32>) -> dlpark::versioned::Dlpack {
    let data = v.as_mut_ptr();
    let n = v.len() as i64;
    let mut alloc =
        dlpark::allocation::fixed::Allocation::<dlpark::ffi::DLManagedTensorVersioned, 1>::allocate()
            .unwrap();
    alloc.shape_mut()[0] = n;
    alloc.strides_mut()[0] = 1;
    let mut init = alloc.initialize(Box::new(v));
    init.set_data(data.cast())
        .set_dtype(dlpark::ffi::DLDataType {
            code: dlpark::ffi::DLDataTypeCode(2),
            bits: 32,
            lanes: 1,
        })
        .set_device(dlpark::ffi::DLDevice {
            device_type: dlpark::ffi::DLDeviceType::CPU,
            device_id: 0,
        });
    // SAFETY: data, shape and strides stay valid until the tensor drops.
    unsafe { init.finish() }
}

/// A foreign legacy tensor (not made by dlport): float32 `[2, 3, 4, 5]`, explicit strides, a
/// deleter that only counts.
pub struct LegacyProducer {
    header: Box<DLManagedTensor>,
    _shape: Box<[i64; 4]>,
    _strides: Box<[i64; 4]>,
    _data: Vec<f32>,
}

unsafe extern "C" fn count_legacy_deleter(_: *mut DLManagedTensor) {
    DELETED.fetch_add(1, Ordering::Relaxed);
}

impl LegacyProducer {
    /// The producer.
    pub fn new() -> Self {
        let mut shape = Box::new([2i64, 3, 4, 5]);
        let mut strides = Box::new([60i64, 20, 5, 1]);
        let mut data = vec![1.0f32; 120];
        let header = Box::new(DLManagedTensor {
            dl_tensor: DLTensor {
                data: data.as_mut_ptr().cast(),
                device: Device::cpu(),
                ndim: 4,
                dtype: DataType::FLOAT32,
                shape: shape.as_mut_ptr(),
                strides: strides.as_mut_ptr(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_legacy_deleter),
        });
        Self {
            header,
            _shape: shape,
            _strides: strides,
            _data: data,
        }
    }

    /// The managed tensor to hand over (its deleter only counts).
    pub fn ptr(&mut self) -> *mut DLManagedTensor {
        &mut *self.header
    }
}

impl Default for LegacyProducer {
    fn default() -> Self {
        Self::new()
    }
}

/// What the plain baseline learns about a tensor: what dlport's `Layout` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainLayout {
    /// Number of elements.
    pub numel: u64,
    /// Lowest byte touched, relative to the first element.
    pub lo: i64,
    /// One past the highest byte touched.
    pub hi: i64,
    /// C / F / permuted / strided.
    pub contiguity: Contiguity,
}

/// An import with every check dlport makes, written as plainly as possible: the floor (read
/// the fields, call the deleter) plus, in order, the NULL pointer, the major version, unknown
/// flags, `ndim`, a NULL `shape`, the dtype rules, negative extents and the element count, the
/// NULL-strides rule of the version, the span in checked arithmetic (bits, then bytes), the
/// layout class, NULL `data`, and the address range of host memory. Errors are plain strings
/// (dlport's carry the values). The tensor is released on every path but success, where the
/// caller releases it with [`release`].
///
/// # Safety
/// As `ManagedTensor::from_raw_versioned`.
#[allow(clippy::type_complexity)]
pub unsafe fn plain_import<'a>(
    m: *mut DLManagedTensorVersioned,
) -> Result<(PlainLayout, &'a [i64], Option<&'a [i64]>, DataType), &'static str> {
    if m.is_null() {
        return Err("NULL managed tensor");
    }
    // SAFETY: the caller hands over a readable, owned tensor.
    let r = unsafe { &*m };
    let fail = |e: &'static str| {
        // SAFETY: owned and released once, on this error path.
        unsafe { release(m) };
        Err(e)
    };
    if r.version.major != 1 {
        return fail("unsupported major version");
    }
    if r.flags & !KNOWN_FLAGS != 0 {
        return fail("unknown flags");
    }
    let t = &r.dl_tensor;
    if t.ndim < 0 || t.ndim > 64 {
        return fail("ndim out of range");
    }
    let ndim = t.ndim as usize;
    if ndim > 0 && t.shape.is_null() {
        return fail("NULL shape");
    }
    if !dtype_ok(t.dtype) {
        return fail("invalid dtype");
    }
    let padded = r.flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0;
    let raw_bits = u64::from(t.dtype.bits) * u64::from(t.dtype.lanes);
    let bits = if t.dtype.bits < 8 && !padded {
        raw_bits
    } else {
        raw_bits.div_ceil(8) * 8
    } as i64;
    let shape: &'a [i64] = if ndim == 0 {
        &[]
    } else {
        // SAFETY: ndim values (checked above), per the caller's contract.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let mut numel: u64 = 1;
    let mut overflow = false;
    for &e in shape {
        if e < 0 {
            return fail("negative extent");
        }
        match numel.checked_mul(e as u64) {
            Some(n) => numel = n,
            None => overflow = true,
        }
    }
    if shape.contains(&0) {
        numel = 0;
    } else if overflow || numel > i64::MAX as u64 {
        return fail("element count overflows");
    }
    let strides: Option<&'a [i64]> = if t.strides.is_null() {
        if ndim > 0 && r.version.minor >= 2 {
            return fail("NULL strides in DLPack >= 1.2");
        }
        None
    } else if ndim == 0 {
        Some(&[])
    } else {
        // SAFETY: as for `shape`.
        Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) })
    };
    let mut layout = PlainLayout {
        numel,
        lo: 0,
        hi: 0,
        contiguity: Contiguity::Both,
    };
    if numel > 0 {
        let compact: [i64; 64];
        let strides = match strides {
            Some(s) => s,
            None => {
                let mut buf = [0i64; 64];
                let mut acc = 1i64;
                for axis in (0..ndim).rev() {
                    buf[axis] = acc;
                    acc *= shape[axis];
                }
                compact = buf;
                &compact[..ndim]
            }
        };
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&e, &s) in shape.iter().zip(strides) {
            let Some(reach) = (e - 1).checked_mul(s) else {
                return fail("span overflows");
            };
            let sum = if reach < 0 {
                lo.checked_add(reach).map(|v| lo = v)
            } else {
                hi.checked_add(reach).map(|v| hi = v)
            };
            if sum.is_none() {
                return fail("span overflows");
            }
        }
        let (Some(lo_bits), Some(end_bits)) = (
            lo.checked_mul(bits),
            hi.checked_add(1).and_then(|h| h.checked_mul(bits)),
        ) else {
            return fail("span overflows");
        };
        layout.lo = lo_bits.div_euclid(8);
        layout.hi = end_bits.div_euclid(8) + i64::from(end_bits.rem_euclid(8) != 0);
        layout.contiguity = contiguity(shape, strides);
        if t.data.is_null() {
            return fail("NULL data");
        }
        if t.device.is_host_accessible() {
            let first = i128::from(t.data as u64) + i128::from(t.byte_offset);
            let (start, end) = (first + i128::from(layout.lo), first + i128::from(layout.hi));
            if start <= 0 || end > i128::from(USER_ADDRESS_END) || end - start > isize::MAX as i128
            {
                return fail("address range leaves user space");
            }
        }
    }
    Ok((layout, shape, strides, t.dtype))
}

/// The dtype rules of DLPack 1.3, as dlport applies them.
fn dtype_ok(d: DataType) -> bool {
    if d.lanes == 0 {
        return false;
    }
    let ok = match d.code.0 {
        0 | 1 => matches!(d.bits, 1..=8 | 16 | 32 | 64),
        2 => matches!(d.bits, 16 | 32 | 64),
        3 => d.bits != 0 && d.bits.is_multiple_of(8),
        4 => d.bits == 16,
        5 => matches!(d.bits, 32 | 64 | 128),
        6 => d.bits == 8,
        7..=14 => d.bits == 8,
        15 | 16 => d.bits == 6,
        17 => d.bits == 4,
        18 => d.bits == 32,
        _ => false,
    };
    ok && (d.bits >= 8 || d.lanes == 1 || (d.code.0 == 17 && d.lanes == 2))
}

/// Calls the deleter of a managed tensor.
///
/// # Safety
/// An owned, unreleased tensor; it is released here.
#[inline]
pub unsafe fn release(m: *mut DLManagedTensorVersioned) {
    // SAFETY: owned and unreleased (contract).
    unsafe {
        if let Some(d) = (*m).deleter {
            d(m);
        }
    }
}

/// The import floor: reads the shape, strides and dtype and calls the deleter, checking nothing.
///
/// # Safety
/// An owned, unreleased tensor with valid shape and strides arrays; it is released here.
#[inline(always)]
pub unsafe fn floor_import(m: *mut DLManagedTensorVersioned) {
    // SAFETY: a live tensor whose arrays hold `ndim` elements (contract), released once.
    unsafe {
        let t = &(*m).dl_tensor;
        let shape = std::slice::from_raw_parts(t.shape, t.ndim as usize);
        let strides = std::slice::from_raw_parts(t.strides, t.ndim as usize);
        std::hint::black_box((shape, strides, t.dtype));
        release(m);
    }
}

#[cfg(test)]
mod tests;
