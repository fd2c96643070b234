//! A crate of four rooms for the rooms-table test (scripts/module-graph-test.sh): the root
//! declares and re-exports; `view` uses `dtype` and `codes`.
mod codes;
mod dtype;
mod view;

pub use view::View;
