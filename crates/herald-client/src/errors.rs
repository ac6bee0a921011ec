//! Kafka error codes as one-line reasons.

use crate::error::ClientError;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// A short description of a non-zero error code.
pub fn describe(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(code)) => format!("error code {code}"),
        Some(error) => format!("{error} ({error:?}, code {code})"),
        None => "no error".to_owned(),
    }
}

/// Fails with `context` and the broker's reason if `code` is not 0.
pub fn check(code: i16, message: Option<&StrBytes>, context: &str) -> Result<(), ClientError> {
    if code == 0 {
        return Ok(());
    }
    let reason = match message.map(|m| m.as_str()).filter(|m| !m.is_empty()) {
        Some(message) => format!("{message} ({})", short(code)),
        None => describe(code),
    };
    Err(ClientError::Broker {
        context: context.to_owned(),
        code,
        reason,
    })
}

/// The error's name alone, e.g. `InvalidConfig`.
fn short(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(code)) => {
            format!("error code {code}")
        }
        Some(error) => format!("{error:?}"),
        None => "no error".to_owned(),
    }
}
