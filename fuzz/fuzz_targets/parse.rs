//! The dtype and device parsers: never a panic, and whatever parses displays and parses back
//! to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;

use dlport_core::{DataType, Device};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(dt) = s.parse::<DataType>() {
        let shown = dt.to_string();
        assert_eq!(shown.parse::<DataType>().unwrap(), dt, "{s:?} -> {shown:?}");
    }
    if let Ok(d) = s.parse::<Device>() {
        let shown = d.to_string();
        assert_eq!(shown.parse::<Device>().unwrap(), d, "{s:?} -> {shown:?}");
    }
});
