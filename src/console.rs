//! The terminal: a command's own output on stdout, everything else on stderr, and
//! neither allowed to stop a run. `println!` panics when stdout is a closed pipe
//! (`a3g train | head -3`); here a failed write only silences that stream, so training
//! goes on and still writes its checkpoints and logs.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);
/// What the command says on stderr when stdout closes under it. None by default: a
/// listing whose reader has read enough (`a3g envs | head -1`) just ends quietly.
static CLOSED_STDOUT_NOTE: OnceLock<&'static str> = OnceLock::new();

/// Sets what a command that goes on after its stdout closes says then: what it keeps
/// writing, so that `a3g train | head` does not look like a stopped run.
pub fn note_when_stdout_closes(note: &'static str) {
    let _ = CLOSED_STDOUT_NOTE.set(note);
}

/// Writes one line of the command's own output to stdout.
pub fn say(line: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "{line}").and_then(|()| stdout.flush()).is_err() {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if let Some(note) = CLOSED_STDOUT_NOTE.get() {
            warn(&format!("note: stdout was closed; {note}"));
        }
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
