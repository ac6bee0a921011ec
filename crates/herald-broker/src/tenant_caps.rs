//! A tenant's caps (seed 004's SLA, section 2.3.6): the partitions its
//! namespaces' topics may have, the bytes they may store, and the
//! connections its principals may hold, across the Kafka listeners and
//! the push gateway.
//!
//! Partitions are counted from the metadata under the admin lock, so two
//! creations cannot both slip under the cap. Stored bytes are summed from
//! the partitions' storage at most every [`USAGE_MAX_AGE`], and what each
//! produce adds is counted in between: a tenant goes over its cap by at
//! most the produce that crosses it, and is refused from then until
//! retention or deletion brings it back under.
//! Connections are counted as they authenticate and uncounted when they
//! close.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_auth::SecurityState;
use herald_flow::sla::{MAX_CONNECTIONS, MAX_PARTITIONS, MAX_STORED_BYTES};
use herald_flow::{EntityType, QuotaEntity, QuotaState};
use parking_lot::Mutex;

/// How old a tenant's stored-bytes sum may be when a produce is checked
/// against it: summing every partition on each produce would cost more
/// than the produce.
pub const USAGE_MAX_AGE: Duration = Duration::from_millis(200);

/// A cap a request would exceed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapExceeded {
    /// Creating a topic or partitions would take the tenant's topics past
    /// `max_partitions`.
    #[error("tenant {tenant} may have at most {max} partitions (max_partitions); its topics have {have} and this adds {adding}")]
    Partitions {
        /// The tenant.
        tenant: String,
        /// Its cap.
        max: u64,
        /// Partitions its topics have.
        have: u64,
        /// Partitions the request adds.
        adding: u64,
    },
    /// The tenant's topics store `max_stored_bytes` or more.
    #[error("tenant {tenant} stores {stored} bytes, at or over its max_stored_bytes of {max}: delete records, shorten retention or raise the cap")]
    StoredBytes {
        /// The tenant.
        tenant: String,
        /// Its cap.
        max: u64,
        /// Bytes its topics store.
        stored: u64,
    },
    /// The tenant's principals hold `max_connections` connections.
    #[error("tenant {tenant} holds {max} connections, its max_connections")]
    Connections {
        /// The tenant.
        tenant: String,
        /// Its cap.
        max: u64,
    },
}

/// The tenant cap `key`, if tenant `name` has one.
pub fn cap(quotas: &QuotaState, name: &str, key: &str) -> Option<u64> {
    let entity = QuotaEntity([(EntityType::Tenant, Some(name.to_owned()))].into());
    quotas.entries.get(&entity)?.get(key).map(|v| *v as u64)
}

/// Connections per tenant, shared with every [`TenantConnection`].
type Counts = Arc<Mutex<HashMap<String, u64>>>;

/// What the caps keep between requests: connection counts and recent
/// stored-bytes sums.
#[derive(Debug, Default)]
pub struct TenantCaps {
    connections: Counts,
    stored: Mutex<HashMap<String, (u64, Instant)>>,
}

/// One connection counted against its tenant; uncounted when dropped.
#[derive(Debug)]
pub struct TenantConnection {
    tenant: String,
    counts: Counts,
}

impl Drop for TenantConnection {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(count) = counts.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.tenant);
            }
        }
    }
}

impl TenantCaps {
    /// Counts a connection of `principal`: `None` when the principal is
    /// in no tenant, refused when its tenant holds `max_connections`
    /// already. Counted whether or not a cap is set, so that a cap set
    /// later sees the connections already open.
    pub fn admit_connection(
        &self,
        security: &SecurityState,
        quotas: &QuotaState,
        principal: &str,
    ) -> Result<Option<TenantConnection>, CapExceeded> {
        let Some(tenant) = security.tenant_of_principal(principal) else {
            return Ok(None);
        };
        let max = cap(quotas, &tenant.name, MAX_CONNECTIONS);
        let mut counts = self.connections.lock();
        let count = counts.entry(tenant.name.clone()).or_insert(0);
        if let Some(max) = max {
            if *count >= max {
                return Err(CapExceeded::Connections {
                    tenant: tenant.name.clone(),
                    max,
                });
            }
        }
        *count += 1;
        Ok(Some(TenantConnection {
            tenant: tenant.name.clone(),
            counts: Arc::clone(&self.connections),
        }))
    }

    /// Connections tenant `name` holds now.
    pub fn connections(&self, name: &str) -> u64 {
        self.connections.lock().get(name).copied().unwrap_or(0)
    }

    /// Refuses a produce of `adding` bytes to `topic` while its tenant
    /// stores its `max_stored_bytes` or more; counts the bytes of one it
    /// lets through. `stored_bytes` sums the tenant's partitions, and is
    /// called when the last sum is [`USAGE_MAX_AGE`] old at `now`: the
    /// sum then catches up with retention and deletions, and the bytes
    /// counted between sums keep a fast producer from running past the
    /// cap meanwhile.
    pub fn check_storage(
        &self,
        security: &SecurityState,
        quotas: &QuotaState,
        topic: &str,
        adding: u64,
        now: Instant,
        stored_bytes: impl FnOnce(&herald_auth::Tenant) -> u64,
    ) -> Result<(), CapExceeded> {
        let Some(tenant) = security.tenant_of_topic(topic) else {
            return Ok(());
        };
        let Some(max) = cap(quotas, &tenant.name, MAX_STORED_BYTES) else {
            return Ok(());
        };
        let fresh = self
            .stored
            .lock()
            .get(&tenant.name)
            .is_some_and(|(_, at)| now.duration_since(*at) < USAGE_MAX_AGE);
        if !fresh {
            // Summed outside the lock: two produces may both sum, which
            // costs a little and answers the same.
            let bytes = stored_bytes(tenant);
            self.stored.lock().insert(tenant.name.clone(), (bytes, now));
        }
        let mut sums = self.stored.lock();
        let (stored, _) = sums.entry(tenant.name.clone()).or_insert((0, now));
        if *stored >= max {
            return Err(CapExceeded::StoredBytes {
                tenant: tenant.name.clone(),
                max,
                stored: *stored,
            });
        }
        *stored = stored.saturating_add(adding);
        Ok(())
    }
}

/// Refuses adding `adding` partitions to `topic` when its tenant's topics
/// would then have more than its `max_partitions`. `partitions_of` gives
/// each existing topic's partition count.
pub fn check_partitions<'a>(
    security: &SecurityState,
    quotas: &QuotaState,
    topic: &str,
    adding: u64,
    topics: impl Iterator<Item = (&'a str, u64)>,
) -> Result<(), CapExceeded> {
    let Some(tenant) = security.tenant_of_topic(topic) else {
        return Ok(());
    };
    let Some(max) = cap(quotas, &tenant.name, MAX_PARTITIONS) else {
        return Ok(());
    };
    let have: u64 = topics
        .filter(|(name, _)| {
            security
                .tenant_of_topic(name)
                .is_some_and(|t| t.name == tenant.name)
        })
        .map(|(_, partitions)| partitions)
        .sum();
    if have.saturating_add(adding) > max {
        return Err(CapExceeded::Partitions {
            tenant: tenant.name.clone(),
            max,
            have,
            adding,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_auth::SecurityCommand;

    fn security() -> SecurityState {
        let mut state = SecurityState::default();
        for (name, principal, prefix) in [
            ("acme", "User:alice", "acme."),
            ("globex", "User:bob", "globex."),
        ] {
            state
                .apply(SecurityCommand::CreateTenant {
                    name: name.into(),
                    principals: [principal.to_owned()].into(),
                    namespaces: [prefix.to_owned()].into(),
                })
                .expect("created");
        }
        state
    }

    fn quotas(values: &[(&str, &str, f64)]) -> QuotaState {
        let mut state = QuotaState::default();
        for (tenant, key, value) in values {
            let entity = QuotaEntity([(EntityType::Tenant, Some((*tenant).to_owned()))].into());
            state
                .entries
                .entry(entity)
                .or_default()
                .insert((*key).to_owned(), *value);
        }
        state
    }

    #[test]
    fn a_tenant_at_its_connection_cap_is_refused_until_one_closes() {
        let (security, quotas) = (security(), quotas(&[("acme", MAX_CONNECTIONS, 2.0)]));
        let caps = TenantCaps::default();
        let one = caps.admit_connection(&security, &quotas, "User:alice");
        let two = caps.admit_connection(&security, &quotas, "User:alice");
        assert!(matches!((&one, &two), (Ok(Some(_)), Ok(Some(_)))));
        assert_eq!(
            caps.admit_connection(&security, &quotas, "User:alice")
                .err(),
            Some(CapExceeded::Connections {
                tenant: "acme".into(),
                max: 2
            })
        );
        // Another tenant, and a principal in none, are not held back.
        assert!(matches!(
            caps.admit_connection(&security, &quotas, "User:bob"),
            Ok(Some(_))
        ));
        assert!(matches!(
            caps.admit_connection(&security, &quotas, "User:carol"),
            Ok(None)
        ));
        drop(one);
        assert_eq!(caps.connections("acme"), 1);
        assert!(caps
            .admit_connection(&security, &quotas, "User:alice")
            .is_ok());
    }

    #[test]
    fn partitions_are_counted_over_the_tenants_topics_only() {
        let (security, quotas) = (security(), quotas(&[("acme", MAX_PARTITIONS, 10.0)]));
        let topics = [
            ("acme.a", 4),
            ("acme.b", 4),
            ("globex.a", 100),
            ("other", 50),
        ];
        let check = |topic: &str, adding| {
            check_partitions(
                &security,
                &quotas,
                topic,
                adding,
                topics.iter().map(|(n, p)| (*n, *p)),
            )
        };
        assert_eq!(check("acme.c", 2), Ok(()));
        assert_eq!(
            check("acme.c", 3),
            Err(CapExceeded::Partitions {
                tenant: "acme".into(),
                max: 10,
                have: 8,
                adding: 3
            })
        );
        assert_eq!(check("globex.b", 1000), Ok(()));
        assert_eq!(check("nobody", 1000), Ok(()));
    }

    #[test]
    fn storage_is_refused_at_the_cap_and_summed_at_most_every_interval() {
        let (security, quotas) = (security(), quotas(&[("acme", MAX_STORED_BYTES, 1000.0)]));
        let caps = TenantCaps::default();
        let sums = std::cell::Cell::new(0);
        let sum = |bytes: u64| {
            let sums = &sums;
            move |_: &herald_auth::Tenant| {
                sums.set(sums.get() + 1);
                bytes
            }
        };
        let start = Instant::now();
        let check = |topic: &str, adding: u64, at: Duration, bytes: u64| {
            caps.check_storage(&security, &quotas, topic, adding, start + at, sum(bytes))
        };
        assert_eq!(check("acme.a", 500, Duration::ZERO, 400), Ok(()));
        // Within the interval the first sum stands, with what was let
        // through since: 900, then 1000, which is the cap.
        assert_eq!(check("acme.b", 100, USAGE_MAX_AGE / 2, 5000), Ok(()));
        assert_eq!(
            check("acme.b", 1, USAGE_MAX_AGE / 2, 5000),
            Err(CapExceeded::StoredBytes {
                tenant: "acme".into(),
                max: 1000,
                stored: 1000
            })
        );
        assert_eq!(sums.get(), 1);
        // A new sum (retention deleted some) lets produces in again.
        assert_eq!(check("acme.a", 1, USAGE_MAX_AGE, 999), Ok(()));
        assert_eq!(
            check("acme.a", 1, USAGE_MAX_AGE, 0),
            Err(CapExceeded::StoredBytes {
                tenant: "acme".into(),
                max: 1000,
                stored: 1000
            })
        );
        assert_eq!(check("globex.a", 1, USAGE_MAX_AGE, 1 << 40), Ok(()));
        assert_eq!(sums.get(), 2);
    }
}
