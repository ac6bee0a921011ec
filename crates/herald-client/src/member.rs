//! Membership of a consumer group for `herald consume --group`: join (as the
//! leader, assign partitions with the range assignor), heartbeat on a
//! connection of its own while the caller fetches, notice a rebalance, commit
//! with the member's generation, and leave.
//!
//! The member uses the eager protocol: at a rebalance it gives up every
//! partition and takes what the new assignment gives it. Partitions are
//! committed after their records are printed, so a rebalance or a crash may
//! print records twice but never skips one (at-least-once).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ClientError, Context as _};
use bytes::Bytes;
use tokio::task::JoinHandle;

use crate::errors::describe;
use crate::groups::{self, codes, Committer, JoinOutcome, JoinRequest};
use crate::{admin, Connection};

/// The assignor this member offers (Kafka's `range`).
const ASSIGNOR: &str = "range";
/// Session timeout: a member that stops heartbeating is removed after this.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the coordinator waits for every member to rejoin.
const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// Heartbeat period (a third of the session timeout, as Kafka's default).
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
/// Join attempts answered with a retriable error before giving up.
const JOIN_ATTEMPTS_MAX: u32 = 20;
/// Pause between join attempts after a retriable error.
const JOIN_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// A member of one consumer group subscribed to one topic.
#[derive(Debug)]
pub struct GroupMember {
    bootstrap: String,
    /// How the heartbeat connection is opened.
    options: crate::ConnectOptions,
    group: String,
    topic: String,
    member_id: String,
    generation_id: i32,
    rejoin: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

impl GroupMember {
    /// A member of `group` subscribed to `topic`, not joined yet; the
    /// heartbeat connection goes to `bootstrap`.
    pub fn new(bootstrap: &str, group: &str, topic: &str) -> Self {
        Self::with_options(bootstrap, crate::ConnectOptions::default(), group, topic)
    }

    /// As [`GroupMember::new`], its heartbeat connection opened with
    /// `options` (TLS, a SASL login).
    pub fn with_options(
        bootstrap: &str,
        options: crate::ConnectOptions,
        group: &str,
        topic: &str,
    ) -> Self {
        Self {
            bootstrap: bootstrap.to_owned(),
            options,
            group: group.to_owned(),
            topic: topic.to_owned(),
            member_id: String::new(),
            generation_id: -1,
            rejoin: Arc::new(AtomicBool::new(true)),
            heartbeat: None,
        }
    }

    /// True when the member must (re)join before fetching: never joined, or
    /// the group is rebalancing, or the member was expelled.
    pub fn needs_join(&self) -> bool {
        self.rejoin.load(Ordering::Acquire)
    }

    /// Joins (or rejoins) the group and returns the partitions of the topic
    /// assigned to this member, sorted.
    pub async fn join(&mut self, connection: &mut Connection) -> Result<Vec<i32>, ClientError> {
        self.stop_heartbeat();
        let subscription = groups::encode_subscription(std::slice::from_ref(&self.topic))?;
        for _ in 0..JOIN_ATTEMPTS_MAX {
            let joined = groups::join_group(
                connection,
                &JoinRequest {
                    group: &self.group,
                    member_id: &self.member_id,
                    session_timeout: SESSION_TIMEOUT,
                    rebalance_timeout: REBALANCE_TIMEOUT,
                    protocols: vec![(ASSIGNOR.to_owned(), subscription.clone())],
                },
            )
            .await?;
            match joined.error_code {
                0 => {}
                codes::MEMBER_ID_REQUIRED => {
                    self.member_id = joined.member_id;
                    continue;
                }
                codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION => {
                    self.member_id.clear();
                    continue;
                }
                codes::REBALANCE_IN_PROGRESS | codes::COORDINATOR_NOT_AVAILABLE => {
                    tokio::time::sleep(JOIN_RETRY_PAUSE).await;
                    continue;
                }
                code => {
                    return Err(ClientError::refused(format!(
                        "joining group '{}': {}",
                        self.group,
                        describe(code)
                    )))
                }
            }
            self.member_id = joined.member_id.clone();
            self.generation_id = joined.generation_id;
            let assignments = if joined.leader == joined.member_id {
                leader_assignments(connection, &joined).await?
            } else {
                Vec::new()
            };
            let synced = groups::sync_group(
                connection,
                &self.group,
                &joined,
                assignments,
                REBALANCE_TIMEOUT,
            )
            .await?;
            let assignment = match synced {
                Ok(assignment) => assignment,
                Err(codes::REBALANCE_IN_PROGRESS) => continue,
                Err(codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION) => {
                    self.member_id.clear();
                    continue;
                }
                Err(code) => {
                    return Err(ClientError::refused(format!(
                        "syncing group '{}': {}",
                        self.group,
                        describe(code)
                    )))
                }
            };
            let partitions: Vec<i32> = groups::decode_assignment(&assignment)?
                .into_iter()
                .filter(|(topic, _)| *topic == self.topic)
                .map(|(_, partition)| partition)
                .collect();
            self.rejoin.store(false, Ordering::Release);
            self.start_heartbeat();
            return Ok(partitions);
        }
        Err(ClientError::refused(format!(
            "could not join group '{}': it kept rebalancing",
            self.group
        )))
    }

    /// Commits `offsets` (`(partition, next offset)`) of the topic with the
    /// member's generation. A commit refused because the group rebalanced
    /// marks the member for rejoining and returns `false`.
    pub async fn commit(
        &self,
        connection: &mut Connection,
        offsets: &[(i32, i64)],
    ) -> Result<bool, ClientError> {
        if offsets.is_empty() {
            return Ok(true);
        }
        let offsets: Vec<(String, i32, i64)> = offsets
            .iter()
            .map(|(partition, offset)| (self.topic.clone(), *partition, *offset))
            .collect();
        let committer = Committer {
            generation_id: self.generation_id,
            member_id: &self.member_id,
        };
        match groups::commit_offsets(connection, &self.group, &committer, &offsets).await? {
            0 => Ok(true),
            codes::REBALANCE_IN_PROGRESS | codes::ILLEGAL_GENERATION | codes::UNKNOWN_MEMBER_ID => {
                self.rejoin.store(true, Ordering::Release);
                Ok(false)
            }
            code => Err(ClientError::refused(format!(
                "committing offsets of group '{}': {}",
                self.group,
                describe(code)
            ))),
        }
    }

    /// The group's committed offsets of `partitions` (those with one).
    pub async fn committed(
        &self,
        connection: &mut Connection,
        partitions: &[i32],
    ) -> Result<Vec<(i32, i64)>, ClientError> {
        let topics = [(self.topic.clone(), partitions.to_vec())];
        Ok(
            groups::committed_offsets(connection, &self.group, Some(&topics))
                .await?
                .into_iter()
                .map(|c| (c.partition, c.offset))
                .collect(),
        )
    }

    /// Leaves the group so that the others take its partitions at once.
    pub async fn leave(mut self, connection: &mut Connection) -> Result<(), ClientError> {
        self.stop_heartbeat();
        if self.member_id.is_empty() {
            return Ok(());
        }
        groups::leave_group(connection, &self.group, &self.member_id).await
    }

    fn start_heartbeat(&mut self) {
        let (bootstrap, options, group, member_id, generation_id, rejoin) = (
            self.bootstrap.clone(),
            self.options.clone(),
            self.group.clone(),
            self.member_id.clone(),
            self.generation_id,
            Arc::clone(&self.rejoin),
        );
        self.heartbeat = Some(tokio::spawn(async move {
            let mut connection = None;
            loop {
                tokio::time::sleep(HEARTBEAT_INTERVAL).await;
                if connection.is_none() {
                    connection = Connection::connect_with(&bootstrap, &options).await.ok();
                }
                let Some(conn) = connection.as_mut() else {
                    continue;
                };
                match groups::heartbeat(conn, &group, generation_id, &member_id).await {
                    Ok(0) => {}
                    Ok(_) => {
                        // Rebalancing, or the generation is over: rejoin.
                        rejoin.store(true, Ordering::Release);
                        return;
                    }
                    // The broker went away: reconnect at the next beat; the
                    // session timeout decides whether the member survives.
                    Err(_) => connection = None,
                }
            }
        }));
    }

    fn stop_heartbeat(&mut self) {
        if let Some(task) = self.heartbeat.take() {
            task.abort();
        }
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        self.stop_heartbeat();
    }
}

/// The leader's work: every member's partitions by the range assignor,
/// encoded for SyncGroup.
async fn leader_assignments(
    connection: &mut Connection,
    joined: &JoinOutcome,
) -> Result<Vec<(String, Bytes)>, ClientError> {
    let mut subscriptions: Vec<(String, Vec<String>)> = Vec::new();
    for (member_id, metadata) in &joined.members {
        let topics = groups::decode_subscription(metadata)
            .with_context(|| format!("subscription of member {member_id}"))?;
        subscriptions.push((member_id.clone(), topics));
    }
    let mut topics: Vec<String> = subscriptions
        .iter()
        .flat_map(|(_, t)| t.iter().cloned())
        .collect();
    topics.sort();
    topics.dedup();
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    // A topic another member subscribes to may not exist (yet): it gets no
    // partitions rather than failing the whole group.
    let mut counts = BTreeMap::new();
    for name in names {
        if let Ok(info) = admin::topic(connection, name).await {
            counts.insert(info.name.clone(), info.partitions.len() as i32);
        }
    }
    let assigned = range_assign(&subscriptions, &counts);
    subscriptions
        .iter()
        .map(|(member, _)| {
            let partitions = assigned.get(member).cloned().unwrap_or_default();
            Ok((member.clone(), groups::encode_assignment(&partitions)?))
        })
        .collect()
}

/// Kafka's range assignor: per topic, the subscribed members in member-id
/// order each take a contiguous run of partitions, the first ones one more
/// when the division is not even.
fn range_assign(
    subscriptions: &[(String, Vec<String>)],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<(String, i32)>> {
    let mut out: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, count) in partition_counts {
        let mut members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        members.sort();
        if members.is_empty() {
            continue;
        }
        let member_count = members.len() as i32;
        let (share, extra) = (count / member_count, count % member_count);
        let mut next = 0;
        for (i, member) in members.into_iter().enumerate() {
            let take = share + i32::from((i as i32) < extra);
            let partitions = out.entry(member.clone()).or_default();
            partitions.extend((next..next + take).map(|p| (topic.clone(), p)));
            next += take;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscribed(members: &[&str], topic: &str) -> Vec<(String, Vec<String>)> {
        members
            .iter()
            .map(|m| (m.to_string(), vec![topic.to_owned()]))
            .collect()
    }

    #[test]
    fn range_gives_contiguous_runs_extra_to_the_first_members() {
        let counts = BTreeMap::from([("t".to_owned(), 7)]);
        let assigned = range_assign(&subscribed(&["b", "a", "c"], "t"), &counts);
        let of = |m: &str| -> Vec<i32> { assigned[m].iter().map(|(_, p)| *p).collect() };
        assert_eq!(of("a"), vec![0, 1, 2]);
        assert_eq!(of("b"), vec![3, 4]);
        assert_eq!(of("c"), vec![5, 6]);
    }

    #[test]
    fn range_covers_every_partition_once_and_skips_unsubscribed_topics() {
        let counts = BTreeMap::from([("t".to_owned(), 2), ("u".to_owned(), 3)]);
        let assigned = range_assign(&subscribed(&["a", "b", "c"], "t"), &counts);
        let mut all: Vec<(String, i32)> = assigned.values().flatten().cloned().collect();
        all.sort();
        assert_eq!(all, vec![("t".to_owned(), 0), ("t".to_owned(), 1)]);
        assert!(!assigned.contains_key("c") || assigned["c"].is_empty());
    }
}
