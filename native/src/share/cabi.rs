//! The C entries of `share` (placeholder).
