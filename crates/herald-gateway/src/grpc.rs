//! The session protocol over gRPC: the `Herald` service.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use futures_util::{Stream, StreamExt};
use herald_push::Identity;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::auth::{self, Known};
use crate::driver::{self, Unreadable};
use crate::proto::herald_server::Herald;
use crate::proto::{ClientMessage, PublishRequest, PublishResult, ServerMessage};
use crate::publishes::Publishes;
use crate::server::{Peer, Shared};

/// Messages queued between a session's writer and the HTTP/2 stream.
const STREAM_QUEUE: usize = 4;

/// The gRPC service.
#[derive(Clone)]
pub(crate) struct HeraldService {
    pub(crate) shared: Arc<Shared>,
}

/// Who the client of a call is: its `authorization` metadata (a bearer
/// token, or Basic with a user's name and password), else its connection;
/// refused with UNAUTHENTICATED when its credentials are not valid.
pub(crate) async fn identify<T>(
    shared: &Shared,
    request: &Request<T>,
) -> Result<(Known, Option<SocketAddr>), Status> {
    let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<Peer>>() else {
        return Err(Status::internal("the connection's address is unknown"));
    };
    let authorization = request
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    match auth::identify(shared, peer, auth::credentials(authorization, None)).await {
        Ok(known) => Ok((known, Some(peer.addr))),
        Err(refused) => Err(Status::unauthenticated(refused.0)),
    }
}

/// The identity a call without a hello (a publish, an admin call) runs
/// as: on a listener that requires a login, it needs credentials in its
/// metadata.
pub(crate) async fn caller<T>(shared: &Shared, request: &Request<T>) -> Result<Identity, Status> {
    match identify(shared, request).await?.0 {
        Known::Identity(identity) => Ok(identity),
        Known::MustLogIn => Err(Status::unauthenticated(
            "this listener requires a login: send `authorization: Bearer TOKEN` (or Basic) metadata",
        )),
    }
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn unreadable(status: Status) -> Unreadable {
    match status.code() {
        Code::OutOfRange | Code::ResourceExhausted => Unreadable::TooLarge(None),
        _ => Unreadable::Malformed(status.message().to_owned()),
    }
}

#[tonic::async_trait]
impl Herald for HeraldService {
    type SessionStream = Boxed<ServerMessage>;

    async fn session(
        &self,
        request: Request<Streaming<ClientMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let (known, peer) = identify(&self.shared, &request).await?;
        let incoming = request.into_inner().map(|m| m.map_err(unreadable));
        let (out, out_rx) = mpsc::channel(STREAM_QUEUE);
        tokio::spawn(driver::drive(
            Arc::clone(&self.shared),
            incoming,
            out,
            known,
            peer,
        ));
        Ok(Response::new(Box::pin(
            ReceiverStream::new(out_rx).map(|message| Ok(*message)),
        )))
    }

    async fn publish(
        &self,
        request: Request<PublishRequest>,
    ) -> Result<Response<PublishResult>, Status> {
        let mut identity = caller(&self.shared, &request).await?;
        Ok(Response::new(
            driver::publish_result(&self.shared.engine, &mut identity, request.into_inner()).await,
        ))
    }

    type PublishStreamStream = Boxed<PublishResult>;

    async fn publish_stream(
        &self,
        request: Request<Streaming<PublishRequest>>,
    ) -> Result<Response<Self::PublishStreamStream>, Status> {
        let mut identity = caller(&self.shared, &request).await?;
        let engine = Arc::clone(&self.shared.engine);
        let mut incoming = request.into_inner();
        let (out, out_rx) = mpsc::channel(STREAM_QUEUE);
        tokio::spawn(async move {
            // Several in flight, answered in request order (see
            // `publishes`); once the client's stream ends, what it sent is
            // still answered.
            let mut publishes = Publishes::default();
            let mut open = true;
            while open || !publishes.is_idle() {
                let reading = open && publishes.accepts_requests();
                let answer = tokio::select! {
                    answer = publishes.next() => Ok(answer),
                    request = incoming.next(), if reading => match request {
                        Some(Ok(request)) => {
                            publishes.start(&engine, &mut identity, request).await;
                            continue;
                        }
                        Some(Err(status)) => Err(status),
                        None => {
                            open = false;
                            continue;
                        }
                    },
                };
                let failed = answer.is_err();
                if out.send(answer).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx))))
    }
}
