//! The same code with a root that only declares and re-exports: no cycle.
mod helper;
mod room;

pub use helper::helper;
pub use room::{twice, value};
