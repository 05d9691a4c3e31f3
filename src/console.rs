//! The terminal: a command's own output on stdout, everything else on stderr, and
//! neither allowed to stop a run. `println!` panics when stdout is a closed pipe
//! (`a3g train | head -3`); here a failed write only silences that stream, so training
//! goes on and still writes its checkpoints and logs. Output lost to a full disk (stdout
//! redirected to a file) does not stop a run either, but the command then ends in an
//! error, so a script that keeps its output does not take an empty file for it.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::error;

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Why stdout stopped taking lines when the disk it went to was full: that loses
/// output the user kept, so the command ends in an error.
static STDOUT_FAILURE: Mutex<Option<std::io::Error>> = Mutex::new(None);
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
    if let Err(failure) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        use std::io::ErrorKind;
        let what = match failure.kind() {
            ErrorKind::BrokenPipe => "stdout was closed".to_string(),
            _ => format!("cannot write stdout ({})", error::os_reason(&failure)),
        };
        // Output kept in a file the disk could not take is lost: an error.
        if error::is_disk_full(&failure) {
            *STDOUT_FAILURE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(failure);
        }
        if let Some(note) = CLOSED_STDOUT_NOTE.get() {
            warn(&format!("note: {what}; {note}"));
        }
    }
}

/// What stopped stdout, if a full disk did: the command's output was lost, which
/// `main` reports as the command's error.
pub fn take_stdout_failure() -> Option<std::io::Error> {
    STDOUT_FAILURE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
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
