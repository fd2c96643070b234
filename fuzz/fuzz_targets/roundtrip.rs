//! Import → export → import: arbitrary shapes, strides and offsets over a Vec; whatever the
//! builder accepts must re-import with the same metadata, convert both ways, and release once.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;
use common::Input;
use dlport_core::abi::TypeCode;
use dlport_core::{DataType, ExportBuilder, ManagedTensor};

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let ndim = usize::from(inp.u8() % 6);
    let shape: Vec<i64> = (0..ndim).map(|_| inp.i64()).collect();
    let strides: Vec<i64> = (0..ndim).map(|_| inp.i64()).collect();
    let dtype = DataType::new(TypeCode(inp.u8() % 19), [4u8, 6, 8, 16, 32, 64][usize::from(inp.u8() % 6)], 1 + u16::from(inp.u8() % 2));
    let byte_offset = u64::from(inp.u16());
    let len = usize::from(inp.u16() % 4096);
    let mut b = ExportBuilder::new(vec![7u8; len], dtype, &shape).byte_offset(byte_offset);
    if inp.u8() % 2 == 0 {
        b = b.strides(&strides);
    }
    let legacy = inp.u8() % 2 == 0;
    let Ok(t) = (if legacy { b.build_legacy() } else { b.build() }) else { return };
    let (shape0, strides0): (Vec<i64>, Vec<i64>) = (t.view().shape().to_vec(), t.view().strides().collect());
    let raw = t.into_raw();
    // SAFETY: our own export, handed over once.
    let again = unsafe { ManagedTensor::from_raw(raw) }.expect("our export must pass our validator");
    assert_eq!(again.view().shape(), &shape0[..]);
    let v = again.into_versioned().unwrap().into_legacy(dlport_core::CopyPolicy::Never).unwrap().into_versioned().unwrap();
    assert_eq!(v.view().strides().collect::<Vec<_>>(), strides0);
    assert_eq!(v.view().dtype(), dtype);
});
