//! The C ABI with arbitrary structs: describe (borrowed), import (consuming), export, convert,
//! compact and host view; never a crash, a panic only as DLPORT_PANIC (none expected), and
//! the input released exactly once on every consuming path.
#![no_main]
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;

mod common;
use common::{Input, fields};
use dlport_core::abi::{DLManagedTensor, DLManagedTensorVersioned, DLPackVersion};
use dlport::ffi::*;

static RELEASED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_v(_: *mut DLManagedTensorVersioned) {
    RELEASED.fetch_add(1, Ordering::SeqCst);
}
unsafe extern "C" fn count_l(_: *mut DLManagedTensor) {
    RELEASED.fetch_add(1, Ordering::SeqCst);
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut f = fields(&mut inp);
    let mut backing = vec![0u8; 8192];
    let op = inp.u8() % 6;
    let versioned = inp.u8() % 2 == 0;
    let mut v = DLManagedTensorVersioned {
        version: DLPackVersion::new(f.version.0, f.version.1),
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(count_v),
        flags: f.flags,
        dl_tensor: f.tensor(&mut backing),
    };
    let mut l = DLManagedTensor { dl_tensor: v.dl_tensor, manager_ctx: std::ptr::null_mut(), deleter: Some(count_l) };
    let ptr: *mut c_void = if versioned { (&mut v as *mut DLManagedTensorVersioned).cast() } else { (&mut l as *mut DLManagedTensor).cast() };
    let vflag = c_int::from(versioned);
    let before = RELEASED.load(Ordering::SeqCst);
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY (all calls): `ptr` is a live struct of the form `vflag` says, whose arrays outlive
    // the calls; data is only read by dlport after validation, and the harness does not let
    // host tensors reach past `backing` (device types other than host are never read).
    let status = unsafe {
        match op {
            0 => {
                let mut json: *mut c_char = std::ptr::null_mut();
                let s = dlport_describe(ptr, vflag, &mut json);
                dlport_string_free(json);
                s
            }
            1 => {
                let mut t: *mut DlportTensor = std::ptr::null_mut();
                let s = dlport_import(ptr, vflag, std::ptr::null(), &mut t);
                if s == 0 {
                    let mut ver = 0;
                    // The export's dl_device: its own (0, 0), or the case's device, which the
                    // rule of device ids may refuse.
                    let (dt, did) = if inp.u8() % 2 == 0 {
                        (0, 0)
                    } else {
                        (f.device.device_type.0, f.device.device_id)
                    };
                    if dlport_export(t, 1, 3, dt, did, 1, &mut out, &mut ver) == 0 {
                        dlport_release(out, ver);
                    }
                }
                dlport_tensor_free(t);
                s
            }
            2 => {
                let s = dlport_convert(ptr, vflag, 1 - vflag, &mut out);
                if s == 0 {
                    dlport_release(out, 1 - vflag);
                }
                s
            }
            3 => {
                // The advertised device: pinned, or an id the rule of device ids may refuse.
                let advertised_id = [0, 1, -1, i32::MAX][usize::from(inp.u8() % 4)];
                let s = dlport_host_view(ptr, vflag, 3, advertised_id, vflag, &mut out);
                if s == 0 {
                    dlport_release(out, vflag);
                }
                s
            }
            4 => {
                // Compaction reads the data: only for spans that stay inside `backing`.
                let Ok(view) = dlport_core::TensorRef::from_raw(&v.dl_tensor, None, 0) else { return };
                if !common::inside(&view, &backing) || view.numel() > 100_000 {
                    return;
                }
                let s = dlport_compact(ptr, vflag, 1, 1, &mut out);
                if s == 0 {
                    dlport_release(out, 1);
                }
                s
            }
            _ => dlport_import(ptr, vflag, std::ptr::null(), std::ptr::null_mut()),
        }
    };
    assert_ne!(status, DLPORT_PANIC, "a panic reached the C boundary");
    if op != 0 {
        assert_eq!(RELEASED.load(Ordering::SeqCst), before + 1, "consumed input released exactly once");
    } else {
        assert_eq!(RELEASED.load(Ordering::SeqCst), before, "describe borrows");
    }
});
