//! Legacy ↔ versioned conversion of arbitrary (validated) tensors, with a counting deleter:
//! every path releases the original exactly once.
#![no_main]
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;

mod common;
use common::{Input, fields};
use dlport_core::ManagedTensor;
use dlport_core::abi::DLManagedTensor;

static RELEASED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count(_: *mut DLManagedTensor) {
    RELEASED.fetch_add(1, Ordering::SeqCst);
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut f = fields(&mut inp);
    let mut backing = vec![0u8; 8192];
    let steps = inp.u8();
    let before = RELEASED.load(Ordering::SeqCst);
    let mut m = DLManagedTensor { dl_tensor: f.tensor(&mut backing), manager_ctx: std::ptr::null_mut(), deleter: Some(count) };
    // SAFETY: the struct and its arrays outlive every use below; the deleter only counts.
    match unsafe { ManagedTensor::from_raw_legacy(&mut m) } {
        Ok(t) => {
            let mut t = t;
            for i in 0..(steps % 6) {
                t = if i % 2 == 0 { t.into_versioned().unwrap() } else { t.into_legacy(dlport_core::CopyPolicy::Never).unwrap() };
            }
            drop(t);
        }
        Err(_) => {}
    }
    assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1, "released exactly once");
});
