//! `herald serve`: open the broker, start maintenance, serve Kafka clients
//! until SIGTERM or SIGINT, then shut down cleanly (answer what was read,
//! close every log).

use std::sync::Arc;

use anyhow::Context as _;
use herald_broker::{Broker, Maintenance};
use herald_kafka::KafkaServer;
use tokio_util::sync::CancellationToken;

use crate::settings::Settings;

/// Runs the broker until a termination signal.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let broker_config = settings.broker;
    let data_dir = broker_config.data_dir.clone();
    let broker = tokio::task::spawn_blocking(move || Broker::open(broker_config))
        .await
        .context("opening the broker")?
        .with_context(|| format!("opening data directory {}", data_dir.display()))?;
    let maintenance =
        Maintenance::start(Arc::clone(&broker)).context("starting the maintenance thread")?;
    let listen = settings.kafka.listen;
    let server = KafkaServer::bind(settings.kafka, Arc::clone(&broker))
        .await
        .with_context(|| format!("binding the Kafka listener on {listen}"))?;
    let addr = server.local_addr().context("reading the bound address")?;
    tracing::info!(%addr, "kafka listener ready on {addr}");

    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.run(shutdown.clone()));
    let signal = wait_for_signal().await?;
    tracing::info!(signal, "shutting down");
    shutdown.cancel();
    if let Err(e) = serving.await {
        tracing::error!(error = %e, "listener task failed");
    }
    maintenance.stop();
    tokio::task::spawn_blocking(move || broker.close())
        .await
        .context("closing logs")??;
    tracing::info!("shutdown complete");
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
