//! Tests that start their own binary again in a child process (the sharing tests' other
//! process, a test that needs a fresh process-wide default).

use std::process::Command;

/// The environment variable that names the runner the test binaries run under, as cargo's
/// `CARGO_TARGET_<triple>_RUNNER` does (`qemu-aarch64 -L /usr/aarch64-linux-gnu` when the tests
/// of another architecture run under QEMU user mode): cargo does not tell a test binary its
/// runner, and without it the kernel refuses to execute a binary of another architecture.
pub const RUNNER: &str = "DLPORT_TEST_RUNNER";

/// A command that runs this test binary again: through the runner in [`RUNNER`] when it is
/// set (its words, then the binary), directly otherwise.
pub fn this_binary() -> std::io::Result<Command> {
    let exe = std::env::current_exe()?;
    let runner = std::env::var(RUNNER).unwrap_or_default();
    let mut words = runner.split_whitespace();
    Ok(match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(exe);
            command
        }
        None => Command::new(exe),
    })
}
