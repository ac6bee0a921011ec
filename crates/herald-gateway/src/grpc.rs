//! The session protocol over gRPC: the `Herald` service.

use std::pin::Pin;
use std::sync::Arc;

use futures_util::{Stream, StreamExt};
use herald_push::PushEngine;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::driver::{self, Unreadable};
use crate::proto::herald_server::Herald;
use crate::proto::{ClientMessage, PublishRequest, PublishResult, ServerMessage};

/// Messages queued between a session's writer and the HTTP/2 stream.
const STREAM_QUEUE: usize = 4;

/// The gRPC service.
#[derive(Clone)]
pub(crate) struct HeraldService {
    pub(crate) engine: Arc<PushEngine>,
    pub(crate) max_message_bytes: usize,
    pub(crate) shutdown: CancellationToken,
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
        let incoming = request.into_inner().map(|m| m.map_err(unreadable));
        let (out, out_rx) = mpsc::channel(STREAM_QUEUE);
        tokio::spawn(driver::drive(
            Arc::clone(&self.engine),
            incoming,
            out,
            self.max_message_bytes,
            self.shutdown.clone(),
        ));
        Ok(Response::new(Box::pin(
            ReceiverStream::new(out_rx).map(|message| Ok(*message)),
        )))
    }

    async fn publish(
        &self,
        request: Request<PublishRequest>,
    ) -> Result<Response<PublishResult>, Status> {
        Ok(Response::new(
            driver::publish_result(&self.engine, request.into_inner()).await,
        ))
    }

    type PublishStreamStream = Boxed<PublishResult>;

    async fn publish_stream(
        &self,
        request: Request<Streaming<PublishRequest>>,
    ) -> Result<Response<Self::PublishStreamStream>, Status> {
        let engine = Arc::clone(&self.engine);
        let mut incoming = request.into_inner();
        let (out, out_rx) = mpsc::channel(STREAM_QUEUE);
        tokio::spawn(async move {
            // One at a time, so answers come in request order.
            while let Some(request) = incoming.next().await {
                let answer = match request {
                    Ok(request) => Ok(driver::publish_result(&engine, request).await),
                    Err(status) => Err(status),
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
