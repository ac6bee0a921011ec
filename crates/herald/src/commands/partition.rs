//! `herald partition reassign|cancel-reassignment|reassignments`: moving
//! partitions between nodes, over Alter/ListPartitionReassignments.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use herald_client::cluster_admin;

use crate::cli_client::PartitionCommand;

/// How often `--wait` looks.
const POLL: Duration = Duration::from_millis(500);

/// Runs one partition subcommand.
pub async fn run(command: PartitionCommand) -> anyhow::Result<()> {
    match command {
        PartitionCommand::Reassign {
            topic,
            partition,
            replicas,
            wait,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            cluster_admin::reassign(&mut connection, &topic, partition, Some(&replicas)).await?;
            let target = replicas
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(",");
            println!("reassigning {topic}/{partition} to {target}");
            if wait.wait {
                wait_until_settled(&mut connection, &topic, partition, wait.timeout_ms).await?;
                println!("{topic}/{partition} is on {target}");
            }
        }
        PartitionCommand::CancelReassignment {
            topic,
            partition,
            wait,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            cluster_admin::reassign(&mut connection, &topic, partition, None).await?;
            println!("cancelling the reassignment of {topic}/{partition}");
            if wait.wait {
                wait_until_settled(&mut connection, &topic, partition, wait.timeout_ms).await?;
                println!("{topic}/{partition} is back on its replicas");
            }
        }
        PartitionCommand::Reassignments { broker } => {
            let mut connection = broker.connect().await?;
            let ongoing = cluster_admin::reassignments(&mut connection).await?;
            if ongoing.is_empty() {
                println!("no reassignment in progress");
                return Ok(());
            }
            println!(
                "{:<30} {:>9}  {:<12} {:<12} REMOVING",
                "TOPIC", "PARTITION", "REPLICAS", "ADDING"
            );
            let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
            for r in ongoing {
                println!(
                    "{:<30} {:>9}  {:<12} {:<12} {}",
                    r.topic,
                    r.partition,
                    list(&r.replicas),
                    list(&r.adding),
                    list(&r.removing)
                );
            }
        }
    }
    Ok(())
}

/// Waits until no reassignment of `topic`/`partition` is listed.
async fn wait_until_settled(
    connection: &mut herald_client::Connection,
    topic: &str,
    partition: i32,
    timeout_ms: u64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    loop {
        let ongoing = cluster_admin::reassignments(connection)
            .await
            .context("watching the reassignment")?;
        if !ongoing
            .iter()
            .any(|r| r.topic == topic && r.partition == partition)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{topic}/{partition} is still moving after {timeout_ms} ms (it goes on)");
        }
        tokio::time::sleep(POLL).await;
    }
}
