//! The agent record as the store writes it: [`AgentRecord`]'s fields by name, as [`encode`]
//! writes any value, but with the fields still at their defaults left out — no run-time
//! overrides, no compaction yet, no calibration learned, no grounding counted. A record is
//! rewritten by every append (its counters move), so its size is paid on each turn twice: a
//! fresh record took 771 bytes, most of them the names of its ~40 unset override fields, beside
//! messages of 100–300. It reads back as before: every field left out has `#[serde(default)]` on
//! `AgentRecord`, and a record written whole (by an earlier build) reads the same. What the API
//! and `--json` show is `AgentRecord`'s own serialization, unchanged.

use serde::Serialize;
use somna_core::config::AgentOverrides;
use somna_core::record::{AgentRecord, Cover, GroundingCounts};
use somna_core::tokens::Calibration;
use somna_core::{AgentId, Timestamp};

use super::encode;
use crate::error::Result;

/// [`AgentRecord`] by reference, the fields at their defaults skipped.
#[derive(Serialize)]
struct Stored<'a> {
    id: &'a AgentId,
    created_at: Timestamp,
    #[serde(skip_serializing_if = "no_overrides")]
    overrides: &'a AgentOverrides,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_compaction: Option<Timestamp>,
    #[serde(skip_serializing_if = "is_default")]
    compaction_count: u32,
    #[serde(skip_serializing_if = "is_default")]
    calibration: Calibration,
    next_seq: u64,
    next_entry_id: u64,
    next_fact_id: u64,
    next_event_seq: u64,
    history_tokens: u64,
    history_len: u64,
    archive_len: u64,
    #[serde(skip_serializing_if = "is_default")]
    retired: bool,
    #[serde(skip_serializing_if = "<[Cover]>::is_empty")]
    covers: &'a [Cover],
    #[serde(skip_serializing_if = "is_default")]
    grounding: GroundingCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_sleep_at: Option<Timestamp>,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Equal to no overrides at all, not `AgentOverrides::is_empty` (which lists the fields it sets):
/// only a value equal to the default is sure to read back as it was.
fn no_overrides(overrides: &&AgentOverrides) -> bool {
    is_default(*overrides)
}

/// Encodes `record` for the `agents` tree (see the module docs).
pub(crate) fn encode_record(tree: &'static str, record: &AgentRecord) -> Result<Vec<u8>> {
    // Every field named, so that a field added to the record without one here fails to build.
    let AgentRecord {
        id,
        created_at,
        overrides,
        last_compaction,
        compaction_count,
        calibration,
        next_seq,
        next_entry_id,
        next_fact_id,
        next_event_seq,
        history_tokens,
        history_len,
        archive_len,
        retired,
        covers,
        grounding,
        next_sleep_at,
    } = record;
    encode(
        tree,
        &Stored {
            id,
            created_at: *created_at,
            overrides,
            last_compaction: *last_compaction,
            compaction_count: *compaction_count,
            calibration: *calibration,
            next_seq: *next_seq,
            next_entry_id: *next_entry_id,
            next_fact_id: *next_fact_id,
            next_event_seq: *next_event_seq,
            history_tokens: *history_tokens,
            history_len: *history_len,
            archive_len: *archive_len,
            retired: *retired,
            covers,
            grounding: *grounding,
            next_sleep_at: *next_sleep_at,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    fn fresh() -> AgentRecord {
        let mut r = AgentRecord::new(AgentId::new("smith").unwrap(), Timestamp(1_700_000_000_000));
        r.next_seq = 1_234;
        r.history_tokens = 56_789;
        r.history_len = 160;
        r
    }

    /// Every field the stored form may leave out, set one at a time to something other than its
    /// default: each record reads back equal, and the bare record is the small one.
    #[test]
    fn a_stored_record_reads_back_whole_and_a_fresh_one_is_small() {
        let mut variants = vec![fresh()];
        let mut r = fresh();
        r.overrides.model = Some("gpt-4o".into());
        r.overrides.compaction.sleep_threshold = Some(0.6);
        variants.push(r);
        let mut r = fresh();
        r.last_compaction = Some(Timestamp(5));
        r.compaction_count = 3;
        variants.push(r);
        let mut r = fresh();
        r.calibration.factor = 1.2;
        r.calibration.samples = 4;
        variants.push(r);
        let mut r = fresh();
        r.retired = true;
        r.covers.push(Cover {
            seq: 10,
            generation: 2,
            through: 40,
        });
        r.grounding.kept = 7;
        r.next_sleep_at = Some(Timestamp(9));
        variants.push(r);
        for record in &variants {
            let stored = encode_record("agents", record).unwrap();
            let back: AgentRecord = decode("agents", b"a", &stored).unwrap();
            assert_eq!(&back, record);
            // A record written whole, as earlier builds did, reads the same.
            let whole = encode("agents", record).unwrap();
            assert_eq!(
                &decode::<AgentRecord>("agents", b"a", &whole).unwrap(),
                record
            );
            assert!(stored.len() <= whole.len());
        }
        let (stored, whole) = (
            encode_record("agents", &variants[0]).unwrap().len(),
            encode("agents", &variants[0]).unwrap().len(),
        );
        assert!(
            stored * 3 < whole,
            "a fresh record: {stored} bytes stored, {whole} whole"
        );
    }
}
