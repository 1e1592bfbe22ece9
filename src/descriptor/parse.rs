//! Typed extraction of a descriptor from strict JSON. (Being implemented.)

use super::Descriptor;
use crate::finding::Finding;
use uuid::Uuid;

/// Identity fields recovered best-effort, each only if it is individually
/// valid, so a broken descriptor can still be attributed to its group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ident {
    pub engine_id: Option<String>,
    pub incarnation: Option<Uuid>,
    pub epoch: Option<u64>,
    pub rank: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct ParseOutcome {
    /// Present when the file is well-formed JSON and schema-valid (a KV008
    /// digest mismatch may still be among `findings`).
    pub descriptor: Option<Descriptor>,
    pub ident: Ident,
    /// KV006 / KV007 / KV008 findings, without a path (the caller adds it).
    pub findings: Vec<Finding>,
}

pub fn parse_descriptor(_bytes: &[u8]) -> ParseOutcome {
    todo!("being implemented")
}
