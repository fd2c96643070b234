//! What the PJRT tests share: the plugin (or a visible skip), its function table (to copy and
//! patch), host tensors whose release is counted, and the StableHLO program.
#![allow(dead_code)]

use std::ffi::{CString, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use dlport_core::backend::{AlignedBuffer, TensorStorage};
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor};
use dlport_native::pjrt::sys::{self, Slot};
use dlport_native::pjrt::{ClientOptions, PjrtClient, PjrtPlugin};

/// The real plugin's path, or `None` after printing why the test skips.
pub fn plugin_path(test: &str) -> Option<String> {
    match std::env::var("DLPORT_PJRT_PLUGIN") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            eprintln!(
                "SKIP {test}: DLPORT_PJRT_PLUGIN is not set (scripts/pjrt-test.sh downloads \
                 xla-cpu-pjrt 0.0.1 and sets it)"
            );
            None
        }
    }
}

/// The real plugin and a client of it.
pub fn client(test: &str) -> Option<(Arc<PjrtPlugin>, PjrtClient)> {
    let path = plugin_path(test)?;
    let plugin = PjrtPlugin::load(&path).expect("load the PJRT plugin");
    let client = PjrtClient::create(&plugin, &ClientOptions::default()).expect("create a client");
    Some((plugin, client))
}

/// The plugin's own function table: the library opened with `dlopen` (never closed; the same
/// handle where it is loaded already) and its `GetPjrtApi` called.
pub fn vendor_table(path: &str) -> *const c_void {
    let c = CString::new(path).unwrap();
    // SAFETY: a NUL-terminated path to a PJRT plugin the test trusts; never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!h.is_null(), "dlopen {path}");
    // SAFETY: a live handle and a NUL-terminated name.
    let sym = unsafe { libc::dlsym(h, c"GetPjrtApi".as_ptr()) };
    assert!(!sym.is_null(), "{path} has no GetPjrtApi");
    // SAFETY: the PJRT plugin contract gives GetPjrtApi this type.
    let get: unsafe extern "C" fn() -> *const c_void = unsafe { std::mem::transmute(sym) };
    // SAFETY: as above.
    unsafe { get() }
}

/// The words of a PJRT 0.81 table: the functions dlport reads.
pub const WORDS: usize = sys::API_SIZE_0_81 / 8;

static REAL: OnceLock<Vec<usize>> = OnceLock::new();

/// The plugin at `path`'s table as words, read once per test binary: a newer plugin's table
/// cut to the 0.81 functions dlport reads (an older table), for tests to copy and patch.
pub fn real_table(path: &str) -> &'static [usize] {
    REAL.get_or_init(|| {
        let t = vendor_table(path).cast::<usize>();
        // SAFETY: GetPjrtApi returns its table of struct_size bytes (the first word), at least
        // API_SIZE_0_81 (checked before the rest is read).
        let mut words = unsafe {
            assert!(*t >= sys::API_SIZE_0_81, "the plugin's table size {}", *t);
            std::slice::from_raw_parts(t, WORDS).to_vec()
        };
        words[0] = sys::API_SIZE_0_81;
        words
    })
}

/// The table [`real_table`] read.
pub fn real_words() -> &'static [usize] {
    REAL.get().expect("the real table (real_table reads it)")
}

/// A function of the real table (read by [`real_table`] first).
pub fn real(slot: Slot) -> sys::Fn {
    let p = real_words()[slot.end() / 8 - 1];
    // SAFETY: a function pointer of the real table, of the table functions' signature.
    unsafe { std::mem::transmute::<usize, sys::Fn>(p) }
}

/// 64-byte-aligned host memory whose release is counted.
pub struct Counted {
    buf: AlignedBuffer,
    offset: usize,
    device: Device,
    released: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: an AlignedBuffer's memory, owned alone, from `offset` to its end.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        // SAFETY: offset <= len.
        unsafe { self.buf.as_ptr().add(self.offset).cast() }
    }
    fn byte_len(&self) -> usize {
        self.buf.len() - self.offset
    }
    fn device(&self) -> Device {
        self.device
    }
}

/// How a test tensor is made.
#[derive(Clone)]
pub struct Spec {
    pub shape: Vec<i64>,
    pub strides: Option<Vec<i64>>,
    pub offset: usize,
    pub read_only: bool,
    pub dtype: DataType,
    pub device: Device,
}

impl Spec {
    pub fn f32(shape: &[i64]) -> Self {
        Self {
            shape: shape.to_vec(),
            strides: None,
            offset: 0,
            read_only: false,
            dtype: DataType::FLOAT32,
            device: Device::cpu(),
        }
    }
}

/// A host tensor holding `values` (f32, or raw bytes for other dtypes) as `spec` says, its
/// address, and the counter of its releases.
pub fn tensor(values: &[f32], spec: &Spec) -> (ManagedTensor, usize, Arc<AtomicUsize>) {
    let released = Arc::new(AtomicUsize::new(0));
    let bytes = values.len() * 4;
    let mut buf = AlignedBuffer::zeroed(bytes + spec.offset + 64, 64).expect("allocate");
    for (i, v) in values.iter().enumerate() {
        let at = spec.offset + i * 4;
        buf.as_mut_slice()[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }
    let address = buf.as_ptr() as usize + spec.offset;
    let storage = Counted {
        buf,
        offset: spec.offset,
        device: spec.device,
        released: released.clone(),
    };
    let mut b = ExportBuilder::new(storage, spec.dtype, &spec.shape).read_only(spec.read_only);
    if let Some(s) = &spec.strides {
        b = b.strides(s);
    }
    (b.build().expect("build the test tensor"), address, released)
}

pub fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

/// `2 * x + 1` over a 2x3 f32 tensor, in StableHLO: the capability probe's program.
pub const AFFINE: &str = include_str!("../../src/pjrt/probe/affine.mlir");
