//! Benchmark helpers (see `src/bin` and `benches/`).
