//! The `security` subcommands of the load generator: seed a broker with
//! ACLs, measure produce and fetch as one security setup, count SCRAM
//! logins. Passwords come from the environment, never the command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use herald_client::{ConnectOptions, SaslLogin};

use crate::security_bench::{self, MeasureSpec};

/// The administrator's password (seeding).
pub const ADMIN_PASSWORD_ENV: &str = "HERALD_SASL_PASSWORD";
/// The benchmark user's password.
pub const BENCH_PASSWORD_ENV: &str = "HERALD_BENCH_PASSWORD";

/// How to reach one listener.
#[derive(Debug, Args)]
pub struct Listener {
    /// The listener's address.
    #[arg(long)]
    pub bootstrap: SocketAddr,
    /// TLS, checking the broker's certificate against this CA (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Log in with SASL SCRAM-SHA-512 as this user.
    #[arg(long)]
    pub sasl_user: Option<String>,
}

/// `herald-loadgen security ...`.
#[derive(Debug, Subcommand)]
pub enum SecurityCommand {
    /// Gives a broker the ACL load (as the administrator in
    /// HERALD_SASL_PASSWORD) and the benchmark user (password in
    /// HERALD_BENCH_PASSWORD).
    Seed {
        #[command(flatten)]
        listener: Listener,
        /// Principals the ACLs are spread over.
        #[arg(long, default_value_t = 1000)]
        principals: u32,
        /// ACLs.
        #[arg(long, default_value_t = 10_000)]
        acls: u32,
        /// The benchmark user.
        #[arg(long, default_value = "bench")]
        user: String,
    },
    /// Produce and fetch at each batch size; appends rows.
    Measure {
        #[command(flatten)]
        listener: Listener,
        #[command(flatten)]
        run: RunArgs,
        /// Records per request.
        #[arg(long, value_delimiter = ',', default_value = "1,1024")]
        batches: Vec<u32>,
    },
    /// Logins per second (and per broker core); appends rows.
    Handshakes {
        #[command(flatten)]
        listener: Listener,
        #[command(flatten)]
        run: RunArgs,
        /// Concurrent connecting tasks.
        #[arg(long, default_value_t = 8)]
        connections: u32,
    },
}

/// What every measuring command takes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `herald` or `kafka`.
    #[arg(long)]
    pub broker: String,
    /// The setup's name in the rows.
    #[arg(long)]
    pub setup: String,
    /// Seconds per run.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Runs of each point.
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
    /// The number the first run's rows carry (a script that interleaves
    /// setups runs one at a time).
    #[arg(long, default_value_t = 0)]
    pub first_repeat: u32,
    /// The broker's PID, for its CPU time.
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// JSON-lines file the rows are appended to.
    #[arg(long)]
    pub out: PathBuf,
}

fn options(listener: &Listener, password_env: &str) -> anyhow::Result<ConnectOptions> {
    let sasl = match &listener.sasl_user {
        Some(user) => Some(SaslLogin {
            mechanism: "SCRAM-SHA-512".into(),
            user: user.clone(),
            password: std::env::var(password_env)
                .with_context(|| format!("SASL needs the password in {password_env}"))?,
        }),
        None => None,
    };
    Ok(ConnectOptions {
        tls_ca: listener.tls_ca.clone(),
        sasl,
    })
}

fn spec(listener: &Listener, run: &RunArgs, batches: Vec<u32>) -> anyhow::Result<MeasureSpec> {
    Ok(MeasureSpec {
        addr: listener.bootstrap,
        broker: run.broker.clone(),
        setup: run.setup.clone(),
        security: options(listener, BENCH_PASSWORD_ENV)?,
        batches,
        secs: run.secs,
        repeats: run.repeats,
        first_repeat: run.first_repeat,
        broker_pid: run.broker_pid,
    })
}

/// Runs one command.
pub fn run(command: SecurityCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match command {
        SecurityCommand::Seed {
            listener,
            principals,
            acls,
            user,
        } => {
            let admin = options(&listener, ADMIN_PASSWORD_ENV)?;
            let password = std::env::var(BENCH_PASSWORD_ENV).with_context(|| {
                format!("the benchmark user's password goes in {BENCH_PASSWORD_ENV}")
            })?;
            runtime.block_on(security_bench::seed(
                listener.bootstrap,
                &admin,
                principals,
                acls,
                &user,
                &password,
            ))?;
            eprintln!("seeded {acls} ACLs over {principals} principals, and user {user}");
        }
        SecurityCommand::Measure {
            listener,
            run,
            batches,
        } => {
            let spec = spec(&listener, &run, batches)?;
            runtime.block_on(security_bench::measure(&spec, &run.out))?;
        }
        SecurityCommand::Handshakes {
            listener,
            run,
            connections,
        } => {
            let spec = spec(&listener, &run, Vec::new())?;
            runtime.block_on(security_bench::handshakes(&spec, connections, &run.out))?;
        }
    }
    Ok(())
}
