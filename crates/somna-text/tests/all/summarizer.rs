//! Acceptance of the builtin extractive summarizer on the 200-turn fixture, against expectations written
//! by hand (tests/fixtures/transcript_200.expect.json).
//!
//! Caps: the defaults (topic arc 400, decisions 300, pending 300, user facts 300, artifacts 200) and a
//! 1500-token total, tokens counted as len/4. Under them every expectation is kept.

use somna_core::config::SectionCaps;
use somna_testkit::fixtures::ExpectedItem;
use somna_testkit::{transcript_200, transcript_200_expect};
use somna_text::cite;
use somna_text::estimate_tokens;
use somna_text::extractive::{Section, StructuredSummary, summarize};
use somna_text::transcript::{self, Turn};

const MAX_TOKENS: u32 = 1500;

fn fixture_turns() -> Vec<Turn> {
    transcript_200().unwrap().iter().map(Turn::from).collect()
}

fn summary() -> StructuredSummary {
    summarize(
        &fixture_turns(),
        &SectionCaps::default(),
        MAX_TOKENS,
        &estimate_tokens,
    )
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

#[test]
fn keeps_every_recurring_entity() {
    let expect = transcript_200_expect().unwrap();
    let rendered = summary().render();
    let missing: Vec<&String> = expect
        .entities
        .iter()
        .filter(|e| !contains(&rendered, e))
        .collect();
    assert!(
        missing.is_empty(),
        "missing entities {missing:?} in\n{rendered}"
    );
}

/// Asserts that the summary's `section` keeps every one of `items` (`what` says what they are).
fn assert_keeps(s: &StructuredSummary, section: Section, items: &[ExpectedItem], what: &str) {
    let body = s.section_body(section);
    for item in items {
        assert!(
            contains(&body, &item.key),
            "{what} of turn {} ({}) missing from\n{body}",
            item.turn,
            item.what
        );
    }
}

#[test]
fn keeps_every_decision_in_decisions() {
    let expect = transcript_200_expect().unwrap();
    assert_keeps(
        &summary(),
        Section::Decisions,
        &expect.decisions,
        "decision",
    );
}

#[test]
fn keeps_every_pending_task_in_pending() {
    let expect = transcript_200_expect().unwrap();
    assert_keeps(
        &summary(),
        Section::Pending,
        &expect.pending,
        "pending task",
    );
}

#[test]
fn keeps_user_facts_and_artifacts() {
    let expect = transcript_200_expect().unwrap();
    let s = summary();
    assert_keeps(&s, Section::UserFacts, &expect.user_facts, "user fact");
    let artifacts = s.section_body(Section::Artifacts);
    for a in &expect.artifacts {
        assert!(
            contains(&artifacts, a),
            "artifact {a} missing from\n{artifacts}"
        );
    }
}

#[test]
fn sections_and_total_stay_within_caps() {
    let caps = SectionCaps::default();
    let s = summary();
    for section in Section::ALL {
        let tokens = estimate_tokens(&cite::strip_all(&s.section_body(section)));
        assert!(
            tokens <= section.cap(&caps),
            "{section:?}: {tokens} > {}",
            section.cap(&caps)
        );
        assert!(!s.items(section).is_empty(), "{section:?} is empty");
    }
    let total = estimate_tokens(&cite::strip_all(&s.render()));
    assert!(total <= MAX_TOKENS, "total {total} > {MAX_TOKENS}");
}

#[test]
fn is_deterministic_and_the_same_through_a_framed_transcript() {
    let direct = summary();
    assert_eq!(direct, summary());
    let framed = transcript::frame(&transcript_200().unwrap());
    let parsed = transcript::parse(&framed);
    let via_frame = summarize(
        &parsed,
        &SectionCaps::default(),
        MAX_TOKENS,
        &estimate_tokens,
    );
    assert_eq!(direct, via_frame);
}

#[test]
fn rendered_summary_snapshot() {
    let s = summary();
    let caps = SectionCaps::default();
    let mut report = String::new();
    for section in Section::ALL {
        report.push_str(&format!(
            "{}: {} items, {} / {} tokens\n",
            section.title(),
            s.items(section).len(),
            estimate_tokens(&cite::strip_all(&s.section_body(section))),
            section.cap(&caps)
        ));
    }
    report.push_str(&format!(
        "total: {} / {MAX_TOKENS} tokens\n\n",
        estimate_tokens(&cite::strip_all(&s.render()))
    ));
    report.push_str(&s.render());
    insta::assert_snapshot!(report);
}

#[test]
fn rolling_summary_folds_the_first_half_into_the_second() {
    let turns = fixture_turns();
    let (first, second) = turns.split_at(100);
    let caps = SectionCaps::default();
    let earlier = summarize(first, &caps, MAX_TOKENS, &estimate_tokens);
    let mut rolled = vec![Turn::new(
        0,
        somna_core::Role::Assistant,
        format!("[CONTEXT SUMMARY]\n{}", earlier.render()),
    )];
    rolled.extend_from_slice(second);
    let s = summarize(&rolled, &caps, MAX_TOKENS, &estimate_tokens);
    // Decisions from the first half survive through the earlier summary, the second half's are added.
    let decisions = s.section_body(Section::Decisions);
    for key in [
        "14th of Brightmoon",
        "next to the well",
        "30 sacks of rye flour",
        "naming the bakery the Copper Kettle",
    ] {
        assert!(contains(&decisions, key), "{key} missing from\n{decisions}");
    }
    let facts = s.section_body(Section::UserFacts);
    assert!(contains(&facts, "allergic to walnuts"), "{facts}");
    assert!(contains(&facts, "daughter"), "{facts}");
    for section in Section::ALL {
        assert!(
            estimate_tokens(&cite::strip_all(&s.section_body(section))) <= section.cap(&caps),
            "{section:?}"
        );
    }
    assert!(estimate_tokens(&cite::strip_all(&s.render())) <= MAX_TOKENS);
}
