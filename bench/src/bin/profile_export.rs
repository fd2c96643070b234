//! A loop of exports for profilers (`valgrind --tool=callgrind`).
use dlport_core::ExportBuilder;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    for _ in 0..n {
        let v = vec![1.0f32; 120];
        let raw = ExportBuilder::from_vec(v, &[120])
            .build()
            .unwrap()
            .into_raw();
        // SAFETY: our own export, released once.
        unsafe { std::hint::black_box(raw).release() };
    }
}
