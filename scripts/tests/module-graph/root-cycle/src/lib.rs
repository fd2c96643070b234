//! A planted cycle through a root function: the root's own code names `room` by its bare name,
//! and `room` calls back into the root. scripts/module-graph-check.py must fail on it.
mod room;

pub fn helper() -> u32 {
    room::value() + 1
}
