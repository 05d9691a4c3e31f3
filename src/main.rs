//! The `a3g` command: parse the arguments, run, report an error on one line.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = a3g::cli::Cli::parse();
    match a3g::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            a3g::console::warn(&format!("error: {}", err.report()));
            ExitCode::FAILURE
        }
    }
}
