//! What the PJRT tests share: the plugin (or a visible skip), host tensors whose release is
//! counted, and the StableHLO program.
#![allow(dead_code)]

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlport_core::backend::{AlignedBuffer, TensorStorage};
use dlport_core::{DataType, Device, ExportBuilder, ManagedTensor};
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

/// `2 * x + 1` over a 2x3 f32 tensor, in StableHLO.
pub const AFFINE: &str = r#"
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
