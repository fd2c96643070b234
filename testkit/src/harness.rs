//! The harness of test binaries that check hardware a machine may lack (a GPU, a driver): each
//! check runs, or, when the machine cannot run them, prints `SKIPPED` with the reason and counts
//! as skipped, never as passed. The closing line reads "`suite`: N passed, N failed, N skipped",
//! and the process exits 1 when a check failed.

/// A named check: `Ok` or what went wrong.
pub type Check = fn() -> Result<(), String>;

/// Runs `checks` in order, unless `skip` says why none can run here (then each is printed as
/// skipped with that reason). A check that panics counts as failed.
pub fn run(suite: &str, checks: &[(&str, Check)], skip: Option<&str>) {
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    println!("running {} {suite} checks", checks.len());
    for &(name, check) in checks {
        if let Some(why) = skip {
            println!("test {name} ... SKIPPED ({why})");
            skipped += 1;
            continue;
        }
        match std::panic::catch_unwind(check) {
            Ok(Ok(())) => {
                println!("test {name} ... ok");
                passed += 1;
            }
            Ok(Err(msg)) => {
                println!("test {name} ... FAILED: {msg}");
                failed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED: panicked");
                failed += 1;
            }
        }
    }
    println!("\n{suite}: {passed} passed, {failed} failed, {skipped} skipped");
    if failed > 0 {
        std::process::exit(1);
    }
}
