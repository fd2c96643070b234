//! The capability probe: what a PJRT plugin offers and what dlport does with it, found by
//! calling it. A function that is in the table but fails (a stub answering `UNIMPLEMENTED`) is
//! no implementation. One implementation serves Rust ([`probe`]), C (`dlport_pjrt_probe`),
//! Python (`python -m dlport pjrt`) and the matrix of plugin builds in `docs/pjrt-matrix.md`.

use std::ffi::c_void;
use std::fmt;
use std::sync::Arc;

use dlport_core::backend::{AlignedBuffer, TensorStorage};
use dlport_core::error::BackendError;
use dlport_core::{CopyPolicy, DataType, Device, Error, ExportBuilder, ManagedTensor};

use super::buffer::await_event;
use super::client::{ClientOptions, PjrtClient, PjrtPlugin};
use super::result::{Api, UNIMPLEMENTED};
use super::{sys, types};

/// One line of a probe report: what was asked (`key`), the short answer (`verdict`, the same
/// for every run of one plugin build: the matrix compares it) and why (`why`: the plugin's or
/// dlport's words, which may name addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeLine {
    /// The section and the item: `PJRT API`, `primitive PJRT_Client_Compile`, `dtype F32`, …
    pub key: String,
    /// The answer.
    pub verdict: String,
    /// Why, or empty.
    pub why: String,
}

/// What [`probe`] found, line by line; its `Display` is the report `python -m dlport pjrt`,
/// `dlport_pjrt_probe` and the `pjrt_probe` example print (`key: verdict — why`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeReport {
    lines: Vec<ProbeLine>,
}

impl fmt::Display for ProbeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            write!(f, "{}: {}", l.key, l.verdict)?;
            if !l.why.is_empty() {
                write!(f, " — {}", l.why)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Loads the plugin at `path` (as [`PjrtPlugin::load`]) and probes it.
pub fn probe(path: &str) -> Result<ProbeReport, Error> {
    ProbeReport::of(&PjrtPlugin::load(path)?)
}

/// The `PJRT_Buffer_Type` of f32 (the probe's tensors are f32 where the dtype is not the
/// question).
const F32: i32 = 11;

/// The plugin's answer in a few words: implemented, or not (a missing slot, a NULL slot or
/// `UNIMPLEMENTED`), or another failure.
fn outcome<T>(r: &Result<T, Error>) -> (&'static str, String) {
    match r {
        Ok(_) => ("implemented", String::new()),
        Err(e) => (
            if unimplemented(e) {
                "not implemented"
            } else {
                "fails"
            },
            e.to_string(),
        ),
    }
}

fn unimplemented(e: &Error) -> bool {
    matches!(e, Error::Backend(BackendError::Failed { code, .. }) if *code == UNIMPLEMENTED)
}

/// A buffer the probe made with a raw call, destroyed on drop.
struct Raw<'a> {
    api: &'a Api,
    raw: *mut sys::PJRT_Buffer,
}

impl Drop for Raw<'_> {
    fn drop(&mut self) {
        let mut a = sys::Buffer_Destroy_Args::new();
        a.buffer = self.raw;
        // SAFETY: a buffer the probe owns, destroyed once, here; an error cannot be reported
        // from a drop.
        let _ = unsafe { self.api.buffer_destroy(&mut a) };
    }
}

/// The on-delete callback of the probe's own views: the memory is the probe's, freed after the
/// view is destroyed, so there is nothing to release.
unsafe extern "C" fn nothing(_data: *mut c_void, _arg: *mut c_void) {}

/// 64-byte-aligned host memory from `offset` on, for the probe's tensors.
struct Host {
    buf: AlignedBuffer,
    offset: usize,
}

// SAFETY: the AlignedBuffer's memory, owned alone, from `offset` to its end.
unsafe impl TensorStorage for Host {
    fn data_ptr(&mut self) -> *mut c_void {
        // SAFETY: offset <= len.
        unsafe { self.buf.as_ptr().add(self.offset).cast() }
    }
    fn byte_len(&self) -> usize {
        self.buf.len() - self.offset
    }
    fn device(&self) -> Device {
        Device::cpu()
    }
}

/// A host tensor of f32 `0, 1, …` shaped `shape`, `offset` bytes past 64-byte alignment, and
/// the address of its first element.
fn host_tensor(
    shape: &[i64],
    offset: usize,
    read_only: bool,
    column_major: bool,
) -> Result<(ManagedTensor, usize), Error> {
    let n: i64 = shape.iter().product();
    let mut buf = AlignedBuffer::zeroed(offset + 4 * n as usize + 64, 64)?;
    for i in 0..n as usize {
        let at = offset + 4 * i;
        buf.as_mut_slice()[at..at + 4].copy_from_slice(&(i as f32).to_ne_bytes());
    }
    let address = buf.as_ptr() as usize + offset;
    let mut b = ExportBuilder::new(Host { buf, offset }, DataType::FLOAT32, shape);
    if column_major {
        let mut strides = vec![1i64; shape.len()];
        for d in 1..shape.len() {
            strides[d] = strides[d - 1] * shape[d - 1];
        }
        b = b.strides(&strides);
    }
    Ok((b.read_only(read_only).build()?, address))
}

/// The probe's raw calls on one client.
struct Calls<'a> {
    client: &'a PjrtClient,
    api: &'a Api,
    device: *mut sys::PJRT_Device,
}

impl<'a> Calls<'a> {
    /// `PJRT_Client_BufferFromHostBuffer` of `dims` elements of `kind` at `data` (copied during
    /// the call).
    fn copy_of_host(&self, data: *const c_void, kind: i32, dims: &[i64]) -> Result<Raw<'a>, Error> {
        let mut a = sys::Client_BufferFromHostBuffer_Args::new();
        a.client = self.client.inner.raw;
        a.data = data;
        a.kind = kind;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.host_buffer_semantics = sys::HOST_COPY_DURING_CALL;
        // XLA's CPU plugin crashes with neither a device nor a memory: always one.
        a.device = self.device;
        // SAFETY: `data` holds at least `dims`' elements of `kind` (the caller's 64 bytes or
        // more, one byte per sub-byte element at most 16), read during the call and until the
        // done event, awaited below.
        unsafe { self.api.client_buffer_from_host_buffer(&mut a) }?;
        if !a.done_with_host_buffer.is_null() {
            // SAFETY: an event we own, awaited and destroyed once.
            unsafe { await_event(self.api, a.done_with_host_buffer) }?;
        }
        self.own(a.buffer, sys::CLIENT_BUFFER_FROM_HOST_BUFFER)
    }

    /// `PJRT_Client_CreateViewOfDeviceBuffer` of `dims` elements of `kind` at `data`.
    fn view(&self, data: *mut c_void, kind: i32, dims: &[i64]) -> Result<Raw<'a>, Error> {
        let mut a = sys::Client_CreateViewOfDeviceBuffer_Args::new();
        a.client = self.client.inner.raw;
        a.device_buffer_ptr = data;
        a.dims = dims.as_ptr();
        a.num_dims = dims.len();
        a.element_type = kind;
        a.device = self.device;
        a.on_delete_callback = Some(nothing);
        // SAFETY: `data` outlives the view (the caller drops the view first), and the
        // on-delete callback does nothing.
        unsafe { self.api.client_create_view(&mut a) }?;
        self.own(a.buffer, sys::CLIENT_CREATE_VIEW)
    }

    fn own(&self, raw: *mut sys::PJRT_Buffer, slot: sys::Slot) -> Result<Raw<'a>, Error> {
        if raw.is_null() {
            return Err(self.api.error(slot.name, -1, "returned a NULL buffer"));
        }
        Ok(Raw { api: self.api, raw })
    }

    /// The memory kinds of the device (`PJRT_Device_AddressableMemories`, `PJRT_Memory_Kind`).
    fn memory_kinds(&self) -> Result<Vec<String>, Error> {
        let mut a = sys::Device_AddressableMemories_Args::new();
        a.device = self.device;
        // SAFETY: a live device of this client.
        unsafe { self.api.device_addressable_memories(&mut a) }?;
        let mut kinds = Vec::new();
        for i in 0..if a.memories.is_null() {
            0
        } else {
            a.num_memories
        } {
            let mut k = sys::Memory_Kind_Args::new();
            // SAFETY: `num_memories` pointers, living as long as the device (header).
            k.memory = unsafe { *a.memories.add(i) };
            // SAFETY: a live memory of the device.
            unsafe { self.api.memory_kind(&mut k) }?;
            kinds.push(if k.kind.is_null() {
                "(NULL)".to_owned()
            } else {
                // SAFETY: `kind_size` bytes living as long as the memory (header).
                let b = unsafe { std::slice::from_raw_parts(k.kind.cast::<u8>(), k.kind_size) };
                String::from_utf8_lossy(b).into_owned()
            });
        }
        Ok(kinds)
    }

    /// Calls each buffer function dlport's export uses on `b`: `(function, outcome, why)`.
    fn buffer_functions(&self, b: &Raw<'_>) -> Vec<(&'static str, &'static str, String)> {
        let api = self.api;
        let mut out = Vec::new();
        let mut u = sys::Buffer_UnsafePointer_Args::new();
        u.buffer = b.raw;
        // SAFETY: a live buffer; each call below takes its own args struct.
        let r = unsafe { api.buffer_unsafe_pointer(&mut u) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_UNSAFE_POINTER.name, v, why));
        let mut s = sys::Buffer_OnDeviceSizeInBytes_Args::new();
        s.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_on_device_size(&mut s) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_ON_DEVICE_SIZE.name, v, why));
        let mut e = sys::Buffer_ReadyEvent_Args::new();
        e.buffer = b.raw;
        // SAFETY: as above; the event is awaited and destroyed once.
        let r = unsafe { api.buffer_ready_event(&mut e) }.and_then(|()| {
            if e.event.is_null() {
                return Err(api.error(sys::BUFFER_READY_EVENT.name, -1, "a NULL event"));
            }
            // SAFETY: an event we own.
            unsafe { await_event(api, e.event) }
        });
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_READY_EVENT.name, v, why));
        let mut l = sys::Buffer_GetMemoryLayout_Args::new();
        l.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_get_memory_layout(&mut l) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_GET_MEMORY_LAYOUT.name, v, why));
        let mut i = sys::Buffer_IncreaseExternalReferenceCount_Args::new();
        i.buffer = b.raw;
        // SAFETY: as above; a reference taken here is given back below.
        let inc = unsafe { api.buffer_increase_external_ref(&mut i) };
        let (v, why) = outcome(&inc);
        out.push((sys::BUFFER_INCREASE_EXTERNAL_REF.name, v, why));
        let mut o = sys::Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
        o.buffer = b.raw;
        // SAFETY: as above.
        let r = unsafe { api.buffer_opaque_pointer(&mut o) };
        let (v, why) = outcome(&r);
        out.push((sys::BUFFER_OPAQUE_POINTER.name, v, why));
        if inc.is_ok() {
            let mut d = sys::Buffer_DecreaseExternalReferenceCount_Args::new();
            d.buffer = b.raw;
            // SAFETY: the reference taken above, given back once.
            let r = unsafe { api.buffer_decrease_external_ref(&mut d) };
            let (v, why) = outcome(&r);
            out.push((sys::BUFFER_DECREASE_EXTERNAL_REF.name, v, why));
        }
        out
    }

    /// The buffer's data pointer, as the plugin tells it (opaque, else unsafe pointer).
    fn pointer(&self, raw: *mut sys::PJRT_Buffer) -> Option<usize> {
        let mut o = sys::Buffer_OpaqueDeviceMemoryDataPointer_Args::new();
        o.buffer = raw;
        // SAFETY: a live buffer.
        if unsafe { self.api.buffer_opaque_pointer(&mut o) }.is_ok() {
            return Some(o.device_memory_ptr as usize);
        }
        let mut u = sys::Buffer_UnsafePointer_Args::new();
        u.buffer = raw;
        // SAFETY: a live buffer.
        unsafe { self.api.buffer_unsafe_pointer(&mut u) }
            .ok()
            .map(|()| u.buffer_pointer)
    }
}

/// `2 * x + 1` over a 2x3 f32 tensor, in StableHLO: the program the probe compiles and runs.
const AFFINE: &str = r#"
module @affine {
  func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<2x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<2x3xf32>
    %m = stablehlo.multiply %x, %two : tensor<2x3xf32>
    %r = stablehlo.add %m, %one : tensor<2x3xf32>
    return %r : tensor<2x3xf32>
  }
}
"#;

impl ProbeReport {
    /// The lines, in order.
    pub fn lines(&self) -> &[ProbeLine] {
        &self.lines
    }

    /// The line for `key`, if the probe reached it.
    pub fn get(&self, key: &str) -> Option<&ProbeLine> {
        self.lines.iter().find(|l| l.key == key)
    }

    fn push(&mut self, key: impl Into<String>, verdict: impl Into<String>, why: impl Into<String>) {
        self.lines.push(ProbeLine {
            key: key.into(),
            verdict: verdict.into(),
            why: why.into(),
        });
    }

    /// Probes a loaded plugin: its table, then a client of it (default options) and its
    /// device 0. A client the plugin refuses ends the report with the refusal.
    pub fn of(plugin: &Arc<PjrtPlugin>) -> Result<Self, Error> {
        let mut r = Self::default();
        r.push("plugin", plugin.origin(), "");
        let (major, minor) = plugin.api_version();
        r.push("PJRT API", format!("{major}.{minor}"), "");
        r.push("struct_size", plugin.struct_size().to_string(), "");
        for (t, name, size) in plugin.extensions() {
            let why = match name {
                Some(_) => format!("struct_size {size}"),
                None => format!(
                    "struct_size {size}; a type newer than pjrt_c_api.h {}.{}, which dlport reads",
                    sys::API_MAJOR,
                    sys::API_MINOR
                ),
            };
            r.push(format!("extension {t}"), name.unwrap_or("unknown"), why);
        }
        let client = match PjrtClient::create(plugin, &ClientOptions::default()) {
            Ok(c) => c,
            Err(e) => {
                r.push("client", "refused", e.to_string());
                return Ok(r);
            }
        };
        r.push(
            "platform",
            client.platform(),
            format!("DLPack device type {}", client.device_type().0),
        );
        let devices: Vec<String> = client
            .devices()
            .iter()
            .map(|d| format!("{} ({})", d.device, d.kind))
            .collect();
        r.push("devices", devices.join(", "), "");
        let Some(dev) = client.devices().first() else {
            return Ok(r);
        };
        let calls = Calls {
            client: &client,
            api: client.api(),
            device: dev.raw,
        };
        match calls.memory_kinds() {
            Ok(k) => r.push("memory kinds (device 0)", k.join(", "), ""),
            Err(e) => {
                let (v, why) = outcome::<()>(&Err(e));
                r.push("memory kinds (device 0)", v, why);
            }
        }
        r.primitives(&calls)?;
        r.dtypes(&calls)?;
        r.directions(&calls)?;
        Ok(r)
    }

    /// Each function dlport uses, called on a small f32 buffer.
    fn primitives(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let host = AlignedBuffer::zeroed(64, 64)?;
        let copy = calls.copy_of_host(host.as_ptr().cast(), F32, &[2, 3]);
        let (v, why) = outcome(&copy);
        self.push(
            format!("primitive {}", sys::CLIENT_BUFFER_FROM_HOST_BUFFER.name),
            v,
            why,
        );
        let view = calls.view(host.as_ptr().cast(), F32, &[2, 3]);
        let (mut v, mut why) = outcome(&view);
        if let Ok(b) = &view {
            if calls.pointer(b.raw) != Some(host.as_ptr() as usize) {
                (v, why) = (
                    "implemented",
                    "a copy: its data is not the memory given".into(),
                );
            }
        }
        self.push(
            format!("primitive {}", sys::CLIENT_CREATE_VIEW.name),
            v,
            why,
        );
        drop(view);
        let Some(b) = copy
            .ok()
            .or_else(|| calls.view(host.as_ptr().cast(), F32, &[2, 3]).ok())
        else {
            return Ok(());
        };
        for (f, v, why) in calls.buffer_functions(&b) {
            self.push(format!("primitive {f}"), v, why);
        }
        drop(b);
        let exe = calls.client.compile_mlir(AFFINE);
        let (v, why) = outcome(&exe);
        self.push(format!("primitive {}", sys::CLIENT_COMPILE.name), v, why);
        if let Ok(exe) = exe {
            // The argument: a copy where the plugin makes one, else what the import makes.
            let arg = |copy| {
                host_tensor(&[2, 3], 0, false, false)
                    .and_then(|(t, _)| calls.client.import(t, copy, None))
            };
            let run = arg(CopyPolicy::Always)
                .or_else(|_| arg(CopyPolicy::IfNeeded))
                .and_then(|x| exe.execute(&[&x]));
            let (v, why) = outcome(&run);
            self.push(
                format!("primitive {}", sys::LOADED_EXECUTABLE_EXECUTE.name),
                v,
                why,
            );
        }
        Ok(())
    }

    /// Every PJRT element type dlport maps, with its DLPack dtype, tried as a view and as a
    /// copy of four elements.
    fn dtypes(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let host = AlignedBuffer::zeroed(64, 64)?;
        for (kind, name, dtype) in types::table() {
            let view = calls.view(host.as_ptr().cast(), kind, &[4]);
            let copy = calls.copy_of_host(host.as_ptr().cast(), kind, &[4]);
            let yes = |r: &Result<Raw<'_>, Error>| if r.is_ok() { "yes" } else { "no" };
            let why: Vec<String> = [("view", &view), ("copy", &copy)]
                .iter()
                .filter_map(|(w, r)| r.as_ref().err().map(|e| format!("{w}: {e}")))
                .collect();
            self.push(
                format!("dtype {name}"),
                format!("{dtype}; view {}, copy {}", yes(&view), yes(&copy)),
                why.join("; "),
            );
        }
        Ok(())
    }

    /// What dlport does each way: host tensors imported with the default policy, a PJRT
    /// buffer exported to DLPack.
    fn directions(&mut self, calls: &Calls<'_>) -> Result<(), Error> {
        let cases: [(&str, &[i64], usize, bool, bool); 5] = [
            ("64-byte aligned, writable", &[2, 3], 0, false, false),
            ("4 bytes off 64-byte alignment", &[2, 3], 4, false, false),
            ("READ_ONLY", &[2, 3], 0, true, false),
            ("column-major", &[2, 3], 0, false, true),
            (
                "empty (0x3), 4 bytes off alignment",
                &[0, 3],
                4,
                false,
                false,
            ),
        ];
        for (what, shape, offset, read_only, column_major) in cases {
            let key = format!("import host, {what}");
            let (t, address) = host_tensor(shape, offset, read_only, column_major)?;
            match calls.client.import(t, CopyPolicy::IfNeeded, None) {
                Ok(b) if calls.pointer(b.as_raw().cast()) == Some(address) => {
                    self.push(
                        key,
                        "a view",
                        "PJRT_Client_CreateViewOfDeviceBuffer over the producer's memory",
                    );
                }
                Ok(_) => {
                    // Why not a view: the refusal a CopyPolicy::Never import gives.
                    let (t, _) = host_tensor(shape, offset, read_only, column_major)?;
                    let why = match calls.client.import(t, CopyPolicy::Never, None) {
                        Err(e) => e.to_string(),
                        Ok(_) => "the plugin made a copy of a view".into(),
                    };
                    self.push(key, "one copy", why);
                }
                Err(e) => self.push(key, "refused", e.to_string()),
            }
        }
        let (t, _) = host_tensor(&[2, 3], 0, false, false)?;
        let key = "export PJRT buffer to DLPack";
        match calls.client.import(t, CopyPolicy::Always, None) {
            Err(e) => self.push(key, "not tried", format!("no buffer to export: {e}")),
            Ok(b) => match b.to_dlpack(true) {
                Ok(m) if calls.pointer(b.as_raw().cast()) == Some(m.view().data() as usize) => {
                    let why = format!(
                        "an external reference on the plugin's buffer, as {}",
                        m.view().device()
                    );
                    self.push(key, "by reference", why);
                }
                Ok(m) => self.push(key, "one copy", format!("as {}", m.view().device())),
                Err(e) => self.push(key, "refused", e.to_string()),
            },
        }
        Ok(())
    }
}
