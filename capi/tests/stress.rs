//! Eight threads exchange a million tensors: exported on one thread, imported, read and
//! released on another (through the Rust API and the C ABI), deleters running wherever the
//! last owner is. At the end every counter agrees: created = released, once each.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use dlport_core::abi::RawManaged;
use dlport_core::backend::TensorStorage;
use dlport_core::{DataType, ExportBuilder, ManagedTensor};

static CREATED: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// Storage that counts its creation and its drop.
struct Counted([u32; 4]);

impl Counted {
    fn new(seed: u32) -> Self {
        CREATED.fetch_add(1, Ordering::Relaxed);
        Self([seed, seed + 1, seed + 2, seed + 3])
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: `data_ptr` is taken once the storage sits in the export's heap block, where it never
// moves again; 16 bytes are valid there and owned alone.
unsafe impl TensorStorage for Counted {
    fn data_ptr(&mut self) -> *mut c_void {
        self.0.as_mut_ptr().cast()
    }
    fn byte_len(&self) -> usize {
        16
    }
}

/// A raw managed tensor crossing threads.
struct Sendable(RawManaged);
// SAFETY: DLPack tensors may be released on any thread; ownership moves with the message.
unsafe impl Send for Sendable {}

fn through_c_abi(t: ManagedTensor) -> ManagedTensor {
    let (ptr, v) = match t.into_raw() {
        RawManaged::Versioned(p) => (p.as_ptr().cast::<c_void>(), 1),
        RawManaged::Legacy(p) => (p.as_ptr().cast::<c_void>(), 0),
    };
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: our own export, handed over; `out` writable.
    let status = unsafe { dlport::ffi::dlport_convert(ptr, v, 1 - v, &mut out) };
    assert_eq!(status, 0);
    let out = std::ptr::NonNull::new(out).unwrap();
    let raw = if v == 1 {
        RawManaged::Legacy(out.cast())
    } else {
        RawManaged::Versioned(out.cast())
    };
    // SAFETY: the converted export, owned by us now.
    unsafe { ManagedTensor::from_raw(raw) }.unwrap()
}

#[test]
fn eight_threads_exchange_a_million_tensors() {
    const THREADS: usize = 8;
    // A million in optimised builds (the test command runs it so); a tenth in debug builds.
    let default = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    let total: usize = std::env::var("DLPORT_STRESS_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    let per = total / THREADS;
    let start = Instant::now();
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS)
        .map(|_| mpsc::sync_channel::<Sendable>(1024))
        .unzip();
    let mut handles = Vec::new();
    for (i, rx) in receivers.into_iter().enumerate() {
        let tx = senders[(i + 1) % THREADS].clone();
        handles.push(std::thread::spawn(move || {
            let producer = std::thread::spawn(move || {
                for k in 0..per {
                    let b = ExportBuilder::new(Counted::new(k as u32), DataType::UINT32, &[4]);
                    let t = if k % 2 == 0 {
                        b.build()
                    } else {
                        b.build_legacy()
                    }
                    .unwrap();
                    // Every fourth one crosses the C ABI on the way.
                    let t = if k % 4 == 1 { through_c_abi(t) } else { t };
                    tx.send(Sendable(t.into_raw())).unwrap();
                }
            });
            let mut checksum = 0u64;
            for msg in rx.iter() {
                // SAFETY: each message carries an owned export, received once.
                let t = unsafe { ManagedTensor::from_raw(msg.0) }.unwrap();
                checksum += u64::from(t.as_slice::<u32>().unwrap()[3]);
                drop(t); // the deleter runs on this (consumer) thread
            }
            producer.join().unwrap();
            checksum
        }));
    }
    drop(senders);
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let elapsed = start.elapsed();
    let expected: u64 = THREADS as u64 * (0..per as u64).map(|k| k + 3).sum::<u64>();
    assert_eq!(sum, expected, "every tensor was read exactly once");
    assert_eq!(CREATED.load(Ordering::SeqCst), THREADS * per);
    assert_eq!(
        DROPPED.load(Ordering::SeqCst),
        CREATED.load(Ordering::SeqCst),
        "created = released"
    );
    println!(
        "{} tensors across {THREADS} threads in {elapsed:?}",
        THREADS * per
    );
}
