//! Imports: a DLPack tensor as a PJRT buffer. A view (`PJRT_Client_CreateViewOfDeviceBuffer`)
//! where PJRT can view it, whose on-delete callback releases the tensor once, on whatever
//! thread the plugin runs it; otherwise a copy (`PJRT_Client_BufferFromHostBuffer`) where
//! the memory is host memory and the copy policy allows, or a refusal naming the field.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use dlport_core::abi::DeviceType;
use dlport_core::error::{Address, CopyReason, DispatchError, Flag};
use dlport_core::layout::Contiguity;
use dlport_core::{CopyPolicy, Device, Error, ManagedTensor};

use super::buffer::{PjrtBuffer, await_event};
use super::client::PjrtClient;
use super::{sys, types};

/// The alignment dlport asks of memory a PJRT plugin views: XLA's CPU plugin refuses a view
/// whose data is not 64-byte aligned (measured: 4, 8, 16 and 32 are refused), and 64 bytes
/// serves every accelerator's allocator too.
pub const VIEW_ALIGN: usize = 64;

/// The tensor a view's on-delete callback releases, and whether the callback ran.
struct Pending {
    tensor: Mutex<Option<ManagedTensor>>,
    called: AtomicBool,
}

/// The view's on-delete callback: releases the tensor once (a second call finds nothing).
/// Never unwinds into the plugin.
unsafe extern "C" fn on_delete(_data: *mut c_void, arg: *mut c_void) {
    // SAFETY: `arg` is the `Arc<Pending>` share given to the plugin at the view's creation,
    // taken back once, here.
    let pending = unsafe { Arc::from_raw(arg.cast::<Pending>().cast_const()) };
    pending.called.store(true, Ordering::Release);
    let taken = pending.tensor.lock().map(|mut t| t.take()).unwrap_or(None);
    // The producer's deleter is foreign code: a panic there stops here.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(taken)));
}

/// Why a view is impossible: the reason a copy would fix, and the field it names.
fn view_obstacle(tensor: &ManagedTensor) -> Option<CopyReason> {
    let view = tensor.view();
    match view.contiguity() {
        // Only row-major: XLA's CPU plugin takes a view with another dense layout and reports
        // it back, but a program compiled with default layouts reads the memory row-major.
        Contiguity::Both | Contiguity::RowMajor => {}
        c => return Some(CopyReason::Layout { contiguity: c }),
    }
    if view.is_subbyte_padded() {
        return Some(CopyReason::Flag {
            flag: Flag::IsSubbyteTypePadded,
        });
    }
    let addr = first_element(&view) as usize;
    if view.numel() > 0 && addr % VIEW_ALIGN != 0 {
        return Some(CopyReason::Alignment {
            address: Address::new(addr),
            required: VIEW_ALIGN as u32,
        });
    }
    None
}

/// The first element's address: `data + byte_offset`, in any device's address space (a
/// device pointer is never read here, only handed to the plugin).
pub(super) fn first_element(view: &dlport_core::TensorRef<'_>) -> *mut c_void {
    view.data()
        .cast::<u8>()
        .wrapping_add(view.byte_offset() as usize)
        .cast()
}

/// The minor-to-major order of a dense layout: the axes by increasing stride (ties keep the
/// row-major order, minor axis first).
fn minor_to_major(strides: &[i64], shape: &[i64]) -> Vec<i64> {
    let mut axes: Vec<usize> = (0..strides.len()).rev().collect();
    axes.sort_by_key(|&a| if shape[a] <= 1 { i64::MAX } else { strides[a] });
    axes.into_iter().map(|a| a as i64).collect()
}

impl PjrtClient {
    /// Imports a DLPack tensor as a PJRT buffer on the device it is on (a device of this
    /// client's type; on a CPU platform, any host memory), or on `device` (a dlport id) for
    /// a copy of host memory.
    ///
    /// A view when PJRT can view the tensor (a dtype PJRT has, row-major, the first
    /// element [`VIEW_ALIGN`]-aligned, not READ_ONLY) and `copy` is not `Always`: the tensor
    /// is released once, when the buffer's last holder is gone. Otherwise a copy of host
    /// memory where `copy` allows (the tensor released on return), or
    /// `DispatchError::CopyRequired` with the reason. On every error the tensor is released
    /// once.
    pub fn import(
        &self,
        tensor: ManagedTensor,
        copy: CopyPolicy,
        device: Option<i32>,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let view = tensor.view();
        let dtype = view.dtype();
        let kind =
            types::to_pjrt(dtype).map_err(|e| api.error("import", -1, &format!("dtype: {e}")))?;
        let memory = view.device();
        let ours = self.device_type();
        // Host memory is this client's own on a CPU platform; another device type's memory
        // only where the platform serves that type, on the same device.
        let host_platform = ours == DeviceType::CPU && memory.is_host_accessible();
        let target = device.unwrap_or(if host_platform || memory.device_type != ours {
            0
        } else {
            memory.device_id
        });
        let dev = self.device(target)?.raw;
        let reachable = host_platform || (memory.device_type == ours && memory.device_id == target);
        let obstacle = if !reachable || !api.has(sys::CLIENT_CREATE_VIEW) {
            // Without PJRT_Client_CreateViewOfDeviceBuffer only a copy serves.
            Some(CopyReason::Device {
                from: memory,
                to: Device::new(ours, target),
            })
        } else {
            view_obstacle(&tensor)
        };
        // READ_ONLY memory is never viewed: a PJRT buffer is writable (an execution may
        // donate its input and write its result there, through any holder of the buffer).
        let read_only = tensor.is_read_only();
        let reason = match (obstacle, copy) {
            (None, CopyPolicy::Never | CopyPolicy::IfNeeded) if !read_only => {
                return self.view(tensor, kind, dev);
            }
            (Some(reason), CopyPolicy::Never) => {
                return Err(Error::Dispatch(DispatchError::CopyRequired { reason }));
            }
            (None, CopyPolicy::Never) => {
                return Err(api.error(
                    sys::CLIENT_CREATE_VIEW.name,
                    -1,
                    "flags: the tensor is READ_ONLY, and a PJRT buffer is writable (an \
                     execution may donate its input and write into it): allow a copy \
                     (copy=None or True)",
                ));
            }
            (r, _) => r,
        };
        if !memory.is_host_accessible() {
            let why = reason.map_or_else(String::new, |r| format!(" ({r})"));
            return Err(api.error(
                sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name,
                -1,
                &format!(
                    "a copy into PJRT reads host memory; the tensor is on {memory}{why}: copy it \
                     to the host first"
                ),
            ));
        }
        self.copy_from_host(&tensor, kind, dev)
    }

    /// A view of `tensor` (checked viewable): its pointer, dims and layout handed to
    /// `PJRT_Client_CreateViewOfDeviceBuffer` with the callback that releases it.
    fn view(
        &self,
        tensor: ManagedTensor,
        kind: i32,
        dev: *mut sys::PJRT_Device,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let view = tensor.view();
        let shape = view.shape().to_vec();
        let strides: Vec<i64> = view.strides().collect();
        let order = minor_to_major(&strides, &shape);
        let data = first_element(&view);
        let mut layout = sys::MemoryLayout {
            head: sys::Head {
                struct_size: std::mem::size_of::<sys::MemoryLayout>(),
                extension_start: std::ptr::null_mut(),
            },
            u: sys::LayoutUnion {
                tiled: sys::LayoutTiled {
                    head: sys::Head {
                        struct_size: std::mem::size_of::<sys::LayoutTiled>(),
                        extension_start: std::ptr::null_mut(),
                    },
                    minor_to_major: order.as_ptr(),
                    minor_to_major_size: order.len(),
                    tile_dims: std::ptr::null(),
                    tile_dim_sizes: std::ptr::null(),
                    num_tiles: 0,
                },
            },
            kind: sys::LAYOUT_TILED,
        };
        let pending = Arc::new(Pending {
            tensor: Mutex::new(Some(tensor)),
            called: AtomicBool::new(false),
        });
        let arg = Arc::into_raw(pending.clone()).cast_mut().cast::<c_void>();
        let mut a = sys::Client_CreateViewOfDeviceBuffer_Args::new();
        a.client = self.inner.raw;
        a.device_buffer_ptr = data;
        a.dims = shape.as_ptr();
        a.num_dims = shape.len();
        a.element_type = kind;
        a.layout = &mut layout;
        a.device = dev;
        a.on_delete_callback = Some(on_delete);
        a.on_delete_callback_arg = arg;
        // SAFETY: the args of PJRT_Client_CreateViewOfDeviceBuffer; the memory stays valid
        // until the callback releases the tensor.
        let made = unsafe { api.call(sys::CLIENT_CREATE_VIEW, &mut a) }
            .and_then(|()| PjrtBuffer::adopt(self, a.buffer, sys::CLIENT_CREATE_VIEW.name));
        if made.is_err() && !pending.called.load(Ordering::Acquire) {
            // No view holds the callback's share: take it back (the tensor is released when
            // `pending`, the last share, drops on return).
            // SAFETY: the share given as `arg`, never taken by the callback.
            drop(unsafe { Arc::from_raw(arg.cast::<Pending>().cast_const()) });
        }
        made
    }

    /// A copy of host `tensor` onto `dev` (`PJRT_Client_BufferFromHostBuffer`, the plugin
    /// copying during the call, the device always named), its byte strides handed on.
    fn copy_from_host(
        &self,
        tensor: &ManagedTensor,
        kind: i32,
        dev: *mut sys::PJRT_Device,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let view = tensor.view();
        let shape = view.shape().to_vec();
        let size = view.dtype().size_bytes() as i64;
        let byte_strides: Vec<i64> = view.strides().map(|s| s * size).collect();
        if view.dtype().is_sub_byte() && view.contiguity() == Contiguity::Strided {
            return Err(api.error(
                "import",
                -1,
                "strides: a strided sub-byte tensor has no byte strides",
            ));
        }
        let mut a = sys::Client_BufferFromHostBuffer_Args::new();
        a.client = self.inner.raw;
        a.data = first_element(&view).cast_const();
        a.kind = kind;
        a.dims = shape.as_ptr();
        a.num_dims = shape.len();
        if !view.dtype().is_sub_byte() {
            a.byte_strides = byte_strides.as_ptr();
            a.num_byte_strides = byte_strides.len();
        }
        a.host_buffer_semantics = sys::HOST_COPY_DURING_CALL;
        // Always named: the XLA CPU plugin crashes when neither device nor memory is set.
        a.device = dev;
        // SAFETY: the args of PJRT_Client_BufferFromHostBuffer; the host memory is valid for
        // the strides during the call (the tensor is validated and held).
        unsafe { api.call(sys::CLIENT_BUFFER_FROM_HOST_BUFFER, &mut a) }?;
        let buffer = PjrtBuffer::adopt(self, a.buffer, sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name);
        if !a.done_with_host_buffer.is_null() {
            // SAFETY: an event we own; awaited before the tensor is released.
            unsafe { await_event(&api, a.done_with_host_buffer) }?;
        }
        buffer
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn minor_to_major_orders() {
        assert_eq!(super::minor_to_major(&[3, 1], &[2, 3]), vec![1, 0]);
        assert_eq!(super::minor_to_major(&[1, 2], &[2, 3]), vec![0, 1]);
        assert_eq!(super::minor_to_major(&[], &[]), Vec::<i64>::new());
    }
}
