//! The herald binary: `herald serve` runs the broker (Kafka listener and
//! admin HTTP listener); `topic`, `group`, `produce`, `consume` and `bench` are
//! Kafka clients of a running broker. Server configuration comes from
//! flags, `HERALD_*` environment variables and a TOML file (in that order
//! of precedence); server logs go to stderr through `tracing`. Every
//! failure ends with a one-line reason on stderr and a non-zero exit.

mod admin_http;
mod cli;
mod cli_client;
mod cluster_settings;
mod commands;
mod flow_admin;
mod flow_settings;
mod relay_settings;
mod scrape;
mod security_settings;
mod serve;
mod settings;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, ServeArgs};

/// Exit code of a bad argument or configuration value.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_failure(&e),
    };
    match cli.command {
        Command::Serve(args) => serve_main(*args),
        Command::Topic(command) => run_client(commands::topic::run(command)),
        Command::Group(command) => run_client(commands::group::run(command)),
        Command::Produce(args) => run_client(commands::produce::run(args)),
        Command::Consume(args) => run_client(commands::consume::run(args)),
        Command::Bench(args) => run_client(commands::bench::run(args)),
        Command::User(command) => run_client(commands::user::run(command)),
        Command::Acl(command) => run_client(commands::acl::run(command)),
        Command::Cluster(command) => run_client(commands::cluster::run(command)),
        Command::Partition(command) => run_client(commands::partition::run(command)),
        Command::Tenant(command) => run_client(commands::tenant::run(command)),
        Command::Snapshot(command) => run_client(commands::snapshot::run(command)),
        Command::Query(command) => run_client(commands::query::run(command)),
        Command::FlowControl(command) => run_client(commands::flow_control::run(command)),
        Command::Sql(args) => run_client(commands::sql::run(args)),
        Command::History(args) => run_client(commands::sql::history(args)),
        Command::Subscribe(args) => run_client(commands::subscribe::run(args)),
        Command::Publish(args) => run_client(commands::publish::run(args)),
    }
}

/// Help and version go to stdout as clap formats them; an argument error
/// is reduced to its one-line reason.
fn usage_failure(error: &clap::Error) -> ExitCode {
    if !error.use_stderr() {
        let _ = error.print();
        return ExitCode::SUCCESS;
    }
    let rendered = error.to_string();
    let reason = rendered
        .lines()
        .next()
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ");
    eprintln!("herald: {reason} (see --help)");
    ExitCode::from(EXIT_USAGE)
}

fn run_client(command: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herald: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("herald: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve_main(args: ServeArgs) -> ExitCode {
    let print_config = args.print_config;
    let settings = match settings::resolve(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("herald: {e:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if print_config {
        return match settings::to_toml(&settings.effective) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("herald: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(log_directives(
            &settings.log_level,
        )))
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
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("herald: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The log filter for `level`: a bare `info`, `debug` or `trace` keeps
/// the Raft engine's own logs at `warn`, since at `info` it narrates every
/// vote and heartbeat; directives given in full are taken as they are.
fn log_directives(level: &str) -> String {
    let bare = ["info", "debug", "trace"].contains(&level.trim());
    if bare {
        format!("{level},openraft=warn")
    } else {
        level.to_owned()
    }
}
