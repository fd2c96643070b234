//! Benchmark helpers (see `src/bin` and `benches/`).

pub mod import_export;

/// The repository README's Rust examples (Getting started included), compiled and run as doc
/// tests here, in a crate that is not published (the published crates carry their own READMEs).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
