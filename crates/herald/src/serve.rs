//! `herald serve`: start the admin listener (not ready yet), open the
//! broker, start maintenance, serve Kafka and push clients (ready) until
//! SIGTERM or SIGINT, then shut down cleanly (not ready; push sessions told
//! to go away; answer what was read, close every log).

use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use herald_admin::{AdminServer, Readiness};
use herald_broker::{Broker, HistoryIndexer, Maintenance};
use herald_gateway::{GatewayCounters, GatewayServer};
use herald_kafka::KafkaServer;
use herald_metrics::Metrics;
use herald_push::PushEngine;
use tokio_util::sync::CancellationToken;

use crate::scrape;
use crate::settings::Settings;

/// Runs the broker until a termination signal.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::new();
    let opened: Arc<OnceLock<Arc<Broker>>> = Arc::new(OnceLock::new());
    let pushing: Arc<OnceLock<(Arc<PushEngine>, GatewayCounters)>> = Arc::new(OnceLock::new());
    let admin = {
        let api_broker = Arc::clone(&opened);
        let opened = Arc::clone(&opened);
        let pushing = Arc::clone(&pushing);
        // Called on a blocking thread for each scrape (see herald-admin);
        // its only wait, for the group coordinator, is bounded.
        let refresh = Box::new(move |metrics: &Metrics| {
            if let Some(broker) = opened.get() {
                scrape::refresh(broker, metrics);
            }
            if let Some((engine, listener)) = pushing.get() {
                scrape::refresh_push(engine, listener, metrics);
            }
            scrape::refresh_process(metrics);
        });
        AdminServer::bind(
            settings.admin_listen,
            Arc::clone(&metrics),
            refresh,
            readiness.clone(),
            api_broker,
        )
        .await
        .with_context(|| format!("binding the admin listener on {}", settings.admin_listen))?
    };
    let admin_addr = admin.local_addr().context("reading the admin address")?;
    let flow_control = admin.flow_control();
    tracing::info!(%admin_addr, "admin listener ready on {admin_addr}");
    let admin_shutdown = CancellationToken::new();
    let admin_task = tokio::spawn(admin.run(admin_shutdown.clone()));

    let broker_config = settings.broker;
    let data_dir = broker_config.data_dir.clone();
    let broker = tokio::task::spawn_blocking(move || Broker::open(broker_config))
        .await
        .context("opening the broker")?
        .with_context(|| format!("opening data directory {}", data_dir.display()))?;
    let cluster = join_cluster(&broker, settings.cluster.clone()).await?;
    if !wait_until_added(&cluster).await? {
        admin_shutdown.cancel();
        let _ = admin_task.await;
        leave_cluster(cluster).await;
        tokio::task::spawn_blocking(move || broker.close())
            .await
            .context("closing logs")??;
        tracing::info!("shutdown complete");
        return Ok(());
    }
    if let Some(relay) = &broker.config().relay {
        tracing::info!(
            upstream = ?relay.upstream().bootstrap(),
            topics = ?relay.topics().collect::<Vec<_>>(),
            "relay: mirroring topics from the upstream"
        );
    }
    herald_broker::relay::start(&broker);
    broker
        .start_queries()
        .context("starting the registered queries")?;
    let maintenance =
        Maintenance::start(Arc::clone(&broker)).context("starting the maintenance thread")?;
    let history = if broker.config().history_index {
        Some(HistoryIndexer::start(&broker).context("starting the history indexer")?)
    } else {
        None
    };
    if let Some(admin) = &settings.admin {
        bootstrap_admin(&broker, admin)?;
    }
    let server = KafkaServer::bind(settings.kafka, Arc::clone(&broker))
        .await
        .context("binding the Kafka listeners")?
        .with_metrics(Arc::clone(&metrics.kafka));
    let _ = flow_control.set(Arc::new(crate::flow_admin::GateHandle(server.flow_gate())));
    let engine =
        PushEngine::new(Arc::clone(&broker), settings.push).context("starting the push engine")?;
    let push_listen = settings.gateway.listen;
    let gateway = GatewayServer::bind(settings.gateway, Arc::clone(&engine))
        .await
        .with_context(|| format!("binding the push listener on {push_listen}"))?;
    let push_addr = gateway.local_addr().context("reading the push address")?;
    let _ = pushing.set((Arc::clone(&engine), gateway.counters()));
    let _ = opened.set(Arc::clone(&broker));
    // `/ready` names every partition whose storage failed; weak, so the
    // check never keeps the broker alive past its close.
    let checked = Arc::downgrade(&broker);
    readiness.set_health_check(Arc::new(move || {
        checked.upgrade().map_or_else(Vec::new, |broker| {
            broker
                .failed_partitions()
                .into_iter()
                .map(|(topic, partition, reason)| {
                    format!("partition {topic}-{partition} storage failed: {reason}")
                })
                .collect()
        })
    }));
    let addr = server.local_addr().context("reading the bound address")?;
    let listeners = server.local_addrs();
    #[cfg(feature = "cluster")]
    if let Some(cluster) = &cluster {
        cluster.advertise_endpoints(server.advertised_endpoints());
    }

    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(server.run(shutdown.clone()));
    let push_task = tokio::spawn(gateway.run(shutdown.clone()));
    tracing::info!(%push_addr, "push listener ready on {push_addr}");
    // The listener is bound (connections queue) and every log is open. Ready
    // before the log line, which scripts and tests wait for.
    readiness.set_ready();
    for (name, protocol, bound) in listeners {
        if bound != addr {
            tracing::info!(%bound, listener = %name, %protocol, "kafka listener {name} ({protocol}) ready on {bound}");
        }
    }
    tracing::info!(%addr, "kafka listener ready on {addr}");
    let signal = wait_for_signal().await?;
    tracing::info!(signal, "shutting down");
    readiness.set_not_ready();
    shutdown.cancel();
    if let Err(e) = serving.await {
        tracing::error!(error = %e, "listener task failed");
    }
    if let Err(e) = push_task.await {
        tracing::error!(error = %e, "push listener task failed");
    }
    drop(engine);
    admin_shutdown.cancel();
    if let Err(e) = admin_task.await {
        tracing::error!(error = %e, "admin listener task failed");
    }
    if let Some(history) = history {
        tokio::task::spawn_blocking(move || history.stop())
            .await
            .context("stopping the history indexer")?;
    }
    maintenance.stop();
    leave_cluster(cluster).await;
    tokio::task::spawn_blocking(move || broker.close())
        .await
        .context("closing logs")??;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Gives the bootstrap administrator SCRAM credentials of both mechanisms
/// for its password, unless the stored ones already match it (so that a
/// restart does not rewrite the metadata).
fn bootstrap_admin(
    broker: &Broker,
    admin: &crate::security_settings::BootstrapAdmin,
) -> anyhow::Result<()> {
    use herald_auth::{ScramCredential, ScramMechanism, SecurityCommand};
    let state = broker.security().state();
    let mut commands = Vec::new();
    for mechanism in ScramMechanism::ALL {
        let current = state.scram(&admin.user, mechanism);
        if current.is_some_and(|c| c.verify_password(mechanism, admin.password.as_bytes())) {
            continue;
        }
        let credential = ScramCredential::from_password(
            mechanism,
            &admin.password,
            herald_auth::scram::ITERATIONS_MIN,
        )
        .context("making the administrator's credentials")?;
        commands.push(SecurityCommand::UpsertScram {
            user: admin.user.clone(),
            mechanism,
            credential,
        });
    }
    if !commands.is_empty() {
        broker
            .apply_security_all(commands)
            .context("storing the administrator's credentials")?;
        tracing::info!(user = %admin.user, "administrator credentials set");
    }
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

/// The cluster handle of a node that joined one.
#[cfg(feature = "cluster")]
type ClusterHandle = Option<Arc<herald_broker::cluster::Cluster>>;
#[cfg(not(feature = "cluster"))]
type ClusterHandle = Option<()>;

/// Joins the cluster the settings name, if any.
async fn join_cluster(
    broker: &Arc<Broker>,
    settings: Option<crate::cluster_settings::ClusterSettings>,
) -> anyhow::Result<ClusterHandle> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    #[cfg(feature = "cluster")]
    {
        use herald_broker::cluster::{Cluster, ClusterConfig, ClusterNode};
        let config = ClusterConfig {
            node_id: settings.node_id,
            listen: settings.listen,
            nodes: settings
                .nodes
                .into_iter()
                .map(|(id, n)| {
                    (
                        id,
                        ClusterNode {
                            raft: n.raft,
                            kafka_host: n.kafka_host,
                            kafka_port: n.kafka_port,
                        },
                    )
                })
                .collect(),
            join: settings.join,
            timing: herald_raft_timing(),
            default_replication_factor: settings.default_replication_factor,
            replica_lag_max: std::time::Duration::from_millis(settings.replica_lag_time_max_ms),
            offsets_partitions: settings.offsets_partitions,
            offsets_replication_factor: settings.offsets_replication_factor,
            metadata_image_bytes: settings.metadata_image_bytes,
        };
        let cluster = Cluster::start(Arc::clone(broker), config)
            .await
            .context("joining the cluster")?;
        Ok(Some(cluster))
    }
    #[cfg(not(feature = "cluster"))]
    {
        let _ = (broker, settings);
        anyhow::bail!("this herald was built without cluster support (the `cluster` feature)")
    }
}

/// A node joining a running cluster serves nothing until it is added,
/// and a restarted node nothing until it has applied its metadata log
/// again: false when a termination signal came first.
async fn wait_until_added(cluster: &ClusterHandle) -> anyhow::Result<bool> {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = cluster {
        tokio::select! {
            () = cluster.wait_until_added() => {}
            signal = wait_for_signal() => {
                tracing::info!(signal = signal?, "shutting down before being added to the cluster");
                return Ok(false);
            }
        }
        // Clients see no earlier state than the node had (a topic not yet
        // reopened, an ACL since deleted) while the log is applied again.
        tokio::select! {
            () = cluster.wait_until_replayed() => {}
            signal = wait_for_signal() => {
                tracing::info!(signal = signal?, "shutting down while the metadata log is applied again");
                return Ok(false);
            }
        }
    }
    let _ = cluster;
    Ok(true)
}

#[cfg(feature = "cluster")]
fn herald_raft_timing() -> herald_broker::cluster::RaftTiming {
    herald_broker::cluster::RaftTiming::default()
}

/// Stops this node's part of its cluster (the Raft listener and the
/// metadata replica) before the logs close.
async fn leave_cluster(cluster: ClusterHandle) {
    #[cfg(feature = "cluster")]
    if let Some(cluster) = cluster {
        cluster.shutdown().await;
    }
    #[cfg(not(feature = "cluster"))]
    let _ = cluster;
}
