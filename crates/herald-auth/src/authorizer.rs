//! The authorizer: Kafka's rules over an index of the ACLs, swapped whole
//! when they change, and a per-connection cache of its answers, dropped
//! when they change. A request's check is then a hash lookup, never a scan
//! of all ACLs.
//!
//! The rules (Kafka's `StandardAuthorizer`): a super user may do anything.
//! Otherwise the bindings that apply to the resource (literal name, the
//! `*` wildcard, and every prefix of the name) and to the caller (its
//! principal or `User:*`, its host or `*`) decide: a DENY of the operation
//! (or of ALL) wins; else an ALLOW of it (or of ALL, or, for DESCRIBE, of
//! READ, WRITE, DELETE or ALTER, and for DESCRIBE_CONFIGS, of
//! ALTER_CONFIGS) allows. A resource no binding applies to is allowed to
//! everyone only if `allow_everyone_if_no_acl_found`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use crate::acl::{WILDCARD, WILDCARD_PRINCIPAL};

/// Most answers a connection keeps; past it the cache starts over.
const CACHE_ENTRIES_MAX: usize = 4096;

/// The ACLs, indexed by what a check looks up.
#[derive(Debug, Default)]
pub struct AclIndex {
    bindings: Vec<AclBinding>,
    /// Literal bindings (the wildcard `*` among them) by type and name.
    literal: HashMap<ResourceType, HashMap<String, Vec<usize>>>,
    /// Prefixed bindings by type and prefix.
    prefixed: HashMap<ResourceType, HashMap<String, Vec<usize>>>,
    /// The distinct lengths of each type's prefixes, ascending: a check
    /// looks up only prefixes of the name of these lengths.
    prefix_lengths: HashMap<ResourceType, Vec<usize>>,
}

impl AclIndex {
    fn new(bindings: impl IntoIterator<Item = AclBinding>) -> Self {
        let bindings: Vec<AclBinding> = bindings
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut index = Self {
            bindings,
            ..Self::default()
        };
        let mut lengths: HashMap<ResourceType, BTreeSet<usize>> = HashMap::new();
        for (i, b) in index.bindings.iter().enumerate() {
            let by_name = match b.pattern_type {
                PatternType::Literal => index.literal.entry(b.resource_type).or_default(),
                PatternType::Prefixed => {
                    lengths
                        .entry(b.resource_type)
                        .or_default()
                        .insert(b.name.len());
                    index.prefixed.entry(b.resource_type).or_default()
                }
                PatternType::Any | PatternType::Match => continue,
            };
            by_name.entry(b.name.clone()).or_default().push(i);
        }
        index.prefix_lengths = lengths
            .into_iter()
            .map(|(t, l)| (t, l.into_iter().collect()))
            .collect();
        index
    }

    /// Every binding, in a stable order.
    pub fn bindings(&self) -> &[AclBinding] {
        &self.bindings
    }

    /// The bindings that apply to `name` of `resource_type`.
    fn applying<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literals = self.literal.get(&resource_type);
        let literal = [name, WILDCARD]
            .into_iter()
            // `*` itself is looked up once.
            .take(if name == WILDCARD { 1 } else { 2 })
            .filter_map(move |n| literals.and_then(|l| l.get(n)));
        let prefixes = self.prefixed.get(&resource_type);
        let prefixed = self
            .prefix_lengths
            .get(&resource_type)
            .into_iter()
            .flatten()
            .filter(move |&&len| len <= name.len() && name.is_char_boundary(len))
            .filter_map(move |&len| prefixes.and_then(|p| p.get(&name[..len])));
        literal
            .chain(prefixed)
            .flatten()
            .map(|&i| &self.bindings[i])
    }
}

/// Who is asking: a principal (`User:alice`) from a host (an IP address).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller {
    /// `Type:name`.
    pub principal: String,
    /// The client's IP address, as text.
    pub host: String,
}

/// Kafka's rules over the current ACLs.
#[derive(Debug)]
pub struct Authorizer {
    index: ArcSwap<AclIndex>,
    /// Raised by every change: caches from before it start over.
    generation: AtomicU64,
    super_users: HashSet<String>,
    allow_everyone_if_no_acl_found: bool,
}

impl Authorizer {
    /// An authorizer with no ACLs, the given super users (`User:admin`)
    /// and Kafka's `allow.everyone.if.no.acl.found`.
    pub fn new(
        super_users: impl IntoIterator<Item = String>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Self {
        Self {
            index: ArcSwap::from_pointee(AclIndex::default()),
            generation: AtomicU64::new(0),
            super_users: super_users.into_iter().collect(),
            allow_everyone_if_no_acl_found,
        }
    }

    /// Replaces the ACLs with `bindings` (the whole set).
    pub fn replace(&self, bindings: impl IntoIterator<Item = AclBinding>) {
        self.index.store(Arc::new(AclIndex::new(bindings)));
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The ACLs now.
    pub fn index(&self) -> Arc<AclIndex> {
        self.index.load_full()
    }

    /// True if `principal` is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Decides, without a cache.
    pub fn authorize(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(&caller.principal) {
            return true;
        }
        let index = self.index.load();
        let mut any_applies = false;
        let mut allowed = false;
        for binding in index.applying(resource_type, name) {
            any_applies = true;
            let principal_ok =
                binding.principal == caller.principal || binding.principal == WILDCARD_PRINCIPAL;
            let host_ok = binding.host == caller.host || binding.host == WILDCARD;
            if !principal_ok || !host_ok {
                continue;
            }
            match binding.permission {
                Permission::Deny => {
                    if binding.operation == operation || binding.operation == Operation::All {
                        return false;
                    }
                }
                Permission::Allow => allowed |= allows(binding.operation, operation),
                Permission::Any => {}
            }
        }
        allowed || (!any_applies && self.allow_everyone_if_no_acl_found)
    }

    /// True if the caller may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`: an idempotent
    /// producer needs WRITE on some topic). An ALLOW counts unless a DENY
    /// of the same reach takes it back: one on every name (`*`), on the
    /// same literal name, or on a prefix of the allowed name or prefix.
    pub fn authorize_any(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.is_super_user(&caller.principal) {
            return true;
        }
        let index = self.index.load();
        let mine = |b: &&AclBinding| {
            b.resource_type == resource_type
                && (b.principal == caller.principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == caller.host || b.host == WILDCARD)
        };
        let denies: Vec<&AclBinding> = index
            .bindings
            .iter()
            .filter(mine)
            .filter(|b| {
                b.permission == Permission::Deny
                    && (b.operation == operation || b.operation == Operation::All)
            })
            .collect();
        let taken_back = |allow: &AclBinding| {
            denies.iter().any(|deny| match deny.pattern_type {
                PatternType::Literal => {
                    deny.name == WILDCARD
                        || (allow.pattern_type == PatternType::Literal && deny.name == allow.name)
                }
                PatternType::Prefixed => allow.name.starts_with(&deny.name),
                PatternType::Any | PatternType::Match => false,
            })
        };
        let any_allowed = index
            .bindings
            .iter()
            .filter(mine)
            .filter(|b| b.permission == Permission::Allow && allows(b.operation, operation))
            .any(|allow| !taken_back(allow));
        any_allowed
            || (self.allow_everyone_if_no_acl_found
                && !index
                    .bindings
                    .iter()
                    .any(|b| b.resource_type == resource_type))
    }

    /// Decides through `cache`, the caller's answers so far.
    pub fn authorize_cached(
        &self,
        cache: &mut DecisionCache,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if cache.generation != generation || cache.entries >= CACHE_ENTRIES_MAX {
            cache.decisions.clear();
            cache.entries = 0;
            cache.generation = generation;
        }
        let by_kind = cache
            .decisions
            .entry((operation, resource_type))
            .or_default();
        if let Some(&decision) = by_kind.get(name) {
            return decision;
        }
        let decision = self.authorize(&cache.caller, operation, resource_type, name);
        by_kind.insert(name.into(), decision);
        cache.entries += 1;
        decision
    }
}

/// True if an ALLOW of `granted` allows `asked`.
fn allows(granted: Operation, asked: Operation) -> bool {
    use Operation::*;
    granted == All
        || granted == asked
        || (asked == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (asked == DescribeConfigs && granted == AlterConfigs)
}

/// One connection's answers, valid while the ACLs do not change.
#[derive(Debug)]
pub struct DecisionCache {
    caller: Caller,
    generation: u64,
    decisions: HashMap<(Operation, ResourceType), HashMap<Box<str>, bool>>,
    entries: usize,
}

impl DecisionCache {
    /// An empty cache for `caller`.
    pub fn new(caller: Caller) -> Self {
        Self {
            caller,
            generation: u64::MAX,
            decisions: HashMap::new(),
            entries: 0,
        }
    }

    /// Whose answers these are.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::{AclBinding, CLUSTER_NAME};
    use proptest::prelude::*;
    use Operation::*;
    use ResourceType::*;

    use crate::acl::tests::binding as acl;

    fn caller(principal: &str) -> Caller {
        Caller {
            principal: principal.into(),
            host: "127.0.0.1".into(),
        }
    }

    #[test]
    fn kafkas_rules() {
        let authorizer = Authorizer::new(["User:admin".to_owned()], false);
        authorizer.replace([
            acl(
                Topic,
                "orders",
                PatternType::Literal,
                "User:alice",
                Read,
                Permission::Allow,
            ),
            acl(
                Topic,
                "pay",
                PatternType::Prefixed,
                "User:alice",
                Write,
                Permission::Allow,
            ),
            acl(
                Topic,
                "payroll",
                PatternType::Literal,
                "User:alice",
                Write,
                Permission::Deny,
            ),
            acl(
                Topic,
                "*",
                PatternType::Literal,
                "User:*",
                Describe,
                Permission::Allow,
            ),
            acl(
                Group,
                "g",
                PatternType::Prefixed,
                "User:bob",
                All,
                Permission::Allow,
            ),
            acl(
                Topic,
                "cfg",
                PatternType::Literal,
                "User:bob",
                AlterConfigs,
                Permission::Allow,
            ),
            acl(
                Cluster,
                CLUSTER_NAME,
                PatternType::Literal,
                "User:bob",
                Create,
                Permission::Allow,
            ),
        ]);
        let (alice, bob, eve, admin) = (
            caller("User:alice"),
            caller("User:bob"),
            caller("User:eve"),
            caller("User:admin"),
        );
        let can = |c: &Caller, op, t, n: &str| authorizer.authorize(c, op, t, n);
        assert!(can(&alice, Read, Topic, "orders"));
        assert!(!can(&alice, Write, Topic, "orders"), "read is not write");
        assert!(
            can(&alice, Describe, Topic, "orders"),
            "read implies describe"
        );
        assert!(can(&alice, Write, Topic, "payments"), "prefix");
        assert!(
            !can(&alice, Write, Topic, "payroll"),
            "deny wins over allow"
        );
        assert!(
            can(&alice, Describe, Topic, "payroll"),
            "a deny of write is not of describe"
        );
        assert!(
            can(&eve, Describe, Topic, "anything"),
            "wildcard name and principal"
        );
        assert!(!can(&eve, Read, Topic, "anything"));
        assert!(can(&bob, Read, Group, "g1"), "ALL");
        assert!(!can(&bob, Read, Group, "h1"));
        assert!(
            can(&bob, DescribeConfigs, Topic, "cfg"),
            "alter configs implies describe configs"
        );
        assert!(can(&bob, Create, Cluster, CLUSTER_NAME));
        assert!(!can(&alice, Create, Cluster, CLUSTER_NAME));
        assert!(can(&admin, Delete, Topic, "orders"), "super user");
        assert!(
            !can(&eve, Read, Group, "nobody's"),
            "no ACL: denied by default"
        );
        let open = Authorizer::new(Vec::new(), true);
        open.replace([acl(
            Topic,
            "t",
            PatternType::Literal,
            "User:alice",
            Read,
            Permission::Allow,
        )]);
        assert!(
            open.authorize(&eve, Read, Group, "x"),
            "no ACL, and allowed if none"
        );
        assert!(
            !open.authorize(&eve, Read, Topic, "t"),
            "an ACL applies: not everyone"
        );
    }

    #[test]
    fn some_resource_of_a_type() {
        let authorizer = Authorizer::new(Vec::new(), false);
        let a = caller("User:a");
        assert!(!authorizer.authorize_any(&a, Write, Topic));
        authorizer.replace([acl(
            Topic,
            "t",
            PatternType::Prefixed,
            "User:a",
            Write,
            Permission::Allow,
        )]);
        assert!(authorizer.authorize_any(&a, Write, Topic));
        assert!(!authorizer.authorize_any(&a, Write, Group));
        authorizer.replace([
            acl(
                Topic,
                "t",
                PatternType::Prefixed,
                "User:a",
                Write,
                Permission::Allow,
            ),
            acl(
                Topic,
                "",
                PatternType::Prefixed,
                "User:*",
                All,
                Permission::Deny,
            ),
        ]);
        assert!(
            !authorizer.authorize_any(&a, Write, Topic),
            "denied everywhere"
        );
        authorizer.replace([
            acl(
                Topic,
                "t",
                PatternType::Prefixed,
                "User:a",
                Write,
                Permission::Allow,
            ),
            acl(
                Topic,
                "u",
                PatternType::Prefixed,
                "User:a",
                Write,
                Permission::Deny,
            ),
        ]);
        assert!(
            authorizer.authorize_any(&a, Write, Topic),
            "denied elsewhere only"
        );
    }

    #[test]
    fn hosts_are_matched() {
        let authorizer = Authorizer::new(Vec::new(), false);
        let mut from_one = acl(
            Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        );
        from_one.host = "10.0.0.1".into();
        authorizer.replace([from_one]);
        let mut a = caller("User:a");
        assert!(!authorizer.authorize(&a, Read, Topic, "t"));
        a.host = "10.0.0.1".into();
        assert!(authorizer.authorize(&a, Read, Topic, "t"));
    }

    #[test]
    fn a_cached_answer_changes_with_the_acls() {
        let authorizer = Authorizer::new(Vec::new(), false);
        let mut cache = DecisionCache::new(caller("User:a"));
        assert!(!authorizer.authorize_cached(&mut cache, Read, Topic, "t"));
        authorizer.replace([acl(
            Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            Permission::Allow,
        )]);
        assert!(authorizer.authorize_cached(&mut cache, Read, Topic, "t"));
        assert!(authorizer.authorize_cached(&mut cache, Read, Topic, "t"));
        authorizer.replace(Vec::new());
        assert!(!authorizer.authorize_cached(&mut cache, Read, Topic, "t"));
    }

    #[test]
    fn prefixes_respect_character_boundaries() {
        let authorizer = Authorizer::new(Vec::new(), false);
        authorizer.replace([acl(
            Topic,
            "é",
            PatternType::Prefixed,
            "User:a",
            Read,
            Permission::Allow,
        )]);
        let a = caller("User:a");
        assert!(authorizer.authorize(&a, Read, Topic, "été"));
        assert!(!authorizer.authorize(&a, Read, Topic, "e"));
        assert!(!authorizer.authorize(&a, Read, Topic, "€"));
    }

    fn arb_acl() -> impl Strategy<Value = AclBinding> {
        (
            prop_oneof![Just(Topic), Just(Group)],
            prop_oneof![Just("*".to_owned()), "[ab]{1,3}"],
            prop_oneof![Just(PatternType::Literal), Just(PatternType::Prefixed)],
            prop_oneof![
                Just("User:a".to_owned()),
                Just("User:b".to_owned()),
                Just("User:*".to_owned())
            ],
            prop_oneof![Just(Read), Just(Write), Just(Describe), Just(All)],
            prop_oneof![Just(Permission::Allow), Just(Permission::Deny)],
        )
            .prop_map(|(t, n, p, who, op, perm)| acl(t, &n, p, &who, op, perm))
    }

    /// The rules applied to every binding, one by one: what the index must
    /// agree with.
    fn by_scan(
        bindings: &[AclBinding],
        c: &Caller,
        op: Operation,
        t: ResourceType,
        name: &str,
    ) -> bool {
        let applying: Vec<_> = bindings
            .iter()
            .filter(|b| b.resource_type == t && b.applies_to(name))
            .filter(|b| b.principal == c.principal || b.principal == "User:*")
            .collect();
        let denied = applying
            .iter()
            .any(|b| b.permission == Permission::Deny && (b.operation == op || b.operation == All));
        !denied
            && applying
                .iter()
                .any(|b| b.permission == Permission::Allow && allows(b.operation, op))
    }

    proptest! {
        #[test]
        fn the_index_decides_as_a_scan_of_every_acl(
            bindings in proptest::collection::vec(arb_acl(), 0..24),
            who in prop_oneof![Just("User:a"), Just("User:b"), Just("User:c")],
            op in prop_oneof![Just(Read), Just(Write), Just(Describe), Just(Delete)],
            t in prop_oneof![Just(Topic), Just(Group)],
            name in "[ab*]{1,4}",
        ) {
            let authorizer = Authorizer::new(Vec::new(), false);
            authorizer.replace(bindings.clone());
            let c = caller(who);
            prop_assert_eq!(authorizer.authorize(&c, op, t, &name), by_scan(&bindings, &c, op, t, &name));
        }
    }
}
