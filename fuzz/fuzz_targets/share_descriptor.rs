//! Share descriptors from another process (`dlport_native::share`): whatever the bytes,
//! `Descriptor::from_bytes` never panics; what parses writes back to bytes that parse to the same
//! descriptor; and a memfd descriptor opened against a real 4 KiB memfd either is refused or
//! gives a tensor every byte of which is readable (a compact copy of it touches each one, so a
//! mapping shorter than the tensor's span would fault here). Each is opened against two memfds:
//! one shared writable (no write seal: a READ_ONLY descriptor must be refused over it, whoever
//! holds its fd could write it) and one shared read-only (write-sealed: whatever opens is
//! READ_ONLY).
#![no_main]
use std::os::fd::AsFd;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

use dlport_native::dlport_core::DataType;
use dlport_native::dlport_core::abi::FLAG_READ_ONLY;
use dlport_native::dlport_core::backend::compact_bytes;
use dlport_native::share::{self, Descriptor, HandleKind, ShareOptions, Shared};

/// Two 4 KiB memfds of dlport's, shared once for the whole run (the fds every descriptor is
/// opened against): one writable, one read-only (sealed F_SEAL_FUTURE_WRITE).
fn memfds() -> &'static [Shared; 2] {
    static SHARED: OnceLock<[Shared; 2]> = OnceLock::new();
    SHARED.get_or_init(|| {
        [false, true].map(|read_only| {
            let t = share::alloc(DataType::UINT8, &[4096]).expect("a 4 KiB memfd");
            let options = ShareOptions {
                read_only,
                ..Default::default()
            };
            share::share(&t.view(), &options).expect("share it")
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(d) = Descriptor::from_bytes(data) else {
        return;
    };
    let bytes = d.to_bytes().expect("a parsed descriptor writes back");
    assert_eq!(
        Descriptor::from_bytes(&bytes).expect("what it wrote parses"),
        d
    );
    if d.kind != HandleKind::Memfd {
        return;
    }
    for (shared, sealed) in memfds().iter().zip([false, true]) {
        let fds: Vec<_> = shared.fds().iter().map(|f| f.as_fd()).collect();
        let Ok(t) = share::open(&d, &fds) else {
            continue;
        };
        assert!(
            sealed || d.flags & FLAG_READ_ONLY == 0,
            "a READ_ONLY descriptor opened over a memfd without a write seal"
        );
        assert!(
            !sealed || t.is_read_only(),
            "a write-sealed memfd opened writable"
        );
        let view = t.view();
        // The mapping is at most 4 KiB, so a tensor inside it has at most 4 KiB of distinct
        // bytes; broadcasting (stride 0) can make its compact form larger: cap the copy.
        if let Ok(n) = compact_bytes(view.dtype(), view.shape())
            && n <= 1 << 20
        {
            let mut out = vec![0u8; n];
            view.copy_to_compact(&mut out).expect("an opened tensor reads");
        }
    }
});
