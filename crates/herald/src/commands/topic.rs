//! `herald topic create|list|describe|alter|delete`.

use anyhow::bail;

use crate::cli::TopicCommand;
use herald_client::admin::{self, ConfigChange};
use herald_client::data::{list_offsets, EARLIEST, LATEST};
use herald_client::Connection;

/// Runs one topic subcommand.
pub async fn run(command: TopicCommand) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create {
            name,
            partitions,
            configs,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            let count = admin::create_topic(&mut connection, &name, partitions, &configs).await?;
            println!("created topic {name} with {count} partitions");
        }
        TopicCommand::List { broker } => {
            let mut connection = broker.connect().await?;
            for topic in admin::metadata(&mut connection, None, false).await? {
                println!("{}\t{} partitions", topic.name, topic.partitions.len());
            }
        }
        TopicCommand::Describe { name, broker } => {
            let mut connection = broker.connect().await?;
            describe(&mut connection, &name).await?;
        }
        TopicCommand::Alter {
            name,
            partitions,
            set,
            delete,
            broker,
        } => {
            if partitions.is_none() && set.is_empty() && delete.is_empty() {
                bail!("nothing to alter: give --partitions, --set or --delete-config");
            }
            let mut connection = broker.connect().await?;
            if let Some(count) = partitions {
                admin::create_partitions(&mut connection, &name, count).await?;
                println!("topic {name} now has {count} partitions");
            }
            let changes: Vec<ConfigChange> = set
                .into_iter()
                .map(|(k, v)| ConfigChange::Set(k, v))
                .chain(delete.into_iter().map(ConfigChange::Delete))
                .collect();
            if !changes.is_empty() {
                admin::alter_configs(&mut connection, &name, &changes).await?;
                println!("altered {} config(s) of topic {name}", changes.len());
            }
        }
        TopicCommand::Delete { name, broker } => {
            let mut connection = broker.connect().await?;
            admin::delete_topic(&mut connection, &name).await?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}

async fn describe(connection: &mut Connection, name: &str) -> anyhow::Result<()> {
    let topic = admin::topic(connection, name).await?;
    let indexes: Vec<i32> = topic.partitions.iter().map(|(p, _)| *p).collect();
    let starts = list_offsets(connection, name, &indexes, EARLIEST).await?;
    let ends = list_offsets(connection, name, &indexes, LATEST).await?;
    let configs = admin::describe_configs(connection, name).await?;
    println!("topic: {}", topic.name);
    println!("id: {}", topic.id);
    println!("partitions: {}", topic.partitions.len());
    println!("PARTITION\tLEADER\tSTART\tEND");
    for (index, leader) in &topic.partitions {
        let offset = |list: &[(i32, Option<i64>)]| {
            list.iter()
                .find(|(p, _)| p == index)
                .and_then(|(_, o)| *o)
                .map_or_else(|| "-".to_owned(), |o| o.to_string())
        };
        println!("{index}\t{leader}\t{}\t{}", offset(&starts), offset(&ends));
    }
    println!("configs:");
    for config in configs {
        let source = if config.is_override {
            "topic"
        } else {
            "default"
        };
        let access = if config.read_only { ", read-only" } else { "" };
        let value = config.value.as_deref().unwrap_or("(null)");
        println!("  {} = {value} ({source}{access})", config.name);
    }
    Ok(())
}
