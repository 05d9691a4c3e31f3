//! The terminal: a command's own output on stdout, everything else on stderr, and
//! neither allowed to stop a run. `println!` panics when stdout is a closed pipe
//! (`a3g train | head -3`); here a failed write only silences that stream, so training
//! goes on and still writes its checkpoints and logs.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes one line of the command's own output to stdout.
pub fn say(line: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{line}").and_then(|()| stdout.flush()).is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        warn("note: stdout was closed; a3g goes on, and its game log and checkpoints are still written");
    }
}

/// Writes one line of diagnostics (warnings, notes, progress) to stderr.
pub fn warn(line: &str) {
    if STDERR_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    if writeln!(std::io::stderr().lock(), "{line}").is_err() {
        STDERR_CLOSED.store(true, Ordering::Relaxed);
    }
}
