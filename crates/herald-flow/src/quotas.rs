//! Client quotas as Kafka keeps them (KIP-546): values by entity, where an
//! entity is a user, a client id, both, or an IP address, each named or
//! the default (no name); plus herald's `tenant` entity, which carries a
//! tenant's SLA. AlterClientQuotas changes go through [`QuotaState::alter`]
//! (checked as Kafka checks them: the entity's shape, each key's entity
//! types, each value), DescribeClientQuotas through
//! [`QuotaState::describe`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Kafka's entity types, and herald's tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityType {
    /// `user`: a principal's name.
    User,
    /// `client-id`.
    ClientId,
    /// `ip`: a client address.
    Ip,
    /// `tenant`: herald's tenants (seed 004's SLAs).
    Tenant,
}

impl EntityType {
    /// The protocol's name.
    pub fn name(self) -> &'static str {
        match self {
            EntityType::User => "user",
            EntityType::ClientId => "client-id",
            EntityType::Ip => "ip",
            EntityType::Tenant => "tenant",
        }
    }

    /// The type a protocol name names.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::User, Self::ClientId, Self::Ip, Self::Tenant]
            .into_iter()
            .find(|t| t.name() == name)
    }
}

/// An entity: one or two components, each a type with a name or the
/// default (`None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity(pub BTreeMap<EntityType, Option<String>>);

/// Whether a key's value is a whole number (Kafka's LONG) or not (DOUBLE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Long,
    Double,
}

/// The keys each entity type takes: Kafka's, and herald's tenant SLA.
fn key_spec(entity: EntityType, key: &str) -> Option<ValueKind> {
    use ValueKind::*;
    match (entity, key) {
        (EntityType::User | EntityType::ClientId, "producer_byte_rate" | "consumer_byte_rate") => {
            Some(Long)
        }
        (
            EntityType::User | EntityType::ClientId,
            "request_percentage" | "controller_mutation_rate",
        ) => Some(Double),
        (EntityType::Ip, "connection_creation_rate") => Some(Long),
        (
            EntityType::Tenant,
            "input_bytes_per_sec"
            | "output_bytes_per_sec"
            | "input_messages_per_sec"
            | "output_messages_per_sec"
            | "max_partitions"
            | "max_stored_bytes"
            | "max_connections",
        ) => Some(Long),
        // 1: refuse a produce over the rate (seed 004's reject mode);
        // 0: throttle it (Kafka's), the default.
        (EntityType::Tenant, "reject_over_rate") => Some(Long),
        _ => None,
    }
}

/// One change of a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaOp {
    /// The key.
    pub key: String,
    /// The value (ignored when removing).
    pub value: f64,
    /// Remove the key instead.
    pub remove: bool,
}

/// Why an entry of AlterClientQuotas was refused (Kafka answers
/// INVALID_REQUEST with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// An entity type nobody knows.
    #[error("unknown entity type {0}")]
    UnknownEntityType(String),
    /// A type named twice, or a combination Kafka does not take.
    #[error("invalid quota entity: {0}")]
    InvalidEntity(String),
    /// A key the entity does not take.
    #[error("invalid configuration key {0}")]
    UnknownKey(String),
    /// A value out of range, or fractional for a whole-number key.
    #[error("invalid value for {key}: {value}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

/// Every quota set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuotaState {
    /// Values by entity.
    #[serde(with = "as_list")]
    pub entries: BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
}

/// The entries as a list of (entity, values): JSON's map keys are strings.
mod as_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::QuotaEntity;

    type Entries = BTreeMap<QuotaEntity, BTreeMap<String, f64>>;

    pub(super) fn serialize<S: Serializer>(entries: &Entries, s: S) -> Result<S::Ok, S::Error> {
        entries.iter().collect::<Vec<_>>().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        let list = Vec::<(QuotaEntity, BTreeMap<String, f64>)>::deserialize(d)?;
        Ok(list.into_iter().collect())
    }
}

impl QuotaEntity {
    /// An entity from (type name, name) components, checked as Kafka
    /// checks them: user, client id, user and client id, ip; herald adds
    /// tenant, alone.
    pub fn parse<'a>(
        components: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, QuotaError> {
        let mut map = BTreeMap::new();
        for (kind, name) in components {
            let kind = EntityType::from_name(kind)
                .ok_or_else(|| QuotaError::UnknownEntityType(kind.to_owned()))?;
            if map.insert(kind, name.map(str::to_owned)).is_some() {
                return Err(QuotaError::InvalidEntity(format!(
                    "{} is named twice",
                    kind.name()
                )));
            }
        }
        let kinds: Vec<EntityType> = map.keys().copied().collect();
        let valid = matches!(
            kinds.as_slice(),
            [EntityType::User]
                | [EntityType::ClientId]
                | [EntityType::User, EntityType::ClientId]
                | [EntityType::Ip]
                | [EntityType::Tenant]
        );
        if !valid {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            return Err(QuotaError::InvalidEntity(format!(
                "the combination [{}] is not allowed",
                names.join(", ")
            )));
        }
        if let Some(Some(ip)) = map.get(&EntityType::Ip) {
            if ip.parse::<std::net::IpAddr>().is_err() {
                return Err(QuotaError::InvalidEntity(format!(
                    "{ip} is not an IP address"
                )));
            }
        }
        Ok(Self(map))
    }
}

impl QuotaState {
    /// Checks `ops` against `entity` and applies them; nothing changes if
    /// one is refused.
    pub fn alter(&mut self, entity: &QuotaEntity, ops: &[QuotaOp]) -> Result<(), QuotaError> {
        let kinds: Vec<EntityType> = entity.0.keys().copied().collect();
        for op in ops {
            // A key must suit every component of the entity.
            let kind = kinds
                .iter()
                .map(|k| key_spec(*k, &op.key))
                .reduce(|a, b| if a == b { a } else { None })
                .flatten()
                .ok_or_else(|| QuotaError::UnknownKey(op.key.clone()))?;
            if op.remove {
                continue;
            }
            let whole = op.value.fract() == 0.0;
            if !op.value.is_finite() || op.value <= 0.0 || (kind == ValueKind::Long && !whole) {
                return Err(QuotaError::InvalidValue {
                    key: op.key.clone(),
                    value: op.value.to_string(),
                });
            }
        }
        let values = self.entries.entry(entity.clone()).or_default();
        for op in ops {
            if op.remove {
                values.remove(&op.key);
            } else {
                values.insert(op.key.clone(), op.value);
            }
        }
        if values.is_empty() {
            self.entries.remove(entity);
        }
        Ok(())
    }

    /// The entries DescribeClientQuotas answers for `filter`: each
    /// component is a type with an exact name (`Exact`), the default
    /// (`Default`) or any name, or the default (`Any`); with `strict`, an
    /// entity must have no other component.
    pub fn describe(
        &self,
        filter: &[(EntityType, Match)],
        strict: bool,
    ) -> Vec<(&QuotaEntity, &BTreeMap<String, f64>)> {
        self.entries
            .iter()
            .filter(|(entity, _)| {
                filter
                    .iter()
                    .all(|(kind, want)| match (entity.0.get(kind), want) {
                        (None, _) => false,
                        (Some(name), Match::Exact(exact)) => {
                            name.as_deref() == Some(exact.as_str())
                        }
                        (Some(name), Match::Default) => name.is_none(),
                        (Some(_), Match::Any) => true,
                    })
                    && (!strict || entity.0.len() == filter.len())
            })
            .collect()
    }
}

impl QuotaState {
    /// The quota `key` of a client (`user`, `client_id`), with the entity
    /// it comes from, by Kafka's precedence: user and client id, user and
    /// default client, user, default user and client id, default user and
    /// default client, default user, client id, default client.
    pub fn resolve(&self, user: &str, client_id: &str, key: &str) -> Option<(QuotaEntity, f64)> {
        let candidates: [&[(EntityType, Option<&str>)]; 8] = [
            &[
                (EntityType::User, Some(user)),
                (EntityType::ClientId, Some(client_id)),
            ],
            &[(EntityType::User, Some(user)), (EntityType::ClientId, None)],
            &[(EntityType::User, Some(user))],
            &[
                (EntityType::User, None),
                (EntityType::ClientId, Some(client_id)),
            ],
            &[(EntityType::User, None), (EntityType::ClientId, None)],
            &[(EntityType::User, None)],
            &[(EntityType::ClientId, Some(client_id))],
            &[(EntityType::ClientId, None)],
        ];
        candidates.iter().find_map(|components| {
            let entity = QuotaEntity(
                components
                    .iter()
                    .map(|(kind, name)| (*kind, name.map(str::to_owned)))
                    .collect(),
            );
            let value = *self.entries.get(&entity)?.get(key)?;
            Some((entity, value))
        })
    }
}

/// How DescribeClientQuotas matches one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// This name.
    Exact(String),
    /// The default entity of the type.
    Default,
    /// Any entity of the type, named or default.
    Any,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(key: &str, value: f64) -> QuotaOp {
        QuotaOp {
            key: key.into(),
            value,
            remove: false,
        }
    }

    #[test]
    fn entities_are_the_shapes_kafka_takes() {
        assert!(QuotaEntity::parse([("user", Some("alice"))]).is_ok());
        assert!(QuotaEntity::parse([("user", None), ("client-id", Some("app"))]).is_ok());
        assert!(QuotaEntity::parse([("ip", Some("10.0.0.1"))]).is_ok());
        assert!(QuotaEntity::parse([("tenant", Some("acme"))]).is_ok());
        assert_eq!(
            QuotaEntity::parse([("user", Some("a")), ("ip", Some("10.0.0.1"))]),
            Err(QuotaError::InvalidEntity(
                "the combination [user, ip] is not allowed".into()
            ))
        );
        assert!(matches!(
            QuotaEntity::parse([("group", Some("g"))]),
            Err(QuotaError::UnknownEntityType(_))
        ));
        assert!(matches!(
            QuotaEntity::parse([("ip", Some("not-an-ip"))]),
            Err(QuotaError::InvalidEntity(_))
        ));
    }

    #[test]
    fn keys_and_values_are_checked_and_a_refusal_changes_nothing() {
        let mut state = QuotaState::default();
        let alice = QuotaEntity::parse([("user", Some("alice"))]).expect("entity");
        state
            .alter(
                &alice,
                &[
                    op("producer_byte_rate", 1024.0),
                    op("request_percentage", 12.5),
                ],
            )
            .expect("valid");
        for bad in [
            op("producer_byte_rate", 0.5),
            op("producer_byte_rate", -1.0),
            op("connection_creation_rate", 5.0),
            op("no_such_key", 1.0),
        ] {
            let before = state.clone();
            assert!(state
                .alter(&alice, &[op("consumer_byte_rate", 10.0), bad])
                .is_err());
            assert_eq!(state, before);
        }
        let remove = QuotaOp {
            key: "producer_byte_rate".into(),
            value: 0.0,
            remove: true,
        };
        state.alter(&alice, &[remove]).expect("removed");
        assert_eq!(state.entries[&alice].len(), 1);
    }

    #[test]
    fn describe_matches_exact_default_and_any_names() {
        let mut state = QuotaState::default();
        let named = QuotaEntity::parse([("user", Some("alice"))]).expect("entity");
        let default = QuotaEntity::parse([("user", None)]).expect("entity");
        let both = QuotaEntity::parse([("user", Some("alice")), ("client-id", Some("app"))])
            .expect("entity");
        for entity in [&named, &default, &both] {
            state
                .alter(entity, &[op("producer_byte_rate", 100.0)])
                .expect("valid");
        }
        let exact = state.describe(&[(EntityType::User, Match::Exact("alice".into()))], false);
        assert_eq!(exact.len(), 2);
        let strict = state.describe(&[(EntityType::User, Match::Exact("alice".into()))], true);
        assert_eq!(strict.len(), 1);
        assert_eq!(
            state
                .describe(&[(EntityType::User, Match::Default)], true)
                .len(),
            1
        );
        assert_eq!(
            state
                .describe(&[(EntityType::User, Match::Any)], false)
                .len(),
            3
        );
        assert_eq!(state.describe(&[], false).len(), 3);
    }

    #[test]
    fn a_client_gets_the_most_specific_quota_as_kafka_resolves_them() {
        let mut state = QuotaState::default();
        let set = |state: &mut QuotaState, components: &[(&str, Option<&str>)], rate: f64| {
            let entity = QuotaEntity::parse(components.iter().copied()).expect("entity");
            state
                .alter(&entity, &[op("producer_byte_rate", rate)])
                .expect("valid");
        };
        assert_eq!(state.resolve("alice", "app", "producer_byte_rate"), None);
        set(&mut state, &[("client-id", None)], 8.0);
        assert_eq!(
            state
                .resolve("alice", "app", "producer_byte_rate")
                .map(|r| r.1),
            Some(8.0)
        );
        set(&mut state, &[("client-id", Some("app"))], 7.0);
        set(&mut state, &[("user", None)], 6.0);
        assert_eq!(
            state
                .resolve("alice", "app", "producer_byte_rate")
                .map(|r| r.1),
            Some(6.0)
        );
        set(&mut state, &[("user", Some("alice"))], 3.0);
        assert_eq!(
            state
                .resolve("alice", "app", "producer_byte_rate")
                .map(|r| r.1),
            Some(3.0)
        );
        set(
            &mut state,
            &[("user", Some("alice")), ("client-id", Some("app"))],
            1.0,
        );
        assert_eq!(
            state
                .resolve("alice", "app", "producer_byte_rate")
                .map(|r| r.1),
            Some(1.0)
        );
        // Another user falls back to the default user's.
        assert_eq!(
            state
                .resolve("bob", "app", "producer_byte_rate")
                .map(|r| r.1),
            Some(6.0)
        );
        assert_eq!(state.resolve("bob", "app", "consumer_byte_rate"), None);
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let mut state = QuotaState::default();
        let tenant = QuotaEntity::parse([("tenant", Some("acme"))]).expect("entity");
        state
            .alter(
                &tenant,
                &[op("input_bytes_per_sec", 1e6), op("reject_over_rate", 1.0)],
            )
            .expect("valid");
        let text = serde_json::to_string(&state).expect("json");
        let back: QuotaState = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, state);
    }
}
