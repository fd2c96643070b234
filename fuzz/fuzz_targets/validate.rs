//! The validator over arbitrary DLTensor fields and backing memory: never a panic, and when it
//! accepts a host tensor whose span lies in the buffer, typed and strided reads agree.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;
use common::{Input, fields, inside};
use dlport_core::TensorRef;
use dlport_core::abi::DLPackVersion;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut f = fields(&mut inp);
    let mut backing = vec![0u8; 8192];
    for (i, b) in backing.iter_mut().enumerate() {
        *b = i as u8;
    }
    let tensor = f.tensor(&mut backing);
    let version = (f.version.0 != u32::MAX).then(|| DLPackVersion::new(f.version.0, f.version.1));
    let flags = if version.is_some() { f.flags } else { 0 };
    // SAFETY: shape and strides hold 64 values; data is only read below after checking that
    // the validated span lies inside `backing`.
    let Ok(view) = (unsafe { TensorRef::from_raw(&tensor, version, flags) }) else { return };
    assert!(view.ndim() <= 64);
    // The rule of device ids holds for everything validation accepts.
    assert!(view.device().has_valid_id(), "accepted {}", view.device());
    assert!(view.byte_span().lo <= 0 && view.byte_span().lo <= view.byte_span().hi);
    let info = dlport_core::layout::TensorInfo::from(&view);
    assert_eq!(info.shape.len(), view.ndim());
    if !inside(&view, &backing) || view.numel() > 100_000 {
        return;
    }
    if let Ok(bytes) = view.as_bytes() {
        assert_eq!(bytes.len() as i64, view.byte_span().hi);
    }
    if view.dtype() == dlport_core::DataType::UINT8 && view.layout().element_bits == 8 {
        let all = view.to_vec::<u8>().unwrap();
        assert_eq!(all.len() as u64, view.numel());
        if let Ok(s) = view.as_slice::<u8>() {
            assert_eq!(s, &all[..]);
        }
    }
});
