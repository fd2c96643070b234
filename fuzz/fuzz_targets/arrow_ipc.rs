//! Arrow IPC stream bytes through `arrow::read_ipc_stream`, with a 64 MiB allocation limit in
//! force: never a panic, never an allocation past the limit (libFuzzer's -malloc_limit_mb and
//! -rss_limit_mb trip one), and every tensor it returns reads back in full.
#![no_main]
use libfuzzer_sys::fuzz_target;

use dlport_native::arrow::read_ipc_stream;

fuzz_target!(|data: &[u8]| {
    static LIMIT: std::sync::Once = std::sync::Once::new();
    LIMIT.call_once(|| {
        dlport_core::set_alloc_limit(64 << 20);
    });
    if let Ok(tensors) = read_ipc_stream(data) {
        for t in tensors {
            let view = t.tensor.view();
            // The tensor views the stream's body: never more bytes than the input holds.
            let span = view.byte_span().len();
            assert!(
                span <= data.len() as u64,
                "{span} bytes from {}",
                data.len()
            );
            let bytes = view.numel() as usize * view.dtype().size_bytes();
            let mut out = vec![0u8; bytes];
            view.copy_to_compact(&mut out).unwrap();
        }
    }
});
