//! Raft's messages between herald nodes, over TCP.
//!
//! Every message names the Raft group it is for (a partition's group id),
//! so one listener per node serves every group on it. A frame is a 4-byte
//! big-endian length, then the 8-byte group id (requests only), then the
//! message in postcard, a compact serde format. A client is one
//! connection, opened on first use and dropped on any error (openraft
//! retries with its own back-off); requests on it are sequential, which is
//! how openraft calls a client.
//!
//! A [`Courier`] can carry the same frames instead of TCP: a simulation of
//! a cluster inside one process plugs one in ([`GroupRouter::with_courier`]),
//! and everything above the socket (encoding, dispatch to the group,
//! answers) is the code production runs.
//!
//! Sharing one connection between the groups of a pair of nodes, and
//! batching their heartbeats, is the scaling step still to come: today a
//! group with `n` peers opens up to `n` connections from each node.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use openraft::errors::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::state_machine::{PartitionStateMachine, Snapshot, SnapshotMeta};
use crate::types::{PartitionRaft, Placed, RecordBatch, Vote};
use crate::PartitionSnapshot;

/// Identifies a Raft group (a partition) among a node's groups.
pub type GroupId = u64;

/// The largest frame accepted: a full AppendEntries with its batches fits
/// well below; anything larger is a broken or hostile peer.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// A request from one node's Raft to another's.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftRequest {
    /// Log replication and heartbeats.
    AppendEntries(AppendEntriesRequest<PartitionRaft>),
    /// A candidate asking for a vote.
    Vote(VoteRequest<PartitionRaft>),
    /// A would-be candidate checking it could win first.
    PreVote(VoteRequest<PartitionRaft>),
    /// A snapshot for a follower that needs purged entries.
    FullSnapshot {
        /// The leader's vote.
        vote: Vote,
        /// The snapshot's metadata.
        meta: SnapshotMeta,
        /// Its data.
        data: PartitionSnapshot,
    },
    /// The leader handing leadership to the receiver.
    TransferLeader(TransferLeaderRequest<PartitionRaft>),
    /// A write forwarded to the group's leader by a node that is not.
    Propose(RecordBatch),
}

/// The answer to a [`RaftRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftResponse {
    /// To [`RaftRequest::AppendEntries`].
    AppendEntries(AppendEntriesResponse<PartitionRaft>),
    /// To [`RaftRequest::Vote`] and [`RaftRequest::PreVote`].
    Vote(VoteResponse<PartitionRaft>),
    /// To [`RaftRequest::FullSnapshot`].
    Snapshot(SnapshotResponse<PartitionRaft>),
    /// To [`RaftRequest::TransferLeader`].
    TransferLeader(TransferLeaderResponse<PartitionRaft>),
    /// To [`RaftRequest::Propose`]: committed and applied, placed there.
    Proposed(Option<Placed>),
    /// To [`RaftRequest::Propose`]: the receiver does not lead the group;
    /// the leader it knows of.
    NotLeader(Option<u64>),
    /// The receiver could not handle it: no such group there, or its Raft
    /// stopped.
    Refused(String),
}

/// Why a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No connection could be made.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The peer.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The connection failed mid-call.
    #[error("connection to {addr} failed: {source}")]
    Io {
        /// The peer.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// No answer within the call's time limit.
    #[error("no answer from {addr} within {after:?}")]
    Timeout {
        /// The peer.
        addr: String,
        /// The limit.
        after: Duration,
    },
    /// The peer refused the request.
    #[error("{addr} refused the request: {reason}")]
    Refused {
        /// The peer.
        addr: String,
        /// Its reason.
        reason: String,
    },
    /// The peer answered something else than the request calls for.
    #[error("{addr} answered a {got} to a {asked}")]
    Mismatch {
        /// The peer.
        addr: String,
        /// What was asked.
        asked: &'static str,
        /// What came back.
        got: &'static str,
    },
}

fn frame_error(e: postcard::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

async fn read_frame<R: tokio::io::AsyncRead + Unpin>(reader: &mut R) -> io::Result<Vec<u8>> {
    let len = reader.read_u32().await? as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_FRAME_BYTES}"),
        ));
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await?;
    Ok(body)
}

async fn write_frame<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[&[u8]],
) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {len} bytes exceeds {MAX_FRAME_BYTES}"),
        ));
    }
    writer.write_u32(len as u32).await?;
    for part in parts {
        writer.write_all(part).await?;
    }
    writer.flush().await
}

/// An answer on its way back, as a [`Courier`] delivers it.
pub type Delivery = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<u8>, CallError>> + Send + 'static>,
>;

/// Carries a node's Raft requests to its peers by some other way than
/// TCP: a simulated network, with its delays, losses and partitions.
pub trait Courier: Send + Sync + 'static {
    /// Delivers `request` (a request frame's body: the postcard of a
    /// [`RaftRequest`]) for `group` to the node reached at `addr`, and
    /// brings back its answer's body ([`GroupRouter::answer`] there).
    fn deliver(&self, addr: &str, group: GroupId, request: Vec<u8>) -> Delivery;
}

struct Connection {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: BufWriter<tokio::net::tcp::OwnedWriteHalf>,
}

/// One node's client to a peer, for one group.
pub struct PeerClient {
    group: GroupId,
    addr: String,
    /// The address connections leave from (the node's own), if set.
    source: Option<IpAddr>,
    connection: Option<Connection>,
    /// Carries the requests instead of TCP, when set.
    courier: Option<Arc<dyn Courier>>,
}

impl PeerClient {
    /// A client of the node at `addr`, for `group`; connects on first use.
    pub fn new(group: GroupId, addr: String) -> Self {
        Self {
            group,
            addr,
            source: None,
            connection: None,
            courier: None,
        }
    }

    /// Requests travel by `courier` instead of TCP.
    pub fn by_courier(mut self, courier: Option<Arc<dyn Courier>>) -> Self {
        self.courier = courier;
        self
    }

    /// Connections leave from `source` (the node's own address) rather than
    /// wherever the kernel picks: on a machine with several addresses a
    /// peer, and a firewall between nodes, sees which node is calling.
    pub fn from_source(mut self, source: Option<IpAddr>) -> Self {
        self.source = source;
        self
    }

    async fn connect(&self) -> io::Result<TcpStream> {
        let Some(source) = self.source else {
            return TcpStream::connect(&self.addr).await;
        };
        let target = tokio::net::lookup_host(&self.addr)
            .await?
            .find(|a| a.is_ipv4() == source.is_ipv4())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address of that family"))?;
        let socket = if source.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(target).await
    }

    /// Sends `request` and waits for its answer, at most `ttl`.
    pub async fn call(
        &mut self,
        request: &RaftRequest,
        ttl: Duration,
    ) -> Result<RaftResponse, CallError> {
        let addr = self.addr.clone();
        match tokio::time::timeout(ttl, self.call_inner(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.connection = None;
                Err(e)
            }
            Err(_) => {
                // The answer may still arrive: this connection is out of
                // step with its requests now.
                self.connection = None;
                Err(CallError::Timeout { addr, after: ttl })
            }
        }
    }

    async fn call_inner(&mut self, request: &RaftRequest) -> Result<RaftResponse, CallError> {
        let io = |source| CallError::Io {
            addr: self.addr.clone(),
            source,
        };
        if let Some(courier) = &self.courier {
            let body = postcard::to_stdvec(request).map_err(|e| io(frame_error(e)))?;
            let answer = courier.deliver(&self.addr, self.group, body).await?;
            return self.decode_answer(&answer);
        }
        if self.connection.is_none() {
            let stream = self.connect().await.map_err(|source| CallError::Connect {
                addr: self.addr.clone(),
                source,
            })?;
            // Heartbeats and votes are small and latency-bound.
            let _ = stream.set_nodelay(true);
            let (read, write) = stream.into_split();
            self.connection = Some(Connection {
                reader: BufReader::new(read),
                writer: BufWriter::new(write),
            });
        }
        let body = postcard::to_stdvec(request).map_err(|e| io(frame_error(e)))?;
        let Some(connection) = self.connection.as_mut() else {
            unreachable!("connected above");
        };
        let group = self.group.to_be_bytes();
        write_frame(&mut connection.writer, &[&group, &body])
            .await
            .map_err(io)?;
        let answer = read_frame(&mut connection.reader).await.map_err(io)?;
        self.decode_answer(&answer)
    }

    fn decode_answer(&self, answer: &[u8]) -> Result<RaftResponse, CallError> {
        let response: RaftResponse = postcard::from_bytes(answer).map_err(|e| CallError::Io {
            addr: self.addr.clone(),
            source: frame_error(e),
        })?;
        if let RaftResponse::Refused(reason) = response {
            return Err(CallError::Refused {
                addr: self.addr.clone(),
                reason,
            });
        }
        Ok(response)
    }

    fn rpc_error<E: std::error::Error>(e: CallError) -> RPCError<PartitionRaft, E> {
        match e {
            CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            other => RPCError::Network(NetworkError::new(&other)),
        }
    }

    fn mismatch(&self, asked: &'static str, got: &RaftResponse) -> CallError {
        CallError::Mismatch {
            addr: self.addr.clone(),
            asked,
            got: match got {
                RaftResponse::AppendEntries(_) => "AppendEntries answer",
                RaftResponse::Vote(_) => "Vote answer",
                RaftResponse::Snapshot(_) => "Snapshot answer",
                RaftResponse::TransferLeader(_) => "TransferLeader answer",
                RaftResponse::Proposed(_) => "Propose answer",
                RaftResponse::NotLeader(_) => "NotLeader answer",
                RaftResponse::Refused(_) => "refusal",
            },
        }
    }
}

/// How long a follower may take to answer entries before the connection
/// is given up on: far above a loaded disk's fsync, and short enough that
/// entries to a follower gone silent on an open connection are sent again
/// on a new one within a second. Leadership does not depend on it: the
/// leader's heartbeats go on their own, with openraft's budget.
pub const ENTRIES_PATIENCE: Duration = Duration::from_millis(1_000);

impl RaftNetworkV2<PartitionRaft> for PeerClient {
    type SnapshotData = PartitionSnapshot;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<PartitionRaft>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<PartitionRaft>, RPCError<PartitionRaft>> {
        // openraft gives entries the heartbeat interval; a follower that
        // is alive but slow to make them durable (an fsync on a busy disk
        // takes longer now and then) would be cut off, its connection
        // dropped and the same entries sent again, slower still. Entries
        // wait up to ENTRIES_PATIENCE; heartbeats keep the short budget.
        let ttl = if rpc.entries.is_empty() {
            option.hard_ttl()
        } else {
            option.hard_ttl().max(ENTRIES_PATIENCE)
        };
        match self
            .call(&RaftRequest::AppendEntries(rpc), ttl)
            .await
            .map_err(Self::rpc_error)?
        {
            RaftResponse::AppendEntries(response) => Ok(response),
            other => Err(Self::rpc_error(self.mismatch("AppendEntries", &other))),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<PartitionRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<PartitionRaft>, RPCError<PartitionRaft>> {
        match self
            .call(&RaftRequest::Vote(rpc), option.hard_ttl())
            .await
            .map_err(Self::rpc_error)?
        {
            RaftResponse::Vote(response) => Ok(response),
            other => Err(Self::rpc_error(self.mismatch("Vote", &other))),
        }
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<PartitionRaft>,
        option: RPCOption,
    ) -> Result<VoteResponse<PartitionRaft>, RPCError<PartitionRaft>> {
        match self
            .call(&RaftRequest::PreVote(rpc), option.hard_ttl())
            .await
            .map_err(Self::rpc_error)?
        {
            RaftResponse::Vote(response) => Ok(response),
            other => Err(Self::rpc_error(self.mismatch("PreVote", &other))),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<PartitionRaft>, StreamingError<PartitionRaft>> {
        let request = RaftRequest::FullSnapshot {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot,
        };
        let streaming = |e: CallError| match e {
            CallError::Connect { .. } => StreamingError::Unreachable(Unreachable::new(&e)),
            other => StreamingError::Network(NetworkError::new(&other)),
        };
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            answer = self.call(&request, option.hard_ttl()) => match answer.map_err(streaming)? {
                RaftResponse::Snapshot(response) => Ok(response),
                other => Err(streaming(self.mismatch("FullSnapshot", &other))),
            },
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<PartitionRaft>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<PartitionRaft>, RPCError<PartitionRaft>> {
        match self
            .call(&RaftRequest::TransferLeader(req), option.hard_ttl())
            .await
            .map_err(Self::rpc_error)?
        {
            RaftResponse::TransferLeader(response) => Ok(response),
            other => Err(Self::rpc_error(self.mismatch("TransferLeader", &other))),
        }
    }
}

/// Makes a group's clients to its peers.
#[derive(Clone)]
pub struct GroupNetwork {
    group: GroupId,
    router: GroupRouter,
}

impl GroupNetwork {
    /// The network of `group` on the node `router` serves: its clients
    /// reach peers the way the router's own clients do.
    pub fn new(group: GroupId, router: &GroupRouter) -> Self {
        Self {
            group,
            router: router.clone(),
        }
    }
}

impl RaftNetworkFactory<PartitionRaft> for GroupNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, _target: u64, node: &BasicNode) -> PeerClient {
        self.router.client(self.group, node.addr.clone())
    }
}

/// A partition's Raft as this node runs it.
pub type PartitionRaftHandle = Raft<PartitionRaft, PartitionStateMachine>;

/// A group this node serves: its Raft, and the log that holds its entries
/// (whose limits a proposal from a peer is checked against).
#[derive(Clone)]
struct ServedGroup {
    raft: PartitionRaftHandle,
    log: Arc<herald_log::Log>,
}

/// The groups this node serves, by id: where incoming requests go.
#[derive(Clone, Default)]
pub struct GroupRouter {
    groups: Arc<RwLock<HashMap<GroupId, ServedGroup>>>,
    source: Option<IpAddr>,
    courier: Option<Arc<dyn Courier>>,
}

impl GroupRouter {
    /// A router whose node's outgoing Raft connections leave from
    /// `source` (its listener's address; unspecified: any).
    pub fn with_source(source: IpAddr) -> Self {
        Self {
            source: (!source.is_unspecified()).then_some(source),
            ..Self::default()
        }
    }

    /// A router whose node reaches its peers through `courier` rather than
    /// TCP; its own groups answer through [`GroupRouter::answer`].
    pub fn with_courier(courier: Arc<dyn Courier>) -> Self {
        Self {
            courier: Some(courier),
            ..Self::default()
        }
    }

    /// A client of `group` on the node at `addr`, reaching it the way this
    /// node reaches its peers.
    pub fn client(&self, group: GroupId, addr: String) -> PeerClient {
        PeerClient::new(group, addr)
            .from_source(self.source)
            .by_courier(self.courier.clone())
    }

    /// Where this node's outgoing Raft connections leave from.
    pub fn source(&self) -> Option<IpAddr> {
        self.source
    }

    /// Serves `group` with `raft`, whose entries `log` holds, from now on.
    pub fn add(&self, group: GroupId, raft: PartitionRaftHandle, log: Arc<herald_log::Log>) {
        self.groups.write().insert(group, ServedGroup { raft, log });
    }

    /// Stops serving `group`; its requests are refused from now on.
    pub fn remove(&self, group: GroupId) -> Option<PartitionRaftHandle> {
        self.groups.write().remove(&group).map(|served| served.raft)
    }

    fn get(&self, group: GroupId) -> Option<ServedGroup> {
        self.groups.read().get(&group).cloned()
    }

    /// Accepts peers on `listener` until `shutdown`, each connection served
    /// by a task of its own.
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let router = self.clone();
                        let shutdown = shutdown.clone();
                        connections.spawn(async move {
                            tokio::select! {
                                _ = shutdown.cancelled() => {}
                                result = router.serve_peer(stream) => {
                                    if let Err(e) = result {
                                        tracing::debug!(%peer, error = %e, "Raft peer connection closed");
                                    }
                                }
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a Raft peer failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        connections.shutdown().await;
    }

    async fn serve_peer(&self, stream: TcpStream) -> io::Result<()> {
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let (mut reader, mut writer) = (BufReader::new(read), BufWriter::new(write));
        loop {
            let frame = match read_frame(&mut reader).await {
                Ok(frame) => frame,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            };
            let Some((group, body)) = frame.split_first_chunk::<8>() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "frame without a group id",
                ));
            };
            let body = self.answer(u64::from_be_bytes(*group), body).await?;
            write_frame(&mut writer, &[&body]).await?;
        }
    }

    /// Answers one request for `group` (a request frame's body), with the
    /// answer frame's body: what a peer's connection, or a [`Courier`],
    /// carries back. An undecodable request is an error for the carrier.
    pub async fn answer(&self, group: GroupId, request: &[u8]) -> io::Result<Vec<u8>> {
        let request: RaftRequest = postcard::from_bytes(request).map_err(frame_error)?;
        let response = self.handle(group, request).await;
        postcard::to_stdvec(&response).map_err(frame_error)
    }

    async fn handle(&self, group: GroupId, request: RaftRequest) -> RaftResponse {
        let Some(ServedGroup { raft, log }) = self.get(group) else {
            return RaftResponse::Refused(format!("this node does not serve group {group}"));
        };
        let refused = |e: &dyn std::fmt::Display| RaftResponse::Refused(e.to_string());
        match request {
            RaftRequest::AppendEntries(rpc) => match raft.append_entries(rpc).await {
                Ok(response) => RaftResponse::AppendEntries(response),
                Err(e) => refused(&e),
            },
            RaftRequest::Vote(rpc) => match raft.vote(rpc).await {
                Ok(response) => RaftResponse::Vote(response),
                Err(e) => refused(&e),
            },
            RaftRequest::PreVote(rpc) => match raft.pre_vote(rpc).await {
                Ok(response) => RaftResponse::Vote(response),
                Err(e) => refused(&e),
            },
            RaftRequest::FullSnapshot { vote, meta, data } => {
                let snapshot = Snapshot {
                    meta,
                    snapshot: data,
                };
                match raft.install_full_snapshot(vote, snapshot).await {
                    Ok(response) => RaftResponse::Snapshot(response),
                    Err(e) => refused(&e),
                }
            }
            RaftRequest::TransferLeader(req) => match raft.handle_transfer_leader(req).await {
                Ok(response) => RaftResponse::TransferLeader(response),
                Err(e) => refused(&e),
            },
            RaftRequest::Propose(batch) => {
                if let Err(why) = admit_proposal(&log, batch.bytes()) {
                    return RaftResponse::Refused(why);
                }
                Self::propose(&raft, batch).await
            }
        }
    }

    async fn propose(raft: &PartitionRaftHandle, batch: RecordBatch) -> RaftResponse {
        match raft.client_write(batch).await {
            Ok(response) => RaftResponse::Proposed(response.data),
            Err(openraft::errors::RaftError::APIError(
                openraft::errors::ClientWriteError::ForwardToLeader(forward),
            )) => RaftResponse::NotLeader(forward.leader_id),
            Err(e) => RaftResponse::Refused(e.to_string()),
        }
    }
}

/// Checks a batch a peer proposes as a client's batch would be checked
/// where it was produced: its log refuses what does not fit (and a log
/// store error stops the group's Raft), and a batch that passed only the
/// peer's checks must not reach the log. Idempotent and transactional
/// batches are never forwarded: their producer state lives on the leader,
/// which takes them from the producer directly.
fn admit_proposal(log: &herald_log::Log, bytes: &[u8]) -> Result<(), String> {
    let max = log.max_batch_bytes();
    if bytes.len() > max {
        return Err(format!(
            "a proposed batch of {} bytes exceeds the partition's limit of {max} bytes",
            bytes.len()
        ));
    }
    let valid = herald_records::ValidBatch::new(bytes)
        .map_err(|e| format!("a proposed batch is invalid: {e}"))?;
    let header = valid.header();
    if header.is_control() || header.is_transactional() || header.producer_id() >= 0 {
        return Err(
            "a proposed batch must be a plain client batch (not control, transactional or idempotent)"
                .to_owned(),
        );
    }
    Ok(())
}

/// The address a node's Raft listener is reached at, as peers store it.
pub fn node(addr: SocketAddr) -> BasicNode {
    BasicNode {
        addr: addr.to_string(),
    }
}
