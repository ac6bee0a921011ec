//! Request body layouts for the guard walker, one per served API (named by
//! its row in `crate::registry`),
//! transcribed from the Kafka message definitions (the same ones
//! `kafka-protocol` is generated from). The `schemas_match_kafka_protocol`
//! test encodes populated requests with `kafka-protocol` at every supported
//! version and checks that the walker consumes exactly their bytes.

use super::guard::Ty::*;
use super::guard::{all, between, since, tagged, Field, Schema};

const METADATA_TOPIC: &[Field] = &[since(10, Uuid), all(Str)];
pub(crate) const METADATA: Schema = Schema {
    flexible_from: 9,
    fields: &[
        all(Array(METADATA_TOPIC)),
        since(4, Bool),
        between(8, 10, Bool),
        since(8, Bool),
    ],
};

const PRODUCE_PARTITION: &[Field] = &[all(I32), all(Bytes)];
const PRODUCE_TOPIC: &[Field] = &[
    between(0, 12, Str),
    since(13, Uuid),
    all(Array(PRODUCE_PARTITION)),
];
pub(crate) const PRODUCE: Schema = Schema {
    flexible_from: 9,
    fields: &[all(Str), all(I16), all(I32), all(Array(PRODUCE_TOPIC))],
};

const FETCH_PARTITION: &[Field] = &[
    all(I32),
    since(9, I32),
    all(I64),
    since(12, I32),
    since(5, I64),
    all(I32),
    tagged(0, 17, Uuid),
    tagged(1, 18, I64),
];
const REPLICA_STATE: &[Field] = &[since(15, I32), since(15, I64)];
const FETCH_TOPIC: &[Field] = &[
    between(0, 12, Str),
    since(13, Uuid),
    all(Array(FETCH_PARTITION)),
];
const FORGOTTEN_TOPIC: &[Field] = &[between(7, 12, Str), since(13, Uuid), since(7, I32Array)];
pub(crate) const FETCH: Schema = Schema {
    flexible_from: 12,
    fields: &[
        between(0, 14, I32),
        all(I32),
        all(I32),
        all(I32),
        all(I8),
        since(7, I32),
        since(7, I32),
        all(Array(FETCH_TOPIC)),
        since(7, Array(FORGOTTEN_TOPIC)),
        since(11, Str),
        tagged(0, 12, Str),
        tagged(1, 15, Struct(REPLICA_STATE)),
    ],
};

const LIST_OFFSETS_PARTITION: &[Field] = &[all(I32), since(4, I32), all(I64)];
const LIST_OFFSETS_TOPIC: &[Field] = &[all(Str), all(Array(LIST_OFFSETS_PARTITION))];
pub(crate) const LIST_OFFSETS: Schema = Schema {
    flexible_from: 6,
    fields: &[
        all(I32),
        since(2, I8),
        all(Array(LIST_OFFSETS_TOPIC)),
        since(10, I32),
    ],
};

pub(crate) const API_VERSIONS: Schema = Schema {
    flexible_from: 3,
    fields: &[since(3, Str), since(3, Str)],
};

pub(crate) const INIT_PRODUCER_ID: Schema = Schema {
    flexible_from: 2,
    fields: &[all(Str), all(I32), since(3, I64), since(3, I16)],
};

const CREATABLE_ASSIGNMENT: &[Field] = &[all(I32), all(I32Array)];
const CREATABLE_CONFIG: &[Field] = &[all(Str), all(Str)];
const CREATABLE_TOPIC: &[Field] = &[
    all(Str),
    all(I32),
    all(I16),
    all(Array(CREATABLE_ASSIGNMENT)),
    all(Array(CREATABLE_CONFIG)),
];
pub(crate) const CREATE_TOPICS: Schema = Schema {
    flexible_from: 5,
    fields: &[all(Array(CREATABLE_TOPIC)), all(I32), all(Bool)],
};

const DELETE_TOPIC_STATE: &[Field] = &[all(Str), all(Uuid)];
pub(crate) const DELETE_TOPICS: Schema = Schema {
    flexible_from: 4,
    fields: &[
        since(6, Array(DELETE_TOPIC_STATE)),
        between(0, 5, StrArray),
        all(I32),
    ],
};

const PARTITIONS_ASSIGNMENT: &[Field] = &[all(I32Array)];
const PARTITIONS_TOPIC: &[Field] = &[all(Str), all(I32), all(Array(PARTITIONS_ASSIGNMENT))];
pub(crate) const CREATE_PARTITIONS: Schema = Schema {
    flexible_from: 2,
    fields: &[all(Array(PARTITIONS_TOPIC)), all(I32), all(Bool)],
};

const DESCRIBE_CONFIGS_RESOURCE: &[Field] = &[all(I8), all(Str), all(StrArray)];
pub(crate) const DESCRIBE_CONFIGS: Schema = Schema {
    flexible_from: 4,
    fields: &[
        all(Array(DESCRIBE_CONFIGS_RESOURCE)),
        all(Bool),
        since(3, Bool),
    ],
};

const ALTERABLE_CONFIG: &[Field] = &[all(Str), all(Str)];
const ALTER_CONFIGS_RESOURCE: &[Field] = &[all(I8), all(Str), all(Array(ALTERABLE_CONFIG))];
pub(crate) const ALTER_CONFIGS: Schema = Schema {
    flexible_from: 2,
    fields: &[all(Array(ALTER_CONFIGS_RESOURCE)), all(Bool)],
};

const INCREMENTAL_CONFIG: &[Field] = &[all(Str), all(I8), all(Str)];
const INCREMENTAL_RESOURCE: &[Field] = &[all(I8), all(Str), all(Array(INCREMENTAL_CONFIG))];
pub(crate) const INCREMENTAL_ALTER_CONFIGS: Schema = Schema {
    flexible_from: 1,
    fields: &[all(Array(INCREMENTAL_RESOURCE)), all(Bool)],
};

pub(crate) const DESCRIBE_CLUSTER: Schema = Schema {
    flexible_from: 0,
    fields: &[all(Bool), since(1, I8), since(2, Bool)],
};

pub(crate) const FIND_COORDINATOR: Schema = Schema {
    flexible_from: 3,
    fields: &[between(0, 3, Str), since(1, I8), since(4, StrArray)],
};

const JOIN_GROUP_PROTOCOL: &[Field] = &[all(Str), all(Bytes)];
pub(crate) const JOIN_GROUP: Schema = Schema {
    flexible_from: 6,
    fields: &[
        all(Str),
        all(I32),
        since(1, I32),
        all(Str),
        since(5, Str),
        all(Str),
        all(Array(JOIN_GROUP_PROTOCOL)),
        since(8, Str),
    ],
};

const SYNC_GROUP_ASSIGNMENT: &[Field] = &[all(Str), all(Bytes)];
pub(crate) const SYNC_GROUP: Schema = Schema {
    flexible_from: 4,
    fields: &[
        all(Str),
        all(I32),
        all(Str),
        since(3, Str),
        since(5, Str),
        since(5, Str),
        all(Array(SYNC_GROUP_ASSIGNMENT)),
    ],
};

pub(crate) const HEARTBEAT: Schema = Schema {
    flexible_from: 4,
    fields: &[all(Str), all(I32), all(Str), since(3, Str)],
};

// Present from v3, the version that introduced the member list.
const LEAVE_GROUP_MEMBER: &[Field] = &[all(Str), all(Str), since(5, Str)];
pub(crate) const LEAVE_GROUP: Schema = Schema {
    flexible_from: 4,
    fields: &[
        all(Str),
        between(0, 2, Str),
        since(3, Array(LEAVE_GROUP_MEMBER)),
    ],
};

const OFFSET_COMMIT_PARTITION: &[Field] = &[all(I32), all(I64), since(6, I32), all(Str)];
const OFFSET_COMMIT_TOPIC: &[Field] = &[all(Str), all(Array(OFFSET_COMMIT_PARTITION))];
pub(crate) const OFFSET_COMMIT: Schema = Schema {
    flexible_from: 8,
    fields: &[
        all(Str),
        all(I32),
        all(Str),
        since(7, Str),
        between(2, 4, I64),
        all(Array(OFFSET_COMMIT_TOPIC)),
    ],
};

const OFFSET_FETCH_TOPIC: &[Field] = &[all(Str), all(I32Array)];
const OFFSET_FETCH_GROUP: &[Field] = &[
    all(Str),
    since(9, Str),
    since(9, I32),
    all(Array(OFFSET_FETCH_TOPIC)),
];
pub(crate) const OFFSET_FETCH: Schema = Schema {
    flexible_from: 6,
    fields: &[
        between(0, 7, Str),
        between(0, 7, Array(OFFSET_FETCH_TOPIC)),
        since(8, Array(OFFSET_FETCH_GROUP)),
        since(7, Bool),
    ],
};

pub(crate) const LIST_GROUPS: Schema = Schema {
    flexible_from: 3,
    fields: &[since(4, StrArray), since(5, StrArray)],
};

pub(crate) const DESCRIBE_GROUPS: Schema = Schema {
    flexible_from: 5,
    fields: &[all(StrArray), since(3, Bool)],
};

pub(crate) const DELETE_GROUPS: Schema = Schema {
    flexible_from: 2,
    fields: &[all(StrArray)],
};

const OFFSET_DELETE_PARTITION: &[Field] = &[all(I32)];
const OFFSET_DELETE_TOPIC: &[Field] = &[all(Str), all(Array(OFFSET_DELETE_PARTITION))];
pub(crate) const OFFSET_DELETE: Schema = Schema {
    // OffsetDelete has no flexible version.
    flexible_from: i16::MAX,
    fields: &[all(Str), all(Array(OFFSET_DELETE_TOPIC))],
};

const DELETE_RECORDS_PARTITION: &[Field] = &[all(I32), all(I64)];
const DELETE_RECORDS_TOPIC: &[Field] = &[all(Str), all(Array(DELETE_RECORDS_PARTITION))];
pub(crate) const DELETE_RECORDS: Schema = Schema {
    flexible_from: 2,
    fields: &[all(Array(DELETE_RECORDS_TOPIC)), all(I32)],
};
