//! `herald subscribe`: a push session with one subscription, printing each
//! delivery and acknowledging it once printed; on exit (Ctrl-C, the
//! message limit, or the broker going away) it prints a resume token that
//! continues right after the last printed record.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{bail, Context as _};
use base64::Engine as _;
use herald_gateway::proto::{self, client_message, server_message::Kind, ClientMessage};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::cli::{OutputFormat, StartFrom, SubscribeArgs};

/// The id of the command's one subscription.
const SUBSCRIPTION: u64 = 1;

/// Longest the command waits, on exit, for the checkpoint of its last ack.
const LAST_CHECKPOINT_WAIT: Duration = Duration::from_secs(2);

/// How resume tokens are written on the command line.
pub const TOKEN_CODEC: base64::engine::GeneralPurpose =
    base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Runs `herald subscribe`.
pub async fn run(args: SubscribeArgs) -> anyhow::Result<()> {
    let start = match (&args.resume, args.from) {
        (Some(token), _) => Some(proto::start_at::From::ResumeToken(
            TOKEN_CODEC
                .decode(token.trim())
                .context("--resume is not a token herald printed")?
                .into(),
        )),
        // A named subscription continues where it left off.
        (None, None) if args.name.is_some() => None,
        (None, None | Some(StartFrom::End)) => Some(proto::start_at::From::Now(proto::Empty {})),
        (None, Some(StartFrom::Beginning)) => {
            Some(proto::start_at::From::Earliest(proto::Empty {}))
        }
        (None, Some(StartFrom::Timestamp(ms))) => Some(proto::start_at::From::TimestampMs(ms)),
        (None, Some(StartFrom::Offset(_))) => {
            bail!(
                "subscribe starts at beginning, end or timestamp:MS (offsets differ by partition)"
            )
        }
    };
    let mut client = super::push_client::connect(&args.push).await?;
    let (requests, requests_rx) = mpsc::channel(16);
    let subscribe = proto::Subscribe {
        subscription_id: SUBSCRIPTION,
        topic: args.topic.clone(),
        // The broker reads a text without wildcard tokens as a subject.
        selector: Some(proto::subscribe::Selector::Pattern(args.selector.clone())),
        start: start.map(|from| proto::StartAt { from: Some(from) }),
        ack_mode: proto::AckMode::Cumulative as i32,
        max_lag: 0,
        name: args.name.clone().unwrap_or_default(),
        filter: args.filter.clone().unwrap_or_default(),
        attributes: args.attributes.clone(),
        report_expired: args.report_expired,
    };
    send(&requests, client_message::Kind::Subscribe(subscribe)).await?;
    let mut stream = client
        .session(ReceiverStream::new(requests_rx))
        .await
        .context("opening a push session")?
        .into_inner();
    let mut printed = 0u64;
    let mut token: Option<Vec<u8>> = None;
    let mut acks_in_flight = 0usize;
    let mut out = std::io::stdout().lock();
    let outcome: anyhow::Result<()> = loop {
        if args.max_messages.is_some_and(|max| printed >= max) {
            break Ok(());
        }
        let message = tokio::select! {
            message = stream.message() => message,
            _ = tokio::signal::ctrl_c() => break Ok(()),
        };
        let message = match message {
            Ok(Some(message)) => message,
            Ok(None) => break Ok(()),
            Err(status) => {
                break Err(anyhow::anyhow!(
                    "the push session failed: {}",
                    status.message()
                ))
            }
        };
        match message.kind {
            Some(Kind::Deliveries(batch)) => {
                let mut last: Vec<(u32, u64)> = Vec::new();
                for delivery in batch.deliveries {
                    if args.max_messages.is_some_and(|max| printed >= max) {
                        break;
                    }
                    print(&mut out, &delivery, args.format)?;
                    printed += 1;
                    match last.iter_mut().find(|(p, _)| *p == delivery.partition) {
                        Some(entry) => entry.1 = delivery.offset,
                        None => last.push((delivery.partition, delivery.offset)),
                    }
                }
                out.flush()?;
                for (partition, offset) in last {
                    let ack = proto::Ack {
                        subscription_id: SUBSCRIPTION,
                        partition,
                        offset,
                    };
                    send(&requests, client_message::Kind::Ack(ack)).await?;
                    acks_in_flight += 1;
                }
            }
            Some(Kind::Checkpoint(checkpoint)) => {
                token = Some(checkpoint.resume_token.to_vec());
                acks_in_flight = acks_in_flight.saturating_sub(1);
            }
            Some(Kind::Error(error)) => {
                break Err(anyhow::anyhow!("{}", error.message));
            }
            Some(Kind::GoAway(away)) => {
                break Err(anyhow::anyhow!(
                    "the broker ended the session: {}",
                    away.message
                ));
            }
            Some(Kind::Gap(gap)) => {
                eprintln!(
                    "herald: partition {} offsets {}..{} will not be delivered ({})",
                    gap.partition,
                    gap.from_offset,
                    gap.to_offset,
                    proto::GapReason::try_from(gap.reason)
                        .map_or("unknown reason", |r| r.as_str_name())
                );
            }
            Some(Kind::Unsubscribed(_)) => break Ok(()),
            _ => {}
        }
    };
    // The checkpoints of the last acks, so the token covers every record
    // printed.
    let deadline = tokio::time::Instant::now() + LAST_CHECKPOINT_WAIT;
    while acks_in_flight > 0 {
        match tokio::time::timeout_at(deadline, stream.message()).await {
            Ok(Ok(Some(proto::ServerMessage {
                kind: Some(Kind::Checkpoint(checkpoint)),
            }))) => {
                token = Some(checkpoint.resume_token.to_vec());
                acks_in_flight -= 1;
            }
            Ok(Ok(Some(_))) => {}
            _ => break,
        }
    }
    if let Some(token) = token {
        eprintln!("herald: resume with --resume {}", TOKEN_CODEC.encode(token));
    }
    outcome
}

async fn send(
    requests: &mpsc::Sender<ClientMessage>,
    kind: client_message::Kind,
) -> anyhow::Result<()> {
    requests
        .send(ClientMessage { kind: Some(kind) })
        .await
        .context("the push session closed")
}

fn print(
    out: &mut impl std::io::Write,
    delivery: &proto::Delivery,
    format: OutputFormat,
) -> anyhow::Result<()> {
    let text = |bytes: &Option<bytes::Bytes>| {
        bytes
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    match format {
        OutputFormat::Plain => writeln!(out, "{}", text(&delivery.value).unwrap_or_default())?,
        OutputFormat::Json => {
            let headers: Vec<serde_json::Value> = delivery
                .headers
                .iter()
                .map(|h| serde_json::json!({ "key": h.key, "value": text(&h.value) }))
                .collect();
            let line = serde_json::json!({
                "partition": delivery.partition,
                "offset": delivery.offset,
                "timestamp": delivery.timestamp_ms,
                "key": text(&delivery.key),
                "headers": headers,
                "value": text(&delivery.value),
            });
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}
