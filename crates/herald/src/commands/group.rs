//! `herald group list|describe|reset-offsets|delete`.

use std::collections::BTreeMap;

use anyhow::{bail, ensure};

use crate::cli::{GroupCommand, ResetTo};
use herald_client::data::{list_offsets, EARLIEST, LATEST};
use herald_client::errors::describe as describe_error;
use herald_client::groups::{self, Committer, GroupInfo};
use herald_client::{admin, Connection};

/// Runs one group subcommand.
pub async fn run(command: GroupCommand) -> anyhow::Result<()> {
    match command {
        GroupCommand::List { broker } => {
            let mut connection = broker.connect().await?;
            println!("GROUP\tSTATE\tPROTOCOL-TYPE");
            for group in groups::list_groups(&mut connection).await? {
                println!(
                    "{}\t{}\t{}",
                    group.group_id, group.state, group.protocol_type
                );
            }
        }
        GroupCommand::Describe {
            group,
            json,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            let report = GroupReport::gather(&mut connection, &group).await?;
            if json {
                println!("{}", report.to_json());
            } else {
                report.print();
            }
        }
        GroupCommand::ResetOffsets {
            group,
            topic,
            partitions,
            to,
            dry_run,
            broker,
        } => {
            let mut connection = broker.connect().await?;
            reset_offsets(&mut connection, &group, &topic, &partitions, to, dry_run).await?;
        }
        GroupCommand::Delete { group, broker } => {
            let mut connection = broker.connect().await?;
            groups::delete_group(&mut connection, &group).await?;
            println!("deleted group {group}");
        }
    }
    Ok(())
}

/// One partition's line of `group describe`.
#[derive(Debug)]
struct PartitionLine {
    committed: Option<i64>,
    end: Option<i64>,
    owner: Option<String>,
}

impl PartitionLine {
    /// Records between the committed offset and the end, as Kafka's tools
    /// count it; unknown without a commit.
    fn lag(&self) -> Option<i64> {
        Some(self.end?.saturating_sub(self.committed?).max(0))
    }
}

/// Everything `group describe` shows.
#[derive(Debug)]
struct GroupReport {
    info: GroupInfo,
    /// By (topic, partition): committed partitions and assigned ones.
    partitions: BTreeMap<(String, i32), PartitionLine>,
}

impl GroupReport {
    async fn gather(connection: &mut Connection, group: &str) -> anyhow::Result<Self> {
        let info = groups::describe_group(connection, group).await?;
        let committed = groups::committed_offsets(connection, group, None).await?;
        if info.state == "Dead" && committed.is_empty() {
            bail!("unknown group '{group}'");
        }
        let mut partitions: BTreeMap<(String, i32), PartitionLine> = BTreeMap::new();
        for offset in committed {
            partitions.insert(
                (offset.topic, offset.partition),
                PartitionLine {
                    committed: Some(offset.offset),
                    end: None,
                    owner: None,
                },
            );
        }
        for member in &info.members {
            for key in &member.assignment {
                partitions
                    .entry(key.clone())
                    .or_insert(PartitionLine {
                        committed: None,
                        end: None,
                        owner: None,
                    })
                    .owner = Some(member.member_id.clone());
            }
        }
        let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in partitions.keys() {
            by_topic.entry(topic.clone()).or_default().push(*partition);
        }
        for (topic, indexes) in by_topic {
            // A topic deleted since the commit has no end: lag stays unknown.
            let Ok(ends) = list_offsets(connection, &topic, &indexes, LATEST).await else {
                continue;
            };
            for (partition, end) in ends {
                if let Some(line) = partitions.get_mut(&(topic.clone(), partition)) {
                    line.end = end;
                }
            }
        }
        Ok(Self { info, partitions })
    }

    fn print(&self) {
        let info = &self.info;
        let protocol = if info.protocol.is_empty() {
            info.protocol_type.clone()
        } else {
            format!("{}/{}", info.protocol_type, info.protocol)
        };
        println!("group: {}", info.group_id);
        println!("state: {}", info.state);
        println!(
            "protocol: {}",
            if protocol.is_empty() { "-" } else { &protocol }
        );
        println!("members: {}", info.members.len());
        if !info.members.is_empty() {
            println!();
            println!("MEMBER\tINSTANCE\tCLIENT-ID\tHOST\tPARTITIONS");
            for member in &info.members {
                let assigned: Vec<String> = member
                    .assignment
                    .iter()
                    .map(|(t, p)| format!("{t}/{p}"))
                    .collect();
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    member.member_id,
                    member.instance_id.as_deref().unwrap_or("-"),
                    member.client_id,
                    or_dash(&member.client_host),
                    if assigned.is_empty() {
                        "-".to_owned()
                    } else {
                        assigned.join(",")
                    }
                );
            }
        }
        if !self.partitions.is_empty() {
            println!();
            println!("TOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tMEMBER");
            let show = |value: Option<i64>| value.map_or_else(|| "-".to_owned(), |v| v.to_string());
            for ((topic, partition), line) in &self.partitions {
                println!(
                    "{topic}\t{partition}\t{}\t{}\t{}\t{}",
                    show(line.committed),
                    show(line.end),
                    show(line.lag()),
                    line.owner.as_deref().unwrap_or("-")
                );
            }
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let info = &self.info;
        let members: Vec<serde_json::Value> = info
            .members
            .iter()
            .map(|m| {
                serde_json::json!({
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": m.assignment.iter()
                        .map(|(t, p)| serde_json::json!({"topic": t, "partition": p}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let partitions: Vec<serde_json::Value> = self
            .partitions
            .iter()
            .map(|((topic, partition), line)| {
                serde_json::json!({
                    "topic": topic,
                    "partition": partition,
                    "committed": line.committed,
                    "end": line.end,
                    "lag": line.lag(),
                    "member_id": line.owner,
                })
            })
            .collect();
        serde_json::json!({
            "group": info.group_id,
            "state": info.state,
            "protocol_type": info.protocol_type,
            "protocol": info.protocol,
            "members": members,
            "partitions": partitions,
        })
    }
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}

/// The offset `to` names in a partition stored from `start` to `end`.
fn target_offset(to: ResetTo, start: i64, end: i64, at_time: Option<i64>) -> i64 {
    match to {
        ResetTo::Earliest => start,
        ResetTo::Latest => end,
        // Kafka's tool clamps an offset outside the stored range the same way.
        ResetTo::Offset(offset) => offset.clamp(start, end.max(start)),
        ResetTo::Timestamp(_) => at_time.unwrap_or(end),
    }
}

async fn reset_offsets(
    connection: &mut Connection,
    group: &str,
    topic: &str,
    only: &[i32],
    to: ResetTo,
    dry_run: bool,
) -> anyhow::Result<()> {
    let info = groups::describe_group(connection, group).await?;
    if info.is_active() {
        bail!(
            "group '{group}' is active (state {}, {} member(s)): stop its consumers before resetting its offsets",
            info.state,
            info.members.len()
        );
    }
    let described = admin::topic(connection, topic).await?;
    let all: Vec<i32> = described.partitions.iter().map(|(p, _)| *p).collect();
    for partition in only {
        ensure!(
            all.contains(partition),
            "partition {partition} does not exist: topic '{topic}' has {}",
            all.len()
        );
    }
    let mut indexes = if only.is_empty() { all } else { only.to_vec() };
    indexes.sort_unstable();
    indexes.dedup();
    let starts = list_offsets(connection, topic, &indexes, EARLIEST).await?;
    let ends = list_offsets(connection, topic, &indexes, LATEST).await?;
    let at_time = match to {
        ResetTo::Timestamp(ms) => Some(list_offsets(connection, topic, &indexes, ms).await?),
        _ => None,
    };
    let committed = groups::committed_offsets(
        connection,
        group,
        Some(&[(topic.to_owned(), indexes.clone())]),
    )
    .await?;
    let lookup = |list: &[(i32, Option<i64>)], partition: i32| {
        list.iter()
            .find(|(p, _)| *p == partition)
            .and_then(|(_, o)| *o)
    };
    let mut plan = Vec::with_capacity(indexes.len());
    for partition in &indexes {
        let start = lookup(&starts, *partition).unwrap_or(0);
        let end = lookup(&ends, *partition).unwrap_or(start);
        let found = at_time.as_deref().and_then(|list| lookup(list, *partition));
        let old = committed
            .iter()
            .find(|c| c.partition == *partition)
            .map(|c| c.offset);
        plan.push((*partition, old, target_offset(to, start, end, found)));
    }
    println!("TOPIC\tPARTITION\tOLD\tNEW");
    for (partition, old, new) in &plan {
        let old = old.map_or_else(|| "-".to_owned(), |o| o.to_string());
        println!("{topic}\t{partition}\t{old}\t{new}");
    }
    if dry_run {
        println!("dry run: nothing committed");
        return Ok(());
    }
    let offsets: Vec<(String, i32, i64)> = plan
        .iter()
        .map(|(partition, _, new)| (topic.to_owned(), *partition, *new))
        .collect();
    match groups::commit_offsets(connection, group, &Committer::SIMPLE, &offsets).await? {
        0 => {
            println!(
                "reset {} partition(s) of topic {topic} for group {group}",
                plan.len()
            );
            Ok(())
        }
        // A consumer joined between the check and the commit.
        groups::codes::UNKNOWN_MEMBER_ID | groups::codes::ILLEGAL_GENERATION => {
            bail!("group '{group}' became active: stop its consumers before resetting its offsets")
        }
        code => bail!(
            "committing offsets of group '{group}': {}",
            describe_error(code)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_follow_kafkas_reset_rules() {
        assert_eq!(target_offset(ResetTo::Earliest, 10, 50, None), 10);
        assert_eq!(target_offset(ResetTo::Latest, 10, 50, None), 50);
        assert_eq!(target_offset(ResetTo::Offset(30), 10, 50, None), 30);
        assert_eq!(target_offset(ResetTo::Offset(3), 10, 50, None), 10);
        assert_eq!(target_offset(ResetTo::Offset(99), 10, 50, None), 50);
        assert_eq!(target_offset(ResetTo::Timestamp(7), 10, 50, Some(42)), 42);
        assert_eq!(target_offset(ResetTo::Timestamp(7), 10, 50, None), 50);
    }

    #[test]
    fn lag_is_unknown_without_a_commit_and_never_negative() {
        let line = |committed, end| PartitionLine {
            committed,
            end,
            owner: None,
        };
        assert_eq!(line(Some(4), Some(10)).lag(), Some(6));
        assert_eq!(line(None, Some(10)).lag(), None);
        assert_eq!(line(Some(12), Some(10)).lag(), Some(0));
    }
}
