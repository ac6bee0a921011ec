//! Between the session protocol's messages and the push engine's types:
//! requests checked and read, events and errors written. Every protocol
//! code is chosen here and nowhere else.

use std::collections::HashMap;

use herald_filter::Attributes;
use herald_push::{
    AckError, AckMode, Event, GapReason, PublishError, PublishRecord, Selection, Start,
    SubscribeError, SubscribeRequest,
};
use herald_subjects::Selector;

use crate::proto::{self, server_message::Kind, ErrorCode, ServerMessage};

/// A request the session cannot take, with the code to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl Refused {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::InvalidRequest,
            message: message.into(),
        }
    }

    /// The `Error` message for it.
    pub(crate) fn to_message(&self, subscription_id: u64, request_id: u64) -> ServerMessage {
        message(Kind::Error(proto::Error {
            code: self.code as i32,
            message: self.message.clone(),
            subscription_id,
            request_id,
            retry_after_ms: 0,
        }))
    }
}

pub(crate) fn message(kind: Kind) -> ServerMessage {
    ServerMessage { kind: Some(kind) }
}

/// Reads a `Subscribe`.
pub(crate) fn subscribe_request(request: proto::Subscribe) -> Result<SubscribeRequest, Refused> {
    let selector = match &request.selector {
        Some(proto::subscribe::Selector::Subject(subject)) => Selector::literal(subject),
        Some(proto::subscribe::Selector::Pattern(pattern)) => Selector::parse(pattern.as_bytes()),
        None => {
            return Err(Refused::invalid(
                "a subscription names a subject or a pattern",
            ))
        }
    }
    .map_err(|e| Refused {
        code: ErrorCode::InvalidSelector,
        message: e.to_string(),
    })?;
    if request.topic.is_empty() {
        return Err(Refused::invalid("a subscription names a topic"));
    }
    let name = (!request.name.is_empty()).then_some(request.name);
    let start = match request.start.and_then(|s| s.from) {
        None if name.is_some() => Start::Stored,
        None | Some(proto::start_at::From::Now(_)) => Start::Now,
        Some(proto::start_at::From::Earliest(_)) => Start::Earliest,
        Some(proto::start_at::From::Offsets(offsets)) => {
            Start::Offsets(offsets.offsets.into_iter().collect::<HashMap<_, _>>())
        }
        Some(proto::start_at::From::TimestampMs(ms)) => Start::Timestamp(ms),
        Some(proto::start_at::From::ResumeToken(token)) => Start::Token(token.to_vec()),
        Some(proto::start_at::From::LastPerSubject(n)) => Start::LastPerSubject(n),
    };
    let ack_mode = match proto::AckMode::try_from(request.ack_mode) {
        Ok(proto::AckMode::None) => AckMode::None,
        Ok(proto::AckMode::Cumulative) => AckMode::Cumulative,
        Err(_) => {
            return Err(Refused::invalid(format!(
                "unknown ack mode {}",
                request.ack_mode
            )))
        }
    };
    let selection = selection(Some(&request.filter), &request.attributes)?;
    Ok(SubscribeRequest {
        id: request.subscription_id,
        topic: request.topic,
        selector,
        start,
        ack_mode,
        max_lag: request.max_lag,
        name,
        selection,
        report_expired: request.report_expired,
    })
}

/// A subscription's filter and attributes, checked.
pub(crate) fn selection(
    filter: Option<&str>,
    attributes: &[impl AsRef<[u8]>],
) -> Result<Selection, Refused> {
    let invalid = |message: String| Refused {
        code: ErrorCode::InvalidFilter,
        message,
    };
    let attributes = Attributes::new(attributes).map_err(|e| invalid(e.to_string()))?;
    Selection::new(filter, attributes).map_err(|e| invalid(e.to_string()))
}

/// Reads a `PublishRequest`.
pub(crate) fn publish_record(request: proto::PublishRequest) -> Result<PublishRecord, Refused> {
    if request.topic.is_empty() {
        return Err(Refused::invalid("a publish names a topic"));
    }
    Ok(PublishRecord {
        topic: request.topic,
        key: request.key.map(|k| k.to_vec()),
        value: request.value.map(|v| v.to_vec()),
        headers: request
            .headers
            .into_iter()
            .map(|h| (h.key.into_bytes(), h.value.map(|v| v.to_vec())))
            .collect(),
        partition: request.partition,
        timestamp_ms: request.timestamp_ms,
    })
}

pub(crate) fn subscribe_refused(error: &SubscribeError) -> Refused {
    let code = match error {
        SubscribeError::UnknownTopic(_) => ErrorCode::UnknownTopic,
        SubscribeError::NotAuthorized(_) => ErrorCode::NotAuthorized,
        SubscribeError::TooManySubscriptions { .. } => ErrorCode::TooManySubscriptions,
        SubscribeError::SubscribeRate { .. } => ErrorCode::SubscribeRate,
        SubscribeError::DuplicateId(_) => ErrorCode::DuplicateSubscriptionId,
        SubscribeError::InvalidToken(_) => ErrorCode::InvalidToken,
        SubscribeError::StaleToken(_) => ErrorCode::StaleToken,
        SubscribeError::Invalid(_) => ErrorCode::InvalidRequest,
        SubscribeError::Storage(_) => ErrorCode::Storage,
    };
    Refused {
        code,
        message: error.to_string(),
    }
}

pub(crate) fn ack_refused(error: &AckError) -> Refused {
    let code = match error {
        AckError::UnknownSubscription(_) => ErrorCode::UnknownSubscription,
        AckError::NotDelivered { .. } => ErrorCode::InvalidRequest,
    };
    Refused {
        code,
        message: error.to_string(),
    }
}

pub(crate) fn publish_refused(error: &PublishError) -> Refused {
    use herald_broker::ProduceError;
    let code = match error {
        PublishError::UnknownTopic(_) => ErrorCode::UnknownTopic,
        PublishError::NotAuthorized(_) => ErrorCode::NotAuthorized,
        PublishError::UnknownPartition { .. } => ErrorCode::InvalidRequest,
        PublishError::Produce(ProduceError::TooLarge { .. }) => ErrorCode::RecordTooLarge,
        PublishError::Produce(_) => ErrorCode::Storage,
        PublishError::OverRate(_) => ErrorCode::ResourceExhausted,
        PublishError::TenantCap(_) => ErrorCode::TenantCap,
    };
    Refused {
        code,
        message: error.to_string(),
    }
}

/// When a refused publish may be tried again, in ms (0: no advice).
pub(crate) fn publish_retry_after_ms(error: &PublishError) -> u32 {
    match error {
        PublishError::OverRate(refusal) => {
            u32::try_from(refusal.retry_after.as_millis().max(1)).unwrap_or(u32::MAX)
        }
        _ => 0,
    }
}

/// A run of consecutive deliveries taken from the outbox, for one
/// `Deliveries` message: a view of the taken events themselves, so that
/// nothing is moved or allocated per delivery to hand them to a transport
/// (WebSocket then copies each delivery's bytes once; gRPC builds its
/// message).
#[derive(Clone, Copy)]
pub(crate) struct DeliveryRun<'a>(&'a [Event]);

impl<'a> DeliveryRun<'a> {
    /// The deliveries, in order.
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a herald_push::Delivery> + Clone {
        self.0.iter().filter_map(|event| match event {
            Event::Delivery(delivery) => Some(delivery),
            _ => None,
        })
    }
}

/// What a run of taken events starts with: the deliveries up to the first
/// control event, or that control event.
pub(crate) enum Part<'a> {
    /// Consecutive deliveries, for one `Deliveries` message.
    Deliveries(DeliveryRun<'a>),
    /// A control event (anything but a delivery).
    Control(&'a Event),
}

/// Splits `events` into its first part and the rest; `None` once empty.
pub(crate) fn next_part(events: &[Event]) -> Option<(Part<'_>, &[Event])> {
    let first = events.first()?;
    let run = events
        .iter()
        .take_while(|event| matches!(event, Event::Delivery(_)))
        .count();
    Some(if run == 0 {
        (Part::Control(first), &events[1..])
    } else {
        let (run, rest) = events.split_at(run);
        (Part::Deliveries(DeliveryRun(run)), rest)
    })
}

/// Appends the messages a control event becomes to `out`: one, or for a
/// subscription that ended, an error naming it and then its end marker.
/// Deliveries become nothing here (see [`next_part`]).
pub(crate) fn control_messages(event: &Event, out: &mut Vec<ServerMessage>) {
    let kind = match event {
        Event::Delivery(_) => return,
        Event::Subscribed {
            subscription_id,
            start_offsets,
        } => Kind::Subscribed(proto::Subscribed {
            subscription_id: *subscription_id,
            start_offsets: start_offsets.iter().copied().collect(),
        }),
        Event::Gap {
            subscription_id,
            partition,
            from_offset,
            to_offset,
            reason,
        } => Kind::Gap(proto::Gap {
            subscription_id: *subscription_id,
            partition: *partition,
            from_offset: *from_offset,
            to_offset: *to_offset,
            reason: gap_reason(*reason) as i32,
        }),
        Event::State {
            subscription_id,
            live,
            lag,
            ..
        } => Kind::Status(proto::Status {
            subscription_id: *subscription_id,
            state: if *live {
                proto::SubscriptionState::Live
            } else {
                proto::SubscriptionState::CatchingUp
            } as i32,
            lag: *lag,
        }),
        Event::Unsubscribed { subscription_id } => Kind::Unsubscribed(proto::Unsubscribed {
            subscription_id: *subscription_id,
        }),
        Event::Ended {
            subscription_id,
            reason,
        } => {
            out.push(message(Kind::Error(proto::Error {
                code: ErrorCode::UnknownTopic as i32,
                message: reason.clone(),
                subscription_id: *subscription_id,
                request_id: 0,
                retry_after_ms: 0,
            })));
            Kind::Unsubscribed(proto::Unsubscribed {
                subscription_id: *subscription_id,
            })
        }
    };
    out.push(message(kind));
}

/// `deliveries` as one `Deliveries` message.
pub(crate) fn deliveries_message<'a>(
    deliveries: impl Iterator<Item = &'a herald_push::Delivery>,
) -> ServerMessage {
    // Sized by the upper bound: a run's iterator knows its length only as
    // that (it skips what is not a delivery, and a run holds none such).
    let mut fields = Vec::with_capacity(deliveries.size_hint().1.unwrap_or(0));
    fields.extend(
        deliveries
            .map(|d| delivery_fields(d.subscription_id, d.partition, &d.record, d.high_priority)),
    );
    message(Kind::Deliveries(proto::Deliveries { deliveries: fields }))
}

pub(crate) fn gap_reason(reason: GapReason) -> proto::GapReason {
    match reason {
        GapReason::Retention => proto::GapReason::Retention,
        GapReason::LagLimit => proto::GapReason::LagLimit,
        GapReason::Expired => proto::GapReason::Expired,
    }
}

/// One delivery of `record` as its message.
pub(crate) fn delivery_fields(
    subscription_id: u64,
    partition: u32,
    record: &herald_push::SharedRecord,
    high_priority: bool,
) -> proto::Delivery {
    proto::Delivery {
        subscription_id,
        partition,
        offset: record.offset,
        timestamp_ms: record.timestamp,
        key: record.key.clone(),
        value: record.value.clone(),
        headers: record
            .headers()
            .map_while(Result::ok)
            .map(|(key, value)| proto::Header {
                key: String::from_utf8_lossy(key).into_owned(),
                value: value.map(bytes::Bytes::copy_from_slice),
            })
            .collect(),
        priority: if high_priority {
            proto::Priority::High
        } else {
            proto::Priority::Normal
        } as i32,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use herald_push::{Delivery, SharedRecord};

    use super::*;

    fn delivery(subscription_id: u64) -> Event {
        let batch = {
            let mut builder = herald_records::BatchBuilder::new(0);
            builder.push(herald_records::RecordFields {
                timestamp_ms: 0,
                key: Some(b"k"),
                value: Some(b"v"),
                headers: &[],
            });
            bytes::Bytes::from(builder.finish().expect("a batch"))
        };
        let parsed = herald_records::RecordBatch::new(&batch).expect("parses");
        let record = parsed
            .records_in_place()
            .expect("uncompressed")
            .next()
            .expect("one record")
            .expect("readable");
        Event::Delivery(Delivery {
            subscription_id,
            partition: 0,
            record: Arc::new(SharedRecord::slice_of(&batch, &record)),
            high_priority: false,
        })
    }

    /// The parts `events` splits into, as subscription ids of each run of
    /// deliveries, or the kind of each control event's messages.
    fn parts(mut events: &[Event]) -> Vec<String> {
        let mut out = Vec::new();
        while let Some((part, rest)) = next_part(events) {
            events = rest;
            out.push(match part {
                Part::Deliveries(run) => format!(
                    "deliveries {:?}",
                    run.iter().map(|d| d.subscription_id).collect::<Vec<_>>()
                ),
                Part::Control(event) => {
                    let mut messages = Vec::new();
                    control_messages(event, &mut messages);
                    messages
                        .iter()
                        .map(|m| match &m.kind {
                            Some(Kind::Gap(_)) => "gap",
                            Some(Kind::Error(_)) => "error",
                            Some(Kind::Unsubscribed(_)) => "unsubscribed",
                            _ => "other",
                        })
                        .collect::<Vec<_>>()
                        .join(" then ")
                }
            });
        }
        out
    }

    #[test]
    fn taken_events_split_into_runs_of_deliveries_and_control_messages() {
        let gap = Event::Gap {
            subscription_id: 1,
            partition: 0,
            from_offset: 3,
            to_offset: 5,
            reason: GapReason::Retention,
        };
        let ended = Event::Ended {
            subscription_id: 2,
            reason: "topic deleted".into(),
        };
        let events = vec![
            delivery(1),
            delivery(2),
            gap,
            delivery(3),
            ended,
            Event::Unsubscribed { subscription_id: 4 },
        ];
        assert_eq!(
            parts(&events),
            [
                "deliveries [1, 2]",
                "gap",
                "deliveries [3]",
                "error then unsubscribed",
                "unsubscribed",
            ]
        );
        assert!(parts(&[]).is_empty());
    }
}
