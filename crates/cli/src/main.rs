//! The `ioshare` command: parses, calls the crates, prints. No logic lives here.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod model;

/// ioshare: IO isolation for containers and multi-tenant storage.
#[derive(Parser)]
#[command(name = "ioshare", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Derive a cost model's coefficients from an io.cost.model line.
    Model(model::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Model(args) => model::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ioshare: {err:#}");
            ExitCode::FAILURE
        }
    }
}
