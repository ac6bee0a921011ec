//! The herald server binary: `herald serve` runs the broker with the Kafka
//! listener. Configuration comes from flags, `HERALD_*` environment
//! variables and a TOML file (in that order of precedence); logs go to
//! stderr through `tracing`.

mod cli;
mod serve;
mod settings;

use std::io::IsTerminal;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let Command::Serve(args) = cli.command;
    let settings = match settings::resolve(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herald: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&settings.log_level))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("herald")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herald: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve::run(settings)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("herald: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
