//! What a PJRT plugin offers and what dlport does with it, found by calling it:
//! `cargo run -p dlport-native --features pjrt --example pjrt_probe -- PATH/TO/PLUGIN.so`
//! (the same report as `python -m dlport pjrt PATH_OR_NAME` and C's `dlport_pjrt_probe`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: pjrt_probe PATH/TO/PLUGIN.so");
        return ExitCode::from(2);
    };
    match dlport_native::pjrt::probe(&path) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pjrt_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
