//! Issue 25's property: random transcripts with planted facts (names, prices, ledger IDs, dates,
//! times), and a summarizer that mixes true items with items carrying invented values — in text
//! and in JSON, with right, wrong and missing citations. Through the readers and the grounding
//! check the runtime uses, no invented value is ever committed (summary, journal, memory), and
//! every true item with a right citation is kept as written.

use proptest::prelude::*;
use somna_core::{JournalEntry, Role, SourceType, Timestamp};
use somna_llm::grounding::{self, Checked, Grounder, Verdict};
use somna_llm::prompts;
use somna_text::cite;
use somna_text::transcript::Turn;

const NAMES: [&str; 6] = ["Mara", "Tobin", "Elsbeth", "Hale", "Bram", "Orla"];
const INVENTED_NAMES: [&str; 4] = ["Zorbath", "Quillane", "Ignatz", "Vessaline"];
const ITEMS: [&str; 6] = ["lantern", "ribbon", "map", "kettle", "plough", "saddle"];

/// One planted fact: who, what, how much, which ledger, which day, what time.
#[derive(Debug, Clone)]
struct Planted {
    name: &'static str,
    item: &'static str,
    price: u32,
    ledger: String,
    day: u32,
    hour: u32,
}

impl Planted {
    fn date(&self) -> String {
        format!("2024-05-{:02}", self.day)
    }

    /// The turn that says it.
    fn sentence(&self) -> String {
        format!(
            "I paid {} silver for the {}, ledger {}, due {} at {}:30.",
            self.price,
            self.item,
            self.ledger,
            self.date(),
            self.hour
        )
    }
}

fn planted() -> impl Strategy<Value = Planted> {
    (
        0..NAMES.len(),
        0..ITEMS.len(),
        10u32..500,
        "[A-M]{2}-[0-9]{4}",
        1u32..28,
        8u32..17,
    )
        .prop_map(|(n, i, price, ledger, day, hour)| Planted {
            name: NAMES[n],
            item: ITEMS[i],
            price,
            ledger,
            day,
            hour,
        })
}

/// An invented value: one no transcript holds (other names, prices over 500, ledgers with other
/// letters, another year, evening hours).
#[derive(Debug, Clone)]
enum Invented {
    Name(&'static str),
    Price(u32),
    Ledger(String),
    Date(String),
    Time(String),
}

impl Invented {
    fn value(&self) -> String {
        match self {
            Invented::Name(n) => n.to_string(),
            Invented::Price(p) => p.to_string(),
            Invented::Ledger(l) | Invented::Date(l) | Invented::Time(l) => l.clone(),
        }
    }
}

fn invented() -> impl Strategy<Value = Invented> {
    prop_oneof![
        (0..INVENTED_NAMES.len()).prop_map(|i| Invented::Name(INVENTED_NAMES[i])),
        (501u32..999).prop_map(Invented::Price),
        "[N-Z]{2}-[0-9]{4}".prop_map(Invented::Ledger),
        (1u32..28).prop_map(|d| Invented::Date(format!("2031-07-{d:02}"))),
        (18u32..23).prop_map(|h| Invented::Time(format!("{h}:45"))),
    ]
}

/// How an item cites.
#[derive(Debug, Clone, Copy)]
enum Citation {
    Right,
    /// Another turn of the transcript.
    Wrong,
    Missing,
    /// A turn that was not compacted.
    Outside,
}

fn citation() -> impl Strategy<Value = Citation> {
    prop_oneof![
        Just(Citation::Right),
        Just(Citation::Wrong),
        Just(Citation::Missing),
        Just(Citation::Outside),
    ]
}

/// A true item about `p`, in one of a few phrasings (a subset of its values, in words the turn
/// says or everyday ones: a rarer word no turn says is a claim nothing backs).
fn true_item(p: &Planted, phrasing: usize) -> String {
    match phrasing % 4 {
        0 => format!("{} paid {} silver for the {}", p.name, p.price, p.item),
        1 => format!("[{}] {} has ledger {} due", p.date(), p.name, p.ledger),
        2 => format!("The {} cost {} silver, due {}", p.item, p.price, p.date()),
        _ => format!("{}'s {} is due at {}:30", p.name, p.item, p.hour),
    }
}

/// The same kind of item with one value replaced by an invented one.
fn false_item(p: &Planted, lie: &Invented) -> String {
    match lie {
        Invented::Name(n) => format!("{n} paid {} silver for the {}", p.price, p.item),
        Invented::Price(x) => format!("{} paid {x} silver for the {}", p.name, p.item),
        Invented::Ledger(l) => format!("{} has ledger {l} due", p.name),
        Invented::Date(d) => format!("[{d}] {} bought the {}", p.name, p.item),
        Invented::Time(t) => format!("{}'s {} is due at {t}", p.name, p.item),
    }
}

#[derive(Debug, Clone)]
struct Case {
    facts: Vec<Planted>,
    /// (fact index, phrasing) of the true items, all rightly cited.
    truths: Vec<(usize, usize)>,
    /// (fact index, lie, citation) of the invented items.
    lies: Vec<(usize, Invented, Citation)>,
    json: bool,
}

fn case() -> impl Strategy<Value = Case> {
    proptest::collection::vec(planted(), 2..12)
        .prop_flat_map(|facts| {
            let n = facts.len();
            (
                Just(facts),
                proptest::collection::vec((0..n, 0usize..4), 1..6),
                proptest::collection::vec((0..n, invented(), citation()), 1..6),
                any::<bool>(),
            )
        })
        .prop_map(|(facts, truths, lies, json)| Case {
            facts,
            truths,
            lies,
            json,
        })
}

/// The turns: small talk around each planted fact; fact `i` is said in turn `2 i + 1` (its seq
/// is 100 + that position), on its day.
fn turns(facts: &[Planted]) -> Vec<Turn> {
    let mut out = Vec::new();
    for (i, p) in facts.iter().enumerate() {
        let at = Timestamp::parse_rfc3339(&format!("{}T{:02}:10:00Z", p.date(), p.hour)).unwrap();
        out.push(Turn::new(100 + 2 * i as u64, Role::Assistant, "Good day to you.").at(at));
        out.push(
            Turn::new(100 + 2 * i as u64 + 1, Role::User, p.sentence())
                .with_name(p.name)
                .at(at),
        );
    }
    out
}

fn seq_of(fact: usize) -> u64 {
    100 + 2 * fact as u64 + 1
}

/// The summarizer's answer: the true items (right citations) and the lies, in the answer's form.
fn answer(case: &Case) -> (String, Vec<String>) {
    let mut items: Vec<(String, Vec<u64>)> = Vec::new();
    let mut true_lines = Vec::new();
    for (f, phrasing) in &case.truths {
        let text = true_item(&case.facts[*f], *phrasing);
        true_lines.push(cite::with_marker(&text, &[seq_of(*f)]));
        items.push((text, vec![seq_of(*f)]));
    }
    let n = case.facts.len();
    for (f, lie, citation) in &case.lies {
        let cites = match citation {
            Citation::Right => vec![seq_of(*f)],
            Citation::Wrong => vec![seq_of((f + 1) % n)],
            Citation::Missing => vec![],
            Citation::Outside => vec![5_000],
        };
        items.push((false_item(&case.facts[*f], lie), cites));
    }
    let text = if case.json {
        let notes: Vec<serde_json::Value> = items
            .iter()
            .map(|(t, s)| serde_json::json!({"note": t, "sources": s}))
            .collect();
        serde_json::json!({
            "topic_arc": notes, "decisions": [], "pending": [], "user_facts": [], "artifacts": []
        })
        .to_string()
    } else {
        let lines: Vec<String> = items
            .iter()
            .map(|(t, s)| format!("- {}", cite::with_marker(t, s)))
            .collect();
        format!(
            "## Topic arc\n{}\n\n## Decisions\n(none)\n\n## Pending\n(none)\n\n## User facts\n(none)\n\n## Artifacts\n(none)",
            lines.join("\n")
        )
    };
    (text, true_lines)
}

/// True when `value` occurs in `text` as a whole token (not inside a longer number or word).
fn holds(text: &str, value: &str) -> bool {
    let lower = text.to_lowercase();
    let v = value.to_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&v) {
        let start = from + i;
        let end = start + v.len();
        let before = lower[..start].chars().next_back();
        let after = lower[end..].chars().next();
        let edge = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
        if edge(before) && edge(after) {
            return true;
        }
        from = start + 1;
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_invented_value_is_committed_and_every_true_item_is_kept(case in case()) {
        let turns = turns(&case.facts);
        let transcript: String = turns.iter().map(|t| t.content.clone()).collect::<Vec<_>>().join("\n");
        let (answer, true_lines) = answer(&case);
        // The lies are lies: no turn holds them.
        for (_, lie, _) in &case.lies {
            prop_assert!(!holds(&transcript, &lie.value()), "{} is in the transcript", lie.value());
        }

        // The summary, as the compactor commits it (history and the synthesis entry).
        let read = prompts::read_summary(&answer);
        let grounder = Grounder::from_turns(&turns, &[]);
        let summary = grounding::ground_summary(&read, &grounder);
        for (_, lie, _) in &case.lies {
            prop_assert!(!holds(&summary.text, &lie.value()), "{} committed:\n{}", lie.value(), summary.text);
        }
        for line in &true_lines {
            prop_assert!(
                summary.text.lines().any(|l| l.trim_start_matches("- ") == line),
                "true item not kept: {line}\n{}", summary.text
            );
        }
        prop_assert_eq!(summary.counts.total() as usize, case.truths.len() + case.lies.len());
        prop_assert!(summary.counts.kept as usize >= case.truths.len());

        // Memory, as a sleep consolidates it: the synthesis entry is entry 1; a model answers with
        // the true items citing it and the lies citing it, another entry, or nothing.
        let mut synthesis = JournalEntry::synthesis(Timestamp(1), summary.text.clone(), 100, 200);
        synthesis.id = 1;
        let mut note = JournalEntry::new(Timestamp(1), SourceType::Note, 6, "Small talk at the well.");
        note.id = 2;
        let entries = vec![synthesis, note];
        let mut facts: Vec<String> = case
            .truths
            .iter()
            .map(|(f, p)| cite::with_marker(&true_item(&case.facts[*f], *p), &[1]))
            .collect();
        for (f, lie, citation) in &case.lies {
            let cites = match citation {
                Citation::Right => vec![1],
                Citation::Wrong => vec![2],
                Citation::Missing => vec![],
                Citation::Outside => vec![77],
            };
            facts.push(cite::with_marker(&false_item(&case.facts[*f], lie), &cites));
        }
        let reply = if case.json {
            prompts::facts_json(&facts)
        } else {
            facts.iter().map(|f| format!("- {f}")).collect::<Vec<_>>().join("\n")
        };
        let prompts::Consolidation::Facts(parsed) = prompts::parse_consolidation(&reply) else {
            panic!("unreadable: {reply}");
        };
        let cited: Vec<String> = parsed.iter().map(|f| f.cited()).collect();
        let entry_grounder = Grounder::from_entries(&entries, &[]);
        let (kept, _, _) = grounding::ground_lines(cited.iter().map(String::as_str), &entry_grounder);
        let memory: String = kept.iter().map(|c| c.text.clone()).collect::<Vec<_>>().join("\n");
        for (_, lie, _) in &case.lies {
            prop_assert!(!holds(&memory, &lie.value()), "{} in memory:\n{}", lie.value(), memory);
        }
        for (f, p) in &case.truths {
            let text = true_item(&case.facts[*f], *p);
            prop_assert!(
                kept.iter().any(|c| c.text == text && c.cites == vec![1] && !c.turns.is_empty()),
                "true fact not kept with its turns: {text}\n{kept:?}"
            );
        }
    }
}

/// The builtin provider's extractive summary of `turns` in `max` tokens, grounded against those
/// turns: it must come out unchanged, nothing repaired or dropped (`label` names the case).
fn assert_extractive_summary_passes(turns: &[Turn], max: u32, label: &str) -> String {
    let summary = somna_text::extractive::summarize(
        turns,
        &somna_core::config::SectionCaps::default(),
        max,
        &|s: &str| somna_text::estimate_tokens(s),
    )
    .render();
    let grounded = grounding::ground_summary(&summary, &Grounder::from_turns(turns, &[]));
    assert_eq!(
        grounded.counts.repaired + grounded.counts.dropped,
        0,
        "{label}: {:?}",
        grounded.examples
    );
    assert_eq!(grounded.text, summary, "{label}");
    summary
}

/// The builtin provider's extractive summaries quote their turns: they pass unchanged.
#[test]
fn extractive_summaries_pass_unchanged() {
    let transcript = somna_testkit::transcript_200().unwrap();
    let turns: Vec<Turn> = transcript.iter().map(Turn::from).collect();
    for max in [300u32, 800, 1_500] {
        let summary = assert_extractive_summary_passes(&turns, max, &max.to_string());
        // Folded into the next summary, with new turns: still unchanged.
        let mut next = vec![Turn::new(
            0,
            Role::System,
            format!("{}\n{summary}", somna_core::Message::SUMMARY_PREFIX),
        )];
        next.extend(turns.iter().skip(150).cloned());
        assert_extractive_summary_passes(&next, max, &format!("{max} folded"));
    }
}

/// A journal note's arguments are the model's claim, never a source: an item citing the turn that
/// called `journal_add` is not kept on the note's values, while a host tool's arguments (what the
/// agent did) and the turn's own text still back what they say.
#[test]
fn a_note_backs_nothing_and_an_uncited_claim_lists_what_nobody_said() {
    let call = |name: &str, arguments: &str| somna_core::ToolCall {
        id: format!("call_{name}"),
        name: name.into(),
        arguments: arguments.into(),
    };
    let mut noted = Turn::new(3, Role::Assistant, "I will see to the sword.");
    noted.tool_calls = vec![call(
        "journal_add",
        r#"{"content":"Zorbath owes 9871 silver"}"#,
    )];
    let mut gave = Turn::new(4, Role::Assistant, "Here it is.");
    gave.tool_calls = vec![call("give_item", r#"{"item":"lantern","price":35}"#)];
    let turns = [
        Turn::new(2, Role::User, "Aldric asks for the sword by day 4.").with_name("Aldric"),
        noted,
        gave,
    ];
    let g = Grounder::from_turns(&turns, &["Wren"]);
    let c = g.check("Zorbath owes 9871 silver [#3]");
    assert_ne!(c.verdict, grounding::Verdict::Kept, "{c:?}");
    assert!(
        !c.text.contains("9871") && !c.text.contains("Zorbath"),
        "{c:?}"
    );
    let c = g.check("The lantern went for 35 silver [#4]");
    assert_eq!(c.verdict, grounding::Verdict::Kept, "{c:?}");

    assert!(g.unsupported("Aldric wants the sword by day 4").is_empty());
    assert!(g.unsupported("Wren promised to help").is_empty());
    // Nothing checkable, nothing invented.
    assert!(g.unsupported("Be kind to travellers").is_empty());
    let missing = g.unsupported("Zorbath owes 9871 silver on ledger QX-5531, due May 7");
    for value in ["zorbath", "9871", "qx5531", "may 7"] {
        assert!(
            missing.iter().any(|m| m.contains(value)),
            "{value} not in {missing:?}"
        );
    }
    assert!(!missing.iter().any(|m| m == "silver"), "{missing:?}");
    // In a note about someone, a rare word nobody said is the model's invention; a common one
    // is too unless it is near in meaning to what the note would cite (Aldric's turn); an
    // impression in everyday words passes (as a note about nobody does).
    let missing = g.unsupported("Aldric brews kombucha for the sword");
    assert!(missing.contains(&"kombucha".to_string()), "{missing:?}");
    let missing = g.unsupported("Aldric wants a fractured toe by day 4");
    assert!(
        missing.contains(&"fractured".to_string()) && missing.contains(&"toe".to_string()),
        "{missing:?}"
    );
    assert!(
        g.unsupported("Aldric seems worried about the sword")
            .is_empty()
    );
}

/// A journal note about someone else rests on what they (or a tool, or the agent's memory) said:
/// a value only the agent's own turns hold is the agent's claim, and the note is refused naming
/// it; the same value in a note in the agent's own voice, or one of Aldric's values, is written.
#[test]
fn a_note_about_others_rests_on_their_words_not_the_agents() {
    let g = Grounder::from_turns(&innkeeper_and_aldric(), &["Wren"]);
    assert_eq!(
        g.unsupported("Aldric owes 500 gold for last winter"),
        vec!["500 (only you said it)".to_string()]
    );
    for note in [
        "I told Aldric he owes me 500 gold for last winter",
        "Wren asked Aldric for 500 gold",
        // Naming nobody: the agent's own business.
        "The debt for last winter is 500 gold",
        "Aldric will pay 40 silver for the room on Friday",
        "Aldric's sister Elsbeth arrives on Friday",
    ] {
        assert!(g.unsupported(note).is_empty(), "{note}");
    }
    // A value nobody said is still just missing.
    assert_eq!(
        g.unsupported("Aldric owes 700 gold"),
        vec!["700".to_string()]
    );
    // The agent's words quoted in the summary or the context note are still the agent's; what
    // Aldric is quoted saying backs a note about him.
    let prompt = |quote: &str| {
        Grounder::from_turns(
            &[Turn::new(
                9,
                Role::System,
                format!(
                    "You are Wren.\n\n## Topic arc\n- {quote}\n- Aldric: I need the sword by day 4."
                ),
            )],
            &["Wren"],
        )
    };
    for quote in [
        "[2026-06-01] assistant: You owe me 500 gold for last winter, Aldric.",
        "Wren: You owe me 500 gold for last winter, Aldric.",
    ] {
        assert_eq!(
            prompt(quote).unsupported("Aldric owes 500 gold"),
            vec!["500 (only you said it)".to_string()],
            "{quote}"
        );
    }
    assert!(
        prompt("[2026-06-01] Aldric: I owe you 500 gold for last winter.")
            .unsupported("Aldric owes 500 gold")
            .is_empty()
    );
}

/// A memory fact consolidated from notes rests on what the notes' people said: a note of the
/// agent's own words ("I told Aldric he owes me 500 gold") backs no fact about Aldric, which is
/// replaced by the note's own words; a note of what Aldric said does.
#[test]
fn a_fact_from_a_note_of_the_agents_own_words_stays_the_agents() {
    let mut own = JournalEntry::new(
        Timestamp(0),
        SourceType::Note,
        7,
        "I told Aldric he owes me 500 gold for the harrow",
    );
    own.id = 1;
    let mut his = JournalEntry::new(
        Timestamp(0),
        SourceType::Note,
        7,
        "Aldric told me: I will pay 40 silver on Friday",
    );
    his.id = 2;
    // The same account with its "I" left out, as notes are written.
    let mut told = JournalEntry::new(
        Timestamp(0),
        SourceType::Note,
        8,
        "Told Mara she owes me 30 silver for the ale",
    );
    told.id = 3;
    let g = Grounder::from_entries(&[own, his, told], &["Wren"]);
    let (kept, _, _) = grounding::ground_facts(
        [
            "Aldric owes 500 gold for the harrow [#1]",
            "Aldric will pay 40 silver on Friday [#2]",
            "Mara owes 30 silver for the ale [#3]",
        ],
        &g,
    );
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_ne!(kept[0].verdict, Verdict::Kept, "{kept:?}");
    assert!(kept[0].text.contains("I told Aldric"), "{kept:?}");
    assert_eq!(kept[1].verdict, Verdict::Kept, "{kept:?}");
    assert_ne!(kept[2].verdict, Verdict::Kept, "{kept:?}");
    assert!(kept[2].text.contains("Told Mara"), "{kept:?}");
}

/// Aldric's turns (#2, #4) and the agent's (#3, Wren's), where only the agent says 500 gold.
fn innkeeper_and_aldric() -> [Turn; 3] {
    [
        Turn::new(
            2,
            Role::User,
            "I will pay 40 silver for the room on Friday.",
        )
        .with_name("Aldric"),
        Turn::new(
            3,
            Role::Assistant,
            "You owe me 500 gold for last winter, Aldric. The room is 40 silver.",
        ),
        Turn::new(4, Role::User, "My sister Elsbeth arrives on Friday.").with_name("Aldric"),
    ]
}

/// What the agent said backs what the agent said, did or promised, not a fact about the people it
/// talks to: a `User facts` item whose values only the agent's own turns hold is re-cited to a
/// turn of theirs that holds them, or else replaced by the agent's words quoted as the agent's;
/// the same item in another section, and a user fact the user said, are kept.
#[test]
fn a_user_fact_rests_on_the_users_words_not_the_agents() {
    let g = Grounder::from_turns(&innkeeper_and_aldric(), &["Wren"])
        .knowing("You are Wren, the innkeeper of the Gilded Goose.");
    let summary = "## Decisions\n- Wren told Aldric he owes 500 gold [#3]\n\n## User facts\n\
- Aldric owes 500 gold [#3]\n- Aldric will pay 40 silver on Friday [#3]\n\
- Aldric's sister Elsbeth arrives on Friday [#4]\n- Wren is the innkeeper [#3]";
    let grounded = grounding::ground_summary(summary, &g);
    let text = &grounded.text;
    let (decisions, facts) = text.split_once("## User facts").unwrap();
    // What the agent said, as what the agent said: kept.
    assert!(
        decisions.contains("Wren told Aldric he owes 500 gold [#3]"),
        "{text}"
    );
    // Not a fact about Aldric: the agent's words, quoted as the agent's.
    assert!(!facts.contains("- Aldric owes 500 gold"), "{text}");
    assert!(facts.contains("assistant: You owe me 500 gold"), "{text}");
    // Aldric said it himself: re-cited to his turn.
    assert!(
        facts.contains("Aldric will pay 40 silver on Friday [#2]"),
        "{text}"
    );
    assert!(facts.contains("Elsbeth arrives on Friday [#4]"), "{text}");
    // The agent's own name needs no one else's word, nor a word of its persona a turn's.
    assert!(facts.contains("Wren is the innkeeper [#3]"), "{text}");
    assert_eq!(grounded.counts.kept, 3, "{grounded:?}");
    assert_eq!(grounded.counts.repaired, 2, "{grounded:?}");
}

/// A fact pulled out of a transcript is a fact about the world: what only the agent's own turns
/// say is committed as the agent's words, not as a fact about the person it was said to; what
/// that person said is kept, and an item about the agent itself needs no one else's word.
#[test]
fn an_extracted_fact_rests_on_what_others_said() {
    let g = Grounder::from_turns(&innkeeper_and_aldric(), &["Wren"]);
    let facts = [
        "Aldric owes 500 gold [#3]",
        "Aldric will pay 40 silver on Friday [#2]",
        "Wren asked for the room money [#3]",
    ];
    let (checked, counts, _) = grounding::ground_facts(facts, &g);
    let texts: Vec<String> = checked.iter().map(Checked::cited).collect();
    assert!(
        texts[0].starts_with("assistant: You owe me 500 gold"),
        "{texts:?}"
    );
    assert_eq!(texts[1], facts[1], "{texts:?}");
    assert_eq!(texts[2], facts[2], "{texts:?}");
    assert_eq!((counts.kept, counts.repaired), (2, 1), "{counts:?}");
    // The same fact over journal entries (a sleep's consolidation) is checked as written.
    let (lines, _, _) = grounding::ground_lines(["Aldric owes 500 gold [#3]"], &g);
    assert_eq!(lines[0].verdict, Verdict::Kept, "{lines:?}");
}

/// A word the sources say in one turn only is a claim of an item that uses it: an item that puts
/// it under another turn (someone else's fact under this person's) is caught like a wrong number;
/// a word several turns say, an everyday word no turn says, and a word from a turn about the same
/// person are not checked.
#[test]
fn a_word_one_turn_says_must_be_cited_where_it_was_said() {
    let turns = [
        Turn::new(
            10,
            Role::User,
            "Found another old map of the harbour at the fair.",
        )
        .with_name("Dmitri"),
        Turn::new(11, Role::User, "My windowsill is full of succulents now.").with_name("Bruno"),
        Turn::new(12, Role::User, "The fair had maps, lamps and more maps.").with_name("Zara"),
        Turn::new(13, Role::User, "Dmitri, you and your harbour charts!").with_name("Zara"),
        Turn::new(14, Role::User, "My friend Kirsten is visiting next month.").with_name("Lucas"),
        Turn::new(15, Role::User, "Big news: Kirsten opened a bookshop!").with_name("Lucas"),
    ];
    let g = Grounder::from_turns(&turns, &[]);
    // Bruno's word under Dmitri's turn: not kept, and not committed.
    let borrowed = g.check("Dmitri got succulents [#10]");
    assert_ne!(borrowed.verdict, Verdict::Kept, "{borrowed:?}");
    assert!(!borrowed.text.contains("succulents"), "{borrowed:?}");
    assert_eq!(borrowed.missing, vec!["succulents".to_string()]);
    // Said in several turns ("maps"), or by a turn naming Dmitri ("charts", #13): the model's to
    // choose (as an everyday word no turn says is: "got").
    for item in [
        "Dmitri got maps [#10]",
        "Dmitri has old maps [#10]",
        "Dmitri got harbour charts [#10]",
    ] {
        assert_eq!(g.check(item).verdict, Verdict::Kept, "{item}");
    }
    // An item over two turns that borrows a word from a third is replaced by its closest turn's
    // words; one that cites both turns it rests on is kept.
    let two = g.check(
        "Lucas's friend Kirsten is visiting next month and opened a bookshop full of succulents \
         [#14, #15]",
    );
    assert_eq!(two.verdict, Verdict::Repaired, "{two:?}");
    assert!(!two.text.contains("succulents"), "{two:?}");
    let both = g.check("Lucas's friend Kirsten, visiting next month, opened a bookshop [#14, #15]");
    assert_eq!(both.verdict, Verdict::Kept, "{both:?}");
}

/// A word no turn says is the model's own: a paraphrase when it is a common word near in meaning to
/// what the item cites (or an everyday word, or the persona's), and otherwise an invention that
/// nothing backs: the item is replaced by its turn's own words, and the word is not committed.
#[test]
fn a_word_no_turn_says_is_an_invention_unless_it_paraphrases_what_is_cited() {
    let turns = [
        Turn::new(
            10,
            Role::User,
            "I've been a nurse on the night ward for ten years.",
        )
        .with_name("Dmitri"),
        Turn::new(11, Role::User, "My windowsill is full of succulents now.").with_name("Bruno"),
        Turn::new(
            12,
            Role::User,
            "Finally unpacked the last boxes in our Lisbon flat.",
        )
        .with_name("Omar"),
    ];
    let g = Grounder::from_turns(&turns, &["Wren"])
        .knowing("You are Wren, the innkeeper of the Gilded Goose.");
    // Inventions: words no turn says, rare or far from the turn cited.
    for (item, invented) in [
        ("Dmitri brews kombucha on the night ward [#10]", "kombucha"),
        (
            "Bruno keeps a pet tortoise on the windowsill [#11]",
            "tortoise",
        ),
        ("Omar moved into a houseboat in Lisbon [#12]", "houseboat"),
    ] {
        let c = g.check(item);
        assert_ne!(c.verdict, Verdict::Kept, "{item}: {c:?}");
        assert!(c.missing.contains(&invented.to_string()), "{item}: {c:?}");
        assert!(!c.text.to_lowercase().contains(invented), "{item}: {c:?}");
        // What is committed instead is the turn's own sentence.
        assert_eq!(c.verdict, Verdict::Repaired, "{item}: {c:?}");
        assert!(
            c.text
                .contains(&turns[(c.cites[0] - 10) as usize].content[..20]),
            "{c:?}"
        );
    }
    // Everyday words, the persona's words and words the turns say are the model's to use.
    for item in [
        "Dmitri has worked as a nurse for ten years [#10]",
        "Wren, the innkeeper, heard that Bruno has a windowsill full of succulents [#11]",
        "Omar unpacked the last boxes in his Lisbon flat [#12]",
    ] {
        let c = g.check(item);
        assert_eq!(c.verdict, Verdict::Kept, "{item}: {c:?}");
    }
}

/// A turn that tells of someone else backs what it says of them, not of its speaker: "Lucas
/// collects old maps [#1]", where #1 is Lucas saying "Dmitri has started collecting old maps",
/// gives Lucas what he said of Dmitri, and is replaced by his words quoted as his. What a turn
/// says of an item is its clauses that share the most words with it. The same speaker's own news
/// (a first-person word in that clause, a clause that names nobody else, or a name that only
/// addresses someone) backs him, and an item that names whom the turn tells of is kept.
#[test]
fn a_speaker_is_not_credited_with_what_they_said_of_someone_else() {
    let turns = [
        Turn::new(
            1,
            Role::User,
            "Dmitri has started collecting old maps, it's getting out of hand.",
        )
        .with_name("Lucas"),
        Turn::new(
            2,
            Role::User,
            "Did you see Dmitri's new tattoo? A tiny owl.",
        )
        .with_name("Lucas")
        // 2026-06-03 09:05
        .at(Timestamp(1_780_477_500_000)),
        Turn::new(
            3,
            Role::User,
            "Dmitri, guess what: bought a Skoda estate today!",
        )
        .with_name("Lucas"),
        Turn::new(
            4,
            Role::User,
            "Dmitri and I finally adopted a puppy called Mochi.",
        )
        .with_name("Lucas"),
        Turn::new(5, Role::User, "Wow, congratulations!").with_name("Dmitri"),
        Turn::new(
            6,
            Role::User,
            "Dmitri moved to Valencia, we should all visit the city.",
        )
        .with_name("Lucas"),
        Turn::new(
            7,
            Role::User,
            "Went hiking with Dmitri, saw a golden eagle.",
        )
        .with_name("Lucas"),
    ];
    let g = Grounder::from_turns(&turns, &[]);
    for (item, seq, about) in [
        (
            "Lucas collects old maps [#1]",
            1,
            "Dmitri has started collecting old maps",
        ),
        ("Lucas got an owl tattoo [#2]", 2, "Dmitri's new tattoo"),
        // The clause that says it tells of Dmitri; the "we" is another clause's.
        (
            "Lucas moved to Valencia [#6]",
            6,
            "Dmitri moved to Valencia",
        ),
    ] {
        let checked = g.check(item);
        assert_eq!(checked.verdict, Verdict::Repaired, "{item}: {checked:?}");
        assert!(
            checked.missing.contains(&"lucas".to_string()),
            "{checked:?}"
        );
        assert!(
            checked.text.contains("Lucas: ") && checked.text.contains(about),
            "{item}: {checked:?}"
        );
        assert_eq!(checked.cites, vec![seq], "{item}: {checked:?}");
    }
    for item in [
        "Dmitri collects old maps [#1]",
        "Lucas says Dmitri collects old maps [#1]",
        "Lucas bought a Skoda estate [#3]",
        "Lucas adopted a puppy called Mochi [#4]",
        "Lucas saw a golden eagle [#7]",
        "Lucas: Dmitri has started collecting old maps [#1]",
        "[2026-06-03] Lucas: Did you see Dmitri's new tattoo? [#2]",
    ] {
        let checked = g.check(item);
        assert_eq!(checked.verdict, Verdict::Kept, "{item}: {checked:?}");
    }
    // A value missing is listed once, however often the item says it.
    let checked = g.check("Zorbath, Zorbath, Zorbath sold old maps [#1]");
    assert_eq!(checked.missing, vec!["zorbath".to_string()], "{checked:?}");
    // The same as journal notes (uncited: the turns that say the most of the note).
    assert_eq!(
        g.unsupported("Lucas collects old maps"),
        vec!["that it was lucas: lucas told it of someone else".to_string()]
    );
    for note in [
        "Dmitri collects old maps",
        "Lucas saw a golden eagle",
        "Lucas bought a Skoda estate",
    ] {
        assert!(g.unsupported(note).is_empty(), "{note}");
    }
}

/// An item that turns its source around — drops a negation the turn says, or adds one it does
/// not — holds every value and name of its source, so the value checks kept it. It is not
/// committed as written: it is re-cited only to a turn that says it the item's way, else replaced
/// by the turn's own words (which keep the negation). Idioms whose negation denies nothing, and
/// items that keep the turn's negation or deny something else, are kept.
#[test]
fn an_item_that_drops_or_adds_a_negation_is_not_committed_as_written() {
    let turns = [
        Turn::new(1, Role::User, "I don't eat meat any more, only fish.").with_name("Marta"),
        Turn::new(
            2,
            Role::User,
            "We never moved to Lisbon, we stayed in Porto.",
        )
        .with_name("Omar"),
        Turn::new(3, Role::User, "Aldric paid the 40 silver for the saddle.").with_name("Brannoc"),
        Turn::new(
            4,
            Role::User,
            "Dmitri won't stop talking about The Last Ferry, and I can't wait for the fair.",
        )
        .with_name("Lucas"),
        Turn::new(
            5,
            Role::User,
            "Don't tease Chloe about being afraid of heights.",
        )
        .with_name("Hannah"),
    ];
    let g = Grounder::from_turns(&turns, &[]);
    for (item, seq, quoted, missing) in [
        (
            "Marta eats meat [#1]",
            1,
            "Marta: I don't eat meat any more",
            "meat: what it rests on says not meat",
        ),
        (
            "Omar moved to Lisbon [#2]",
            2,
            "Omar: We never moved to Lisbon",
            "lisbon: what it rests on says not lisbon",
        ),
        (
            "Aldric has not paid the saddle [#3]",
            3,
            "Brannoc: Aldric paid the 40 silver for the saddle",
            "not saddle: what it rests on says saddle",
        ),
    ] {
        let checked = g.check(item);
        assert_eq!(checked.verdict, Verdict::Repaired, "{item}: {checked:?}");
        assert!(checked.text.contains(quoted), "{item}: {checked:?}");
        assert_eq!(checked.cites, vec![seq], "{item}: {checked:?}");
        assert!(
            checked.missing.iter().any(|m| m == missing),
            "{item}: {checked:?}"
        );
    }
    for item in [
        "Marta no longer eats meat [#1]",
        "Marta eats fish [#1]",
        "Omar did not move to Lisbon; he lives in Porto [#2]",
        "Aldric paid 40 silver for the saddle [#3]",
        "Dmitri talks about The Last Ferry all the time [#4]",
        "Lucas looks forward to the fair [#4]",
        "Chloe is afraid of heights [#5]",
    ] {
        let checked = g.check(item);
        assert_eq!(checked.verdict, Verdict::Kept, "{item}: {checked:?}");
    }
    // Re-cited to a turn that says it the item's way, when one does.
    let g = Grounder::from_turns(
        &[
            Turn::new(1, Role::User, "I don't eat meat any more.").with_name("Marta"),
            Turn::new(
                2,
                Role::User,
                "Marta eats meat at every wedding, I saw her.",
            )
            .with_name("Lucas"),
        ],
        &[],
    );
    let checked = g.check("Marta eats meat at weddings [#1]");
    assert_eq!(checked.verdict, Verdict::Repaired, "{checked:?}");
    assert_eq!(checked.cites, vec![2], "{checked:?}");
    // As journal notes (uncited: the turns that say the most of the note).
    let g = Grounder::from_turns(&turns, &[]);
    assert_eq!(
        g.unsupported("Marta eats meat"),
        vec!["meat: what it rests on says not meat".to_string()]
    );
    for note in ["Marta eats fish", "Marta doesn't eat meat"] {
        assert!(g.unsupported(note).is_empty(), "{note}");
    }
    // A note read against the one turn that says its value, though others share more of its
    // words: Omar's city is talked about in #2 and #3, Lisbon said only in #1.
    let g = Grounder::from_turns(
        &[
            Turn::new(
                1,
                Role::User,
                "Finally unpacked the boxes in our Lisbon flat.",
            )
            .with_name("Omar"),
            Turn::new(2, Role::User, "Omar, which city do you miss the most now?")
                .with_name("Lucas"),
            Turn::new(3, Role::User, "Omar says the old city was loud.").with_name("Priya"),
        ],
        &[],
    );
    assert_eq!(
        g.unsupported("Omar's city is not Lisbon"),
        vec!["not lisbon: what it rests on says lisbon".to_string()]
    );
    assert!(g.unsupported("Omar's flat is in Lisbon").is_empty());
    // A denial of the telling ("Nobody has told me"), not of what was told, turns no note around
    // (the README's village: the builtin brain's note after Bram's turn).
    let g = Grounder::from_turns(
        &[
            Turn::new(1, Role::User, "When is the wedding, Felix?").with_name("Lise"),
            Turn::new(
                2,
                Role::Assistant,
                "Good question, Lise. Nobody has told me.",
            ),
            Turn::new(
                3,
                Role::User,
                "I'm Bram Cooper. She says you're writing our wedding song.",
            )
            .with_name("Bram"),
        ],
        &["Felix"],
    );
    assert!(
        g.unsupported("Bram told me: She says you're writing our wedding song.")
            .is_empty()
    );
}

/// A repair moves an item only to a source that says everything its cited source vouched for
/// of it: "Bruno spent the work bonus on a vintage typewriter [#2]", where #2 is Bruno telling
/// of Lena, is not moved to Hannah's "Bruno spent the whole work bonus on a weighted blanket"
/// (#1), which holds Bruno and most of its words but not the typewriter; it is quoted from #2 as
/// Bruno's.
#[test]
fn a_repair_moves_an_item_only_where_all_its_cited_words_are_said() {
    let turns = [
        Turn::new(
            1,
            Role::User,
            "Bruno spent the whole work bonus on a weighted blanket.",
        )
        .with_name("Hannah"),
        Turn::new(
            2,
            Role::User,
            "Lena spent the whole work bonus on a vintage typewriter.",
        )
        .with_name("Bruno"),
        Turn::new(3, Role::User, "The vintage typewriter is my pride and joy.").with_name("Lena"),
    ];
    let g = Grounder::from_turns(&turns, &[]);
    let checked = g.check("Bruno spent the work bonus on a vintage typewriter [#2]");
    assert_eq!(checked.verdict, Verdict::Repaired, "{checked:?}");
    assert_eq!(checked.cites, vec![2], "{checked:?}");
    assert!(
        checked
            .text
            .contains("Bruno: Lena spent the whole work bonus on a vintage typewriter"),
        "{checked:?}"
    );
}

/// A line that quotes someone (`[day] Marta: …`: an archived turn shown in a prompt's excerpts,
/// an earlier summary's quote) is read as a turn they said: a name taken only from its label is
/// not backed when what the quote says of the item tells of someone else, in an item and in a
/// journal note alike. Their own news, and an item that names whom the quote tells of, are kept.
#[test]
fn a_quoted_speaker_is_not_credited_with_what_they_said_of_someone_else() {
    let turns = [
        Turn::new(
            1,
            Role::System,
            "Archived:\n[2026-06-01 09:00] Marta: Aldric planted turnips along the mill race.\n\
             [2026-06-02 10:00] Marta: I bought a copper kettle at the fair.",
        ),
        Turn::new(2, Role::User, "Good morning!").with_name("Aldric"),
    ];
    let g = Grounder::from_turns(&turns, &[]);
    let checked = g.check("Marta planted turnips along the mill race [#1]");
    assert_ne!(checked.verdict, Verdict::Kept, "{checked:?}");
    assert!(
        checked.missing.contains(&"marta".to_string()),
        "{checked:?}"
    );
    for item in [
        "Aldric planted turnips along the mill race [#1]",
        "Marta says Aldric planted turnips along the mill race [#1]",
        "Marta bought a copper kettle at the fair [#1]",
    ] {
        let checked = g.check(item);
        assert_eq!(checked.verdict, Verdict::Kept, "{item}: {checked:?}");
    }
    assert_eq!(
        g.unsupported("Marta planted turnips along the mill race"),
        vec!["that it was marta: marta told it of someone else".to_string()]
    );
    assert!(g.unsupported("Marta bought a copper kettle").is_empty());
}

/// What the agent said, the person it said it to took up: a note (or an extracted fact) about
/// that person may rest on the agent's turn when their very next turn agrees to it ("Deal. Here
/// you go."), not when it starts otherwise, refuses it, or is someone else's.
#[test]
fn a_note_rests_on_what_its_person_agreed_to() {
    let turns = |answer: &str, by: &str| {
        [
            Turn::new(2, Role::User, "How much for the sword?").with_name("Aldric"),
            Turn::new(3, Role::Assistant, "That sword is 40 silver, Aldric."),
            Turn::new(4, Role::User, answer).with_name(by),
        ]
    };
    for answer in [
        "Deal. Here you go.",
        "Yes, here's the silver.",
        "Here you go, Wren.",
        "Very well, I'll take it.",
        "Fine by me!",
    ] {
        let g = Grounder::from_turns(&turns(answer, "Aldric"), &["Wren"]);
        assert!(
            g.unsupported("Aldric bought the sword for 40 silver")
                .is_empty(),
            "{answer}"
        );
        // So does an extracted fact (a summary's `User facts` likewise) citing the agent's turn.
        let (checked, _, _) =
            grounding::ground_facts(["Aldric bought the sword for 40 silver [#3]"], &g);
        assert_eq!(checked[0].verdict, Verdict::Kept, "{answer}: {checked:?}");
    }
    for (answer, by) in [
        ("Fine, but I won't pay that.", "Aldric"),
        ("No deal, that is robbery.", "Aldric"),
        ("Too much. The smith in Harrowgate asks thirty.", "Aldric"),
        ("Deal. Here you go.", "Mara"),
    ] {
        let g = Grounder::from_turns(&turns(answer, by), &["Wren"]);
        assert_eq!(
            g.unsupported("Aldric bought the sword for 40 silver"),
            vec!["40 (only you said it)".to_string()],
            "{by}: {answer}"
        );
        let (checked, _, _) =
            grounding::ground_facts(["Aldric bought the sword for 40 silver [#3]"], &g);
        assert_ne!(
            checked[0].verdict,
            Verdict::Kept,
            "{by}: {answer}: {checked:?}"
        );
    }
}

/// A note in the first person with its "I" left out, as notes are written ("Sold Aldric the sword
/// for 40 silver", "Told Mara …"), is the agent's own account like "I sold …": it may rest on the
/// agent's own words, and its first word is no name. A name first is still a note about that
/// person, even one in "-ed" that the turns speak of, and a value nobody said is still missing.
/// Each sentence of a note is read for itself.
#[test]
fn a_note_without_its_i_is_the_agents_own_account() {
    let turns = [
        Turn::new(2, Role::User, "How much for the sword?").with_name("Aldric"),
        Turn::new(
            3,
            Role::Assistant,
            "That sword is 40 silver, Aldric. I'll have your harrow mended by Friday.",
        ),
        Turn::new(4, Role::User, "Deal. Here you go.").with_name("Aldric"),
        Turn::new(
            5,
            Role::Assistant,
            "Alfred, you owe me 500 gold. Mara, the wolves are back.",
        ),
        Turn::new(6, Role::User, "Not now, Wren.").with_name("Alfred"),
    ];
    let g = Grounder::from_turns(&turns, &["Wren"]);
    for note in [
        "Sold Aldric the sword for 40 silver",
        "Sold the sword to Aldric for 40 silver.",
        "Promised Aldric his harrow by Friday",
        "Charged Aldric 40 silver for the sword",
        "Told Mara the wolves are back",
        "Ask Alfred about the 500 gold",
    ] {
        assert!(
            g.unsupported(note).is_empty(),
            "{note}: {:?}",
            g.unsupported(note)
        );
    }
    assert_eq!(
        g.unsupported("Alfred owes 500 gold"),
        vec!["500 (only you said it)".to_string()]
    );
    // Each sentence is read for itself: the agent's account after a sentence about Alfred, and
    // a claim about him after one in the first person.
    for note in [
        "Alfred came by. Asked him for the 500 gold.",
        "Alfred came by; the debt is 500 gold.",
    ] {
        assert!(
            g.unsupported(note).is_empty(),
            "{note}: {:?}",
            g.unsupported(note)
        );
    }
    for note in [
        "I met Alfred today. He owes me 500 gold.",
        "I met Alfred; Alfred owes me 500 gold",
    ] {
        assert_eq!(
            g.unsupported(note),
            vec!["500 (only you said it)".to_string()],
            "{note}"
        );
    }
    // Not the agent's account, but Aldric's "Deal." took up the turn that says Friday.
    assert!(
        g.unsupported("Aldric will have his harrow by Friday")
            .is_empty()
    );
    assert_eq!(
        g.unsupported("Sold Aldric the sword for 70 silver"),
        vec!["70".to_string()]
    );
    // A note that starts with a name nobody said is still about that name.
    assert_eq!(
        g.unsupported("Zorbath owes 500 gold"),
        vec!["500 (only you said it)".to_string(), "zorbath".to_string()]
    );
}
