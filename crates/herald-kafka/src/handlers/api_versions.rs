//! ApiVersions: which APIs and versions herald serves.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use crate::error_code;
use crate::registry::APIS;

fn api_keys() -> Vec<ApiVersion> {
    APIS.iter()
        .map(|r| {
            ApiVersion::default()
                .with_api_key(r.key as i16)
                .with_min_version(r.min)
                .with_max_version(r.max)
        })
        .collect()
}

/// Answers an ApiVersions request.
pub fn handle(_request: &ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_api_keys(api_keys())
}

/// The v0 answer to an ApiVersions request above our maximum version: the
/// error plus our ranges, so the client can retry with a version we serve.
pub fn unsupported_version() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code::code(ResponseError::UnsupportedVersion))
        .with_api_keys(api_keys())
}

/// How the guard walks this API's request body before `kafka-protocol`
/// decodes it, transcribed from Kafka's message definition (the registry's
/// tests check it consumes exactly the bytes of every served version).
pub(crate) mod layout {
    use crate::codec::guard::Ty::*;
    use crate::codec::guard::{since, Schema};

    pub(crate) const SCHEMA: Schema = Schema {
        flexible_from: 3,
        fields: &[since(3, Str), since(3, Str)],
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn lists_produce_from_v0_fetch_from_v4_and_find_coordinator_from_v0() {
        let r = handle(&ApiVersionsRequest::default(), 3);
        let find = |k: ApiKey| r.api_keys.iter().find(|a| a.api_key == k as i16).cloned();
        assert_eq!(
            find(ApiKey::Produce).map(|a| (a.min_version, a.max_version)),
            Some((0, 13))
        );
        assert_eq!(find(ApiKey::Fetch).map(|a| a.min_version), Some(4));
        // librdkafka derives its LZ4 feature from FindCoordinator v0.
        assert_eq!(
            find(ApiKey::FindCoordinator).map(|a| a.min_version),
            Some(0)
        );
        assert!(find(ApiKey::EndTxn).is_none());
    }

    #[test]
    fn too_new_request_gets_unsupported_version_with_the_list() {
        let r = unsupported_version();
        assert_eq!(r.error_code, 35);
        assert!(!r.api_keys.is_empty());
    }
}
