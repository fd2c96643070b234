//! Imports: a DLPack tensor as a PJRT buffer, as a registry decides ([`Registry::decide_on`]
//! for the client's backend; PJRT's part of the view rule is [`view_obstacle`]). The
//! mechanisms: a view (`PJRT_Client_CreateViewOfDeviceBuffer`), whose on-delete callback
//! releases the tensor once, on whatever thread the plugin runs it; a copy of host memory
//! (`PJRT_Client_BufferFromHostBuffer`) under the registry's allocation limit.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use dlport_core::abi::{DeviceType, TypeCode};
use dlport_core::backend::check_alloc;
use dlport_core::error::{CopyReason, DispatchError};
use dlport_core::{CopyPolicy, DataType, Device, Error, ImportOptions, ManagedTensor, Registry};

use super::backend::{PjrtBackend, first_element};
use crate::pjrt::buffer::await_event;
use crate::pjrt::result::{UNIMPLEMENTED, is_unimplemented};
use crate::pjrt::{PjrtBuffer, PjrtClient, sys, types};

/// A view's producer tensor, until both the plugin's on-delete callback has asked for its
/// release and dlport's own destroy of the view (`PJRT_Buffer_Destroy`) has returned.
struct Pending {
    tensor: Option<ManagedTensor>,
    /// The plugin called the on-delete callback.
    requested: bool,
    /// dlport destroyed the view (or never got one).
    destroyed: bool,
}

/// The views' pending tensors by token. The plugin is handed a token, never a pointer: a
/// callback called twice, or after everything is released, finds no entry and does nothing.
static PENDING: Mutex<BTreeMap<usize, Pending>> = Mutex::new(BTreeMap::new());
static NEXT_TOKEN: AtomicUsize = AtomicUsize::new(1);

/// Records one side of a view's release (`requested` by the plugin, or `destroyed` by
/// dlport) and releases the tensor when both sides are in, outside the lock (its deleter is
/// foreign code, which may call back into dlport), never unwinding.
fn settle(token: usize, requested: bool, destroyed: bool) {
    let taken = {
        let mut pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(p) = pending.get_mut(&token) else {
            return;
        };
        p.requested |= requested;
        p.destroyed |= destroyed;
        if !(p.requested && p.destroyed) {
            return;
        }
        pending.remove(&token).and_then(|mut p| p.tensor.take())
    };
    // The producer's deleter is foreign code: a panic there stops here.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(taken)));
}

/// Called once dlport's `PJRT_Buffer_Destroy` of the view with `token` has returned.
fn view_destroyed(token: usize) {
    settle(token, false, true);
}

/// The view's on-delete callback: records the plugin's request; the tensor is released once
/// dlport's destroy of the view has returned too. A second call, or a call with a token
/// already settled, does nothing. Never unwinds into the plugin.
unsafe extern "C" fn on_delete(_data: *mut c_void, arg: *mut c_void) {
    let token = arg as usize;
    let _ = catch_unwind(|| settle(token, true, false));
}

/// The minor-to-major order of a dense layout: the axes by increasing stride (ties keep the
/// row-major order, minor axis first).
fn minor_to_major(strides: &[i64], shape: &[i64]) -> Vec<i64> {
    let mut axes: Vec<usize> = (0..strides.len()).rev().collect();
    axes.sort_by_key(|&a| if shape[a] <= 1 { i64::MAX } else { strides[a] });
    axes.into_iter().map(|a| a as i64).collect()
}

impl PjrtClient {
    /// Imports a DLPack tensor as a PJRT buffer on `device` (a dlport id of this client; by
    /// default the tensor's own device of this client's type, else device 0), as `registry`
    /// decides for this client's backend ([`Registry::decide_on`] with
    /// [`PjrtBackend`](super::PjrtBackend)): a view where its one view rule allows (the
    /// backend's `view_obstacle` is PJRT's part of it, `options.requirements` the caller's),
    /// the tensor released once when the buffer's last holder is gone; else one copy of host
    /// memory where `options.copy` allows, checked first against the registry's allocation
    /// limit ([`Registry::alloc_limit`] with `options.max_alloc`), the tensor released on
    /// return; else `DispatchError::CopyRequired` with the reason. `options.device` is this
    /// call's target (set from `device`). On every error the tensor is released once.
    pub fn import_with(
        &self,
        registry: &Registry,
        tensor: ManagedTensor,
        options: &ImportOptions,
        device: Option<i32>,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let view = tensor.view();
        let kind = types::to_pjrt(view.dtype())
            .map_err(|e| api.error("import", -1, &format!("dtype: {e}")))?;
        let memory = view.device();
        let ours = self.device_type();
        let host_platform = ours == DeviceType::CPU;
        let index = device.unwrap_or(if !host_platform && memory.device_type == ours {
            memory.device_id
        } else {
            0
        });
        let dev = self.device(index)?.raw;
        // Host memory is kDLCPU device 0 whichever PJRT device of a CPU platform holds it.
        let target = if host_platform {
            Device::cpu()
        } else {
            Device::new(ours, index)
        };
        let backend = PjrtBackend::of(self);
        let decided = ImportOptions {
            device: Some(target),
            ..*options
        };
        let decision = registry.decide_on(&backend, &view, &decided)?;
        // A tensor dlport holds as read-only without the flag (its producer's access) is
        // never viewed either: the view rule's READ_ONLY obstacle, which the view's flags
        // cannot show.
        let read_only = !view.is_read_only() && tensor.is_read_only();
        if !decision.copies && read_only && options.copy == CopyPolicy::Never {
            return Err(Error::Dispatch(DispatchError::CopyRequired {
                reason: CopyReason::Writable,
            }));
        }
        let mut tensor = tensor;
        if !decision.copies && !read_only {
            if api.has(sys::CLIENT_CREATE_VIEW) {
                match self.view(tensor, kind, dev) {
                    Ok(buffer) => return Ok(buffer),
                    // A stub: the function is in the table and answers UNIMPLEMENTED. A copy
                    // of host memory serves where the policy allows one, as for a missing
                    // function; otherwise the plugin's own error names the function.
                    Err((e, Some(t)))
                        if is_unimplemented(&e)
                            && options.copy != CopyPolicy::Never
                            && memory.is_host_accessible() =>
                    {
                        tensor = t;
                    }
                    Err((e, _)) => return Err(e),
                }
            } else if options.copy == CopyPolicy::Never || !memory.is_host_accessible() {
                // The mechanism of a view is missing: a copy of host memory serves where the
                // policy allows one; a refusal names the function.
                return Err(api.error(
                    sys::CLIENT_CREATE_VIEW.name,
                    UNIMPLEMENTED,
                    &format!(
                        "the plugin does not implement {} (its table ends before it or leaves \
                         it NULL), so it cannot view the tensor on {memory}: only a copy of \
                         host memory imports it (CopyPolicy::IfNeeded)",
                        sys::CLIENT_CREATE_VIEW.name
                    ),
                ));
            }
        }
        if !memory.is_host_accessible() {
            let why = decision
                .copy_reason
                .map_or_else(String::new, |r| format!(" ({r})"));
            return Err(api.error(
                sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name,
                -1,
                &format!(
                    "a copy into PJRT reads host memory; the tensor is on {memory}{why}: copy it \
                     to the host first"
                ),
            ));
        }
        let limit = registry.alloc_limit(options.max_alloc);
        self.copy_from_host(&tensor, kind, dev, limit)
    }

    /// The view the registry decided ([`PjrtBackend`](super::PjrtBackend)'s `view_external`)
    /// on device `device` of this client.
    pub(super) fn view_decided(
        &self,
        tensor: ManagedTensor,
        device: i32,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let kind = types::to_pjrt(tensor.view().dtype())
            .map_err(|e| api.error("import", -1, &format!("dtype: {e}")))?;
        let dev = self.device(device)?.raw;
        api.function(sys::CLIENT_CREATE_VIEW)?;
        self.view(tensor, kind, dev).map_err(|(e, _)| e)
    }

    /// A view of `tensor` (checked viewable): its pointer, dims and layout handed to
    /// `PJRT_Client_CreateViewOfDeviceBuffer` with the callback that releases it. On failure
    /// no view holds the tensor, and it comes back with the error (a caller may copy it).
    fn view(
        &self,
        tensor: ManagedTensor,
        kind: i32,
        dev: *mut sys::PJRT_Device,
    ) -> Result<PjrtBuffer, (Error, Option<ManagedTensor>)> {
        let api = *self.api();
        let view = tensor.view();
        let shape = view.shape().to_vec();
        let strides: Vec<i64> = view.strides().collect();
        let order = minor_to_major(&strides, &shape);
        let data = first_element(&view);
        let sub_byte = view.dtype().is_sub_byte();
        let mut layout = sys::MemoryLayout {
            head: sys::Head {
                struct_size: sys::MemoryLayout::STRUCT_SIZE,
                extension_start: std::ptr::null_mut(),
            },
            u: sys::LayoutUnion {
                tiled: sys::LayoutTiled {
                    head: sys::Head {
                        struct_size: sys::LayoutTiled::STRUCT_SIZE,
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
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        PENDING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                token,
                Pending {
                    tensor: Some(tensor),
                    requested: false,
                    destroyed: false,
                },
            );
        let mut a = sys::Client_CreateViewOfDeviceBuffer_Args::new();
        a.client = self.inner.raw;
        a.device_buffer_ptr = data;
        a.dims = shape.as_ptr();
        a.num_dims = shape.len();
        a.element_type = kind;
        // A sub-byte type's default layout carries its element size in bits, which a tiled
        // layout cannot state (newer XLA refuses `s4[8] {0}` as not the default): the
        // plugin's default layout (row-major, NULL) is asked for instead.
        a.layout = if sub_byte {
            std::ptr::null_mut()
        } else {
            &mut layout
        };
        a.device = dev;
        a.on_delete_callback = Some(on_delete);
        a.on_delete_callback_arg = token as *mut c_void;
        // SAFETY: the args of PJRT_Client_CreateViewOfDeviceBuffer; the memory stays valid
        // until both the callback and dlport's destroy of the view have released the tensor.
        let made = unsafe { api.client_create_view(&mut a) }.and_then(|()| {
            PjrtBuffer::adopt_view(
                self,
                a.buffer,
                sys::CLIENT_CREATE_VIEW.name,
                Some((token, view_destroyed)),
            )
        });
        made.map_err(|e| {
            // No view holds the tensor (a NULL buffer is destroyed by no one): it leaves the
            // pending table whether or not the plugin called the callback (a later call finds
            // nothing) and goes back to the caller.
            let taken = PENDING
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&token)
                .and_then(|mut p| p.tensor.take());
            (e, taken)
        })
    }

    /// A copy of host `tensor` onto `dev` (`PJRT_Client_BufferFromHostBuffer`, the plugin
    /// copying during the call, the device always named), its byte strides handed on. The
    /// new buffer's bytes are checked against `limit` (the registry's limit in force) first. A sub-byte tensor
    /// is handed over one element per byte (PJRT reads host sub-byte data so), unpacked into
    /// a staging copy that counts against the limit too.
    fn copy_from_host(
        &self,
        tensor: &ManagedTensor,
        kind: i32,
        dev: *mut sys::PJRT_Device,
        limit: u64,
    ) -> Result<PjrtBuffer, Error> {
        let api = *self.api();
        let view = tensor.view();
        let dtype = view.dtype();
        let shape = view.shape().to_vec();
        let numel = view.numel();
        let bytes = dtype.bytes_for(numel, false).map_or(u128::MAX, u128::from);
        check_alloc(bytes, Some(limit))?;
        let size = dtype.size_bytes() as i64;
        let byte_strides: Vec<i64> = view.strides().map(|s| s * size).collect();
        let unpacked = if dtype.is_sub_byte() {
            // The packed copy and the bytes it unpacks into are this call's own allocations.
            check_alloc(bytes + u128::from(numel), Some(limit))?;
            let mut packed = vec![0u8; bytes as usize];
            view.copy_to_compact(&mut packed)?;
            Some(unpack(&packed, numel as usize, dtype))
        } else {
            None
        };
        let mut a = sys::Client_BufferFromHostBuffer_Args::new();
        a.client = self.inner.raw;
        a.kind = kind;
        a.dims = shape.as_ptr();
        a.num_dims = shape.len();
        if let Some(u) = &unpacked {
            // Row-major, one element per byte: the default strides.
            a.data = u.as_ptr().cast();
        } else {
            a.data = first_element(&view).cast_const();
            a.byte_strides = byte_strides.as_ptr();
            a.num_byte_strides = byte_strides.len();
        }
        a.host_buffer_semantics = sys::HOST_COPY_DURING_CALL;
        // Always named: the XLA CPU plugin crashes when neither device nor memory is set.
        a.device = dev;
        // SAFETY: the args of PJRT_Client_BufferFromHostBuffer; the host memory (the tensor,
        // validated and held, or the unpacked copy) is valid for the strides during the call
        // and until the done event below.
        unsafe { api.client_buffer_from_host_buffer(&mut a) }?;
        let buffer = PjrtBuffer::adopt(self, a.buffer, sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name);
        if !a.done_with_host_buffer.is_null() {
            // SAFETY: an event we own; awaited before the host memory is released.
            unsafe { await_event(&api, a.done_with_host_buffer) }?;
        }
        drop(unpacked);
        buffer
    }
}

/// `numel` packed sub-byte elements of `dtype` (little bit-endian, as DLPack packs them), one
/// per byte: a signed integer sign-extended, any other type in the low bits.
fn unpack(packed: &[u8], numel: usize, dtype: DataType) -> Vec<u8> {
    let bits = dtype.storage_bits(false) as usize;
    let mask = (1u16 << bits) - 1;
    let signed = dtype.code == TypeCode::INT;
    (0..numel)
        .map(|i| {
            let bit = i * bits;
            let (at, shift) = (bit / 8, bit % 8);
            let word = u16::from(packed[at]) | packed.get(at + 1).map_or(0, |&b| u16::from(b) << 8);
            let v = ((word >> shift) & mask) as u8;
            if signed && v & (1 << (bits - 1)) != 0 {
                v | !(mask as u8)
            } else {
                v
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn minor_to_major_orders() {
        assert_eq!(super::minor_to_major(&[3, 1], &[2, 3]), vec![1, 0]);
        assert_eq!(super::minor_to_major(&[1, 2], &[2, 3]), vec![0, 1]);
        assert_eq!(super::minor_to_major(&[], &[]), Vec::<i64>::new());
    }

    #[test]
    fn sub_byte_elements_unpack_one_per_byte() {
        use dlport_core::DataType;
        use dlport_core::abi::TypeCode;
        let int4 = DataType::new(TypeCode::INT, 4, 1);
        let uint2 = DataType::new(TypeCode::UINT, 2, 1);
        assert_eq!(
            super::unpack(&[0x21, 0xf3, 0x85], 6, int4),
            [1, 2, 3, 0xff, 5, 0xf8]
        );
        assert_eq!(super::unpack(&[0b1110_0100], 4, uint2), [0, 1, 2, 3]);
        assert_eq!(super::unpack(&[0xf1], 2, DataType::FLOAT4_E2M1FN), [1, 0xf]);
    }
}
