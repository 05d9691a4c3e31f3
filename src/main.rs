//! The `a3g` command: parse the arguments, run, report an error on one line.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = a3g::cli::Cli::from_command_line();
    let outcome = a3g::run(cli).and_then(|()| match a3g::console::take_stdout_failure() {
        None => Ok(()),
        Some(cause) => Err(a3g::error::Error::Io {
            action: "write the command's output to",
            path: "stdout".into(),
            cause,
        }),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            a3g::console::warn(&format!("error: {}", err.report()));
            ExitCode::FAILURE
        }
    }
}
