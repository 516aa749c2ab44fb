//! `eval::recall` on a slice of the shipped recall dataset (datasets/recall/): every question is
//! accounted for, the numbers add up, no prompt is over budget, and Somna's recall stays above a
//! floor set a few points under what it measured when the floor was set — so a regression in
//! retrieval or prompt assembly fails here. Offline: the builtin provider.

use std::path::PathBuf;
use std::sync::Arc;

use somna_core::config::{EmbedderProvider, ResolvedConfig};
use somna_llm::{BuiltinEmbedder, build_client};
use somna_runtime::Semantic;
use somna_runtime::eval::{
    self, BASELINES, BM25_IN_ROOM, BM25_NEIGHBOURS, Dataset, RecallOptions, RecallReport, SOMNA,
    SOMNA_CONSOLIDATED, SOMNA_RETRIEVED,
};

/// The slice: the first 2 conversations, the first 30 questions of each.
const CONVERSATIONS: usize = 2;
const QUESTIONS: usize = 30;
/// Somna's floors on the slice at a 4,000-token window (measured when set: some 0.783, all 0.717,
/// i.e. 47 and 43 of 60; at issue 12: 0.767 and 0.700; before the index, neighbours, stems and the
/// budget: 0.533 and 0.467). Raise them when retrieval improves.
const SOME_FLOOR: f64 = 0.75;
const ALL_FLOOR: f64 = 0.68;

fn dataset() -> Dataset {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall");
    Dataset::load(&dir).unwrap()
}

fn config() -> ResolvedConfig {
    ResolvedConfig::load(
        "[defaults.compaction]\nmax_context_tokens = 4000\n",
        "recall-test.toml",
        &[],
    )
    .unwrap()
}

async fn run(options: RecallOptions) -> RecallReport {
    let config = config();
    let llm = build_client(&config.llm, &|_| None).unwrap();
    eval::recall(&dataset(), &config, llm, &options)
        .await
        .unwrap()
}

fn slice() -> RecallOptions {
    RecallOptions {
        limit_conversations: Some(CONVERSATIONS),
        limit_questions: Some(QUESTIONS),
        details: true,
        ..RecallOptions::default()
    }
}

#[tokio::test]
async fn recall_on_a_slice_accounts_for_every_question_and_keeps_its_floor() {
    let report = run(slice()).await;
    let asked = CONVERSATIONS * QUESTIONS;
    assert_eq!(report.conversations, CONVERSATIONS);
    assert_eq!(report.questions, asked);
    assert_eq!(report.imports.len(), CONVERSATIONS);
    assert!(
        report.imports.iter().all(|i| i.compactions > 0),
        "{:?}",
        report.imports
    );
    let names: Vec<&str> = report.methods.iter().map(|m| m.method.as_str()).collect();
    let all: Vec<&str> = [SOMNA].into_iter().chain(BASELINES).collect();
    assert_eq!(names, all);
    for m in &report.methods {
        let o = &m.overall;
        assert_eq!(o.questions, asked, "{}", m.method);
        assert!(
            o.all <= o.some && o.some <= o.questions,
            "{}: {o:?}",
            m.method
        );
        assert_eq!(
            o.over_budget, 0,
            "{}: a prompt over budget: {o:?}",
            m.method
        );
        assert!(o.tokens_max <= report.budget, "{}", m.method);
        let sum = |f: fn(&eval::Stats) -> usize| m.categories.values().map(f).sum::<usize>();
        assert_eq!(sum(|s| s.questions), o.questions, "{}", m.method);
        assert_eq!(sum(|s| s.some), o.some, "{}", m.method);
        assert_eq!(sum(|s| s.all), o.all, "{}", m.method);
        assert_eq!(sum(|s| s.over_budget), o.over_budget, "{}", m.method);
        for (c, s) in &m.categories {
            assert!(s.all <= s.some, "{} {c}: {s:?}", m.method);
        }
    }
    // Every question once per method in the details.
    assert_eq!(report.details.len(), all.len() * asked);
    // Somna's outcomes say where the answer ranks: a question whose answer the note holds as a
    // hit ranked it; only Somna's outcomes carry a rank.
    let ranked: Vec<&eval::QuestionOutcome> =
        report.details.iter().filter(|d| d.rank.is_some()).collect();
    assert!(!ranked.is_empty());
    assert!(ranked.iter().all(|d| d.method == SOMNA), "{ranked:?}");
    assert!(
        ranked.iter().all(|d| d.rank.is_some_and(|r| r >= 1)),
        "{ranked:?}"
    );
    assert!(
        ranked
            .iter()
            .any(|d| d.rank == Some(1) && !d.held.is_empty()),
        "{ranked:?}"
    );
    // The equal-room baseline never takes more room than Somna's working context had, and the
    // packed baselines fill the budget as far as whole turns allow.
    for d in report.details.iter().filter(|d| d.method == BM25_IN_ROOM) {
        let note = report
            .details
            .iter()
            .find(|n| {
                n.method == SOMNA_RETRIEVED
                    && n.conversation == d.conversation
                    && n.question == d.question
            })
            .unwrap();
        assert!(
            d.tokens <= note.tokens,
            "{d:?} took more room than {note:?}"
        );
    }
    let packed = &report.method(BM25_NEIGHBOURS).unwrap().overall;
    assert!(
        packed.tokens_mean * 10.0 > report.budget as f64 * 9.0,
        "{packed:?}"
    );
    let somna = &report.method(SOMNA).unwrap().overall;
    println!(
        "somna on the slice: some {:.3}, all {:.3}",
        somna.some_share, somna.all_share
    );
    assert!(
        somna.some_share >= SOME_FLOOR && somna.all_share >= ALL_FLOOR,
        "recall fell below its floor (some ≥ {SOME_FLOOR}, all ≥ {ALL_FLOOR}): {somna:?}"
    );
}

#[tokio::test]
async fn consolidation_adds_a_row_measured_on_the_same_questions() {
    let report = run(RecallOptions {
        baselines: false,
        consolidate: true,
        limit_conversations: Some(1),
        limit_questions: Some(10),
        details: false,
    })
    .await;
    let names: Vec<&str> = report.methods.iter().map(|m| m.method.as_str()).collect();
    assert_eq!(names, [SOMNA, SOMNA_CONSOLIDATED]);
    assert!(report.imports[0].facts > 0, "{:?}", report.imports);
    let after = &report.method(SOMNA_CONSOLIDATED).unwrap().overall;
    assert_eq!(after.questions, 10);
    assert_eq!(after.over_budget, 0);
    assert!(report.details.is_empty());
}

/// The held-out split (datasets/recall-heldout, never tuned on): on a slice at a 4,000-token
/// window, Somna's prompt holds at least as much evidence as BM25 + neighbours packed into the
/// whole budget, and its working context more than that baseline in the same room, and neither
/// falls below the floor set a few points under what was measured when it was set.
#[tokio::test]
async fn the_held_out_split_keeps_its_floor_and_the_packed_baseline() {
    let out = held_out_slice(None).await;
    assert!(
        out.somna.some_share >= HELD_OUT_SOME_FLOOR && out.somna.all_share >= HELD_OUT_ALL_FLOOR,
        "held-out recall fell below its floor: {:?}",
        out.somna
    );
    out.holds_at_least_the_packed_baseline();
    assert!(
        out.note.some > out.room.some,
        "somna-note {:?} vs bm25+nbrs@room {:?}",
        out.note,
        out.room
    );
}

/// The held-out slice with the default embedder (`[embedder] provider = "builtin"`, the static
/// table compiled in): its floor, the packed baseline, and the line at equal room — the
/// working context holds evidence for at least 5 points more questions than BM25 + neighbours in
/// the same room.
#[tokio::test]
async fn the_held_out_split_with_the_builtin_embedder_keeps_its_floor() {
    let config = config();
    assert_eq!(
        config.embedder.provider,
        EmbedderProvider::Builtin,
        "the default"
    );
    let semantic = Semantic::new(
        Arc::new(BuiltinEmbedder::shared().unwrap()),
        &config.embedder,
    );
    let out = held_out_slice(Some(semantic)).await;
    assert!(
        out.somna.some_share >= BUILTIN_HELD_OUT_SOME_FLOOR
            && out.somna.all_share >= BUILTIN_HELD_OUT_ALL_FLOOR,
        "held-out recall with the builtin embedder fell below its floor: {:?}",
        out.somna
    );
    out.holds_at_least_the_packed_baseline();
    assert!(
        out.note.some_share >= out.room.some_share + 0.05,
        "equal room: somna-note {:?} is not 5 points above bm25+nbrs@room {:?}",
        out.note,
        out.room
    );
    // What only meaning finds: questions in other words than their answer.
    assert!(
        out.paraphrase.some >= BUILTIN_HELD_OUT_PARAPHRASE_FLOOR,
        "paraphrase with the builtin embedder: {:?}",
        out.paraphrase
    );
}

/// What a held-out slice run measured: Somna's prompt, the packed baseline, Somna's note and the
/// baseline in the note's room, and Somna's paraphrase questions.
struct HeldOut {
    somna: eval::Stats,
    packed: eval::Stats,
    note: eval::Stats,
    room: eval::Stats,
    paraphrase: eval::Stats,
}

impl HeldOut {
    fn holds_at_least_the_packed_baseline(&self) {
        let (somna, packed) = (&self.somna, &self.packed);
        assert!(
            somna.some >= packed.some && somna.all >= packed.all,
            "the packed baseline holds more: somna {somna:?}, bm25+nbrs {packed:?}"
        );
    }
}

/// The held-out slice at a 4,000-token window, with `semantic` or BM25 alone.
async fn held_out_slice(semantic: Option<Semantic>) -> HeldOut {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall-heldout");
    let dataset = Dataset::load(&dir).unwrap();
    let config = config();
    let llm = build_client(&config.llm, &|_| None).unwrap();
    let options = RecallOptions {
        limit_conversations: Some(HELD_OUT_CONVERSATIONS),
        limit_questions: Some(HELD_OUT_QUESTIONS),
        ..RecallOptions::default()
    };
    let embedded = semantic.is_some();
    let report = eval::recall_with_progress(&dataset, &config, llm, semantic, &options, |_| {})
        .await
        .unwrap();
    assert_eq!(report.embedder.is_some(), embedded, "{:?}", report.embedder);
    let overall = |m: &str| report.method(m).unwrap().overall.clone();
    let out = HeldOut {
        somna: overall(SOMNA),
        packed: overall(BM25_NEIGHBOURS),
        note: overall(SOMNA_RETRIEVED),
        room: overall(BM25_IN_ROOM),
        paraphrase: report.method(SOMNA).unwrap().categories["paraphrase"].clone(),
    };
    println!(
        "held-out slice (embedder: {embedded}): somna {}/{} some/all, bm25+nbrs {}/{}, somna-note {} vs bm25+nbrs@room {}, paraphrase {}/{}",
        out.somna.some,
        out.somna.all,
        out.packed.some,
        out.packed.all,
        out.note.some,
        out.room.some,
        out.paraphrase.some,
        out.paraphrase.questions
    );
    out
}

/// Floors on the held-out slice with the builtin embedder (4,000-token window), a few points under
/// what was measured when they were set: 84 / 80 of 120 (0.700 / 0.667); somna-note 74 against
/// bm25+nbrs@room 60; with BM25 alone the same build held 82 / 79.
const BUILTIN_HELD_OUT_SOME_FLOOR: f64 = 0.66;
const BUILTIN_HELD_OUT_ALL_FLOOR: f64 = 0.63;
/// Paraphrase questions held on that slice: 7 of 23 when set; BM25 alone holds 4.
const BUILTIN_HELD_OUT_PARAPHRASE_FLOOR: usize = 6;

/// The held-out slice: the first 3 conversations, the first 40 questions of each.
const HELD_OUT_CONVERSATIONS: usize = 3;
const HELD_OUT_QUESTIONS: usize = 40;
/// Floors on the held-out slice (BM25, no embedder, 4,000-token window), a few points under
/// what was measured when they were set: 77 / 74 of 120 (0.642 / 0.617); bm25+nbrs 70 / 68.
const HELD_OUT_SOME_FLOOR: f64 = 0.60;
const HELD_OUT_ALL_FLOOR: f64 = 0.57;

/// The assistant split (datasets/recall-assistant: one user, one assistant, replies of 150–450
/// words) at a 2,000-token window, where a long reply is longer than a quarter of the working
/// context: the replies that hold an answer (`assistant_fact`) are in the prompt whole as often as
/// BM25 + neighbours packed into the whole budget has them, and Somna's prompt holds at least as
/// much as that baseline overall. The whole split (204 questions, a few seconds): measured when
/// written (this config), somna 189 / 188 (long replies 21 of 36), bm25+nbrs 151 / 148 (21); with hits cut to
/// a quarter of the note, as they were before, the long replies were held for 2.
#[tokio::test]
async fn long_replies_are_recalled_whole_at_a_small_window() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/recall-assistant");
    let dataset = Dataset::load(&dir).unwrap();
    let config = ResolvedConfig::load(
        "[defaults.compaction]\nmax_context_tokens = 2000\n",
        "recall-test.toml",
        &[],
    )
    .unwrap();
    let llm = build_client(&config.llm, &|_| None).unwrap();
    let report = eval::recall(&dataset, &config, llm, &RecallOptions::default())
        .await
        .unwrap();
    let somna = report.method(SOMNA).unwrap();
    let packed = report.method(BM25_NEIGHBOURS).unwrap();
    let long = |m: &eval::MethodReport| m.categories["assistant_fact"].clone();
    let (somna_long, packed_long) = (long(somna), long(packed));
    println!(
        "assistant split at 2k: somna {}/{} (long replies {} of {}), bm25+nbrs {}/{} (long replies {})",
        somna.overall.some,
        somna.overall.all,
        somna_long.some,
        somna_long.questions,
        packed.overall.some,
        packed.overall.all,
        packed_long.some
    );
    assert_eq!(somna.overall.over_budget, 0);
    assert!(
        somna_long.some >= packed_long.some && somna_long.some > 0,
        "long replies: somna {somna_long:?}, bm25+nbrs {packed_long:?}"
    );
    assert!(
        somna.overall.some >= packed.overall.some && somna.overall.all >= packed.overall.all,
        "somna {:?}, bm25+nbrs {:?}",
        somna.overall,
        packed.overall
    );
}
