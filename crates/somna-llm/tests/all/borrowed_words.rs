//! A value an item takes from another turn, or from nowhere, is caught, measured on the recall
//! datasets' planted facts:
//!
//! - a word said in one turn only must be cited where it was said (`Claim::Word`): a model that
//!   puts one person's fact under another's question ("What does Dmitri collect: succulents
//!   [#113]", where only Bruno's turn #187 says succulents) is caught like an invented number;
//! - a word no turn says is an invention unless it is an everyday word or a common one near in
//!   meaning to what the item cites ("Which drink does Dmitri get: kombucha [#113]", in a
//!   conversation where nobody says kombucha);
//! - a true fact written in its question's words (which the datasets choose to share nothing with
//!   the answer turn) is kept or repaired, and its value is not lost;
//! - a value given to the speaker of the turn that told it of someone else ("What does Lucas
//!   collect: old maps [#113]", #113 being Lucas's "Dmitri has started collecting old maps") is
//!   not committed as written (`Grounder::credited`): the speaker's turn is quoted as theirs;
//! - a value denied where its turn says it ("What city did Omar move to: not Lisbon [#113]") is
//!   not committed as written (`Grounder::flip`): a negation the item adds, or drops, turns
//!   around what the turn said while every value and name of it is still there.
//!
//! Each conversation is cut into bodies of [`BODY`] turns (about what one compaction folds at a
//! 4,000-token window); each question whose answer turns sit in one body gives three items over
//! that body's grounder, each citing the question's answer turns: its true value under its
//! question; the value of another question of the same body (a lower-case value no answer turn
//! of this question says) about someone else; and a lower-case value of another conversation that
//! no turn of the body says. A question whose one answer turn was said by someone other than the
//! person asked about (a person of the conversation), and does not name its speaker, gives a
//! fourth: the same true item about the speaker. Every question gives a fifth: its true value
//! denied ("…: not Lisbon"). `SOMNA_SHOW=1` prints each item whose borrowed,
//! invented or misattributed value got through, whose true value was lost, or that was changed;
//! `SOMNA_SHOW_NOTES=1` each true note refused, with the words it was refused for. (The same person's other value is out
//! of any word check's reach: "Bruno collects hazelnuts", re-cited to Bruno's "no hazelnuts near
//! my plate", holds every name and word the sources can vouch for; the verb is the model's. So is
//! a common word near in meaning to the turn cited: "pilot" for a nurse's night shift.)

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use somna_core::Role;
use somna_core::retrieval::terms;
use somna_llm::grounding::{Grounder, Verdict};
use somna_text::transcript::Turn;

/// Turns per body.
const BODY: usize = 150;

struct Question {
    conversation: String,
    question: String,
    answer: String,
    turns: Vec<u64>,
    category: String,
}

/// What the check did with the two kinds of item of one split.
#[derive(Debug, Default)]
struct Tally {
    true_items: usize,
    /// True items not kept as written (re-cited or quoted): their value is still committed.
    true_changed: usize,
    /// True items whose value did not survive the check.
    true_lost: usize,
    borrowed: usize,
    /// Borrowed items whose borrowed value is not committed.
    borrowed_caught: usize,
    /// Items with a value no turn of their body says (another conversation's).
    invented: usize,
    /// Invented items whose invented value is not committed.
    invented_caught: usize,
    /// The true items, written as a journal note (uncited), that the note check refuses.
    true_notes_refused: usize,
    /// The invented items, written as a journal note, that the note check refuses.
    invented_notes_refused: usize,
    /// Items that give the question's value to the answer turn's speaker, who only reported it
    /// about the person asked about.
    misattributed: usize,
    /// Misattributed items not committed as written.
    misattributed_caught: usize,
    /// The misattributed items, written as a journal note, that the note check refuses.
    misattributed_notes_refused: usize,
    /// Items that deny their question's value ("…: not Lisbon"), which their answer turns say.
    negated: usize,
    /// Negated items not committed as written.
    negated_caught: usize,
    /// The negated items, written as a journal note, that the note check refuses.
    negated_notes_refused: usize,
}

fn dataset(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../datasets")
        .join(name)
}

fn questions(split: &str) -> Vec<Question> {
    let text = std::fs::read_to_string(dataset(split).join("questions.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|v| Question {
            conversation: v["conversation"].as_str().unwrap().to_string(),
            question: v["question"].as_str().unwrap().to_string(),
            answer: v["answer"].as_str().unwrap().to_string(),
            turns: v["answer_turns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap())
                .collect(),
            category: v["category"].as_str().unwrap().to_string(),
        })
        .collect()
}

fn conversation(split: &str, name: &str) -> Vec<Turn> {
    let path = dataset(split)
        .join("conversations")
        .join(format!("{name}.jsonl"));
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            // A group chat of people: the datasets' `assistant` turns are a person's, not an
            // agent's words (a journal note about someone else may not rest on the agent's own
            // turns, `Grounder::unsupported`; nothing else here reads the role).
            let mut turn = Turn::new(i as u64, Role::User, v["content"].as_str().unwrap());
            turn.name = v["name"].as_str().map(str::to_string);
            turn
        })
        .collect()
}

/// Who a question asks about: its first capitalized word after the first.
fn person(q: &Question) -> &str {
    q.question
        .split(|c: char| !c.is_alphanumeric())
        .skip(1)
        .find(|w| w.starts_with(char::is_uppercase))
        .unwrap_or("")
}

/// The turns `cites` names, with their speakers: what `SOMNA_SHOW` prints beside a missed item.
fn cited<'a>(turns: &'a [Turn], cites: &[u64]) -> Vec<(Option<&'a str>, &'a str)> {
    cites
        .iter()
        .filter_map(|&c| turns.get(usize::try_from(c).ok()?))
        .map(|t| (t.name.as_deref(), t.content.as_str()))
        .collect()
}

/// The item as written, cited.
fn item(q: &Question, value: &str) -> String {
    let cites: Vec<String> = q.turns.iter().map(|t| format!("#{t}")).collect();
    format!(
        "{}: {value} [{}]",
        q.question.trim_end_matches('?'),
        cites.join(", ")
    )
}

/// The item as a journal note: uncited.
fn note(q: &Question, value: &str) -> String {
    format!("{}: {value}", q.question.trim_end_matches('?'))
}

fn measure(split: &str) -> Tally {
    let all = questions(split);
    let mut tally = Tally::default();
    let mut conversations: Vec<&str> = all.iter().map(|q| q.conversation.as_str()).collect();
    conversations.dedup();
    for name in conversations {
        let turns = conversation(split, name);
        for (b, body) in turns.chunks(BODY).enumerate() {
            let in_body = |q: &&Question| {
                q.conversation == name
                    && q.category != "temporal"
                    && q.turns
                        .iter()
                        .all(|&t| usize::try_from(t).unwrap() / BODY == b)
            };
            let asked: Vec<&Question> = all.iter().filter(in_body).collect();
            if asked.is_empty() {
                continue;
            }
            let grounder = Grounder::from_turns(body, &[]);
            // Values no turn of this body says: other conversations' lower-case values.
            let body_terms: HashSet<String> = body
                .iter()
                .flat_map(|t| {
                    terms(&t.content)
                        .into_iter()
                        .chain(t.name.iter().flat_map(|n| terms(n)))
                })
                .collect();
            let unsaid: Vec<&str> = all
                .iter()
                .filter(|o| o.conversation != name && o.answer.starts_with(char::is_lowercase))
                .map(|o| o.answer.as_str())
                .filter(|a| {
                    let t = terms(a);
                    !t.is_empty() && t.iter().all(|t| !body_terms.contains(t))
                })
                .collect();
            let said = |q: &Question, value: &str| {
                q.turns.iter().any(|&t| {
                    turns[usize::try_from(t).unwrap()]
                        .content
                        .to_lowercase()
                        .contains(&value.to_lowercase())
                })
            };
            for (i, q) in asked.iter().enumerate() {
                let checked = grounder.check(&item(q, &q.answer));
                tally.true_items += 1;
                let refused = grounder.unsupported(&note(q, &q.answer));
                if !refused.is_empty() {
                    tally.true_notes_refused += 1;
                    if std::env::var_os("SOMNA_SHOW_NOTES").is_some() {
                        println!("TRUE NOTE REFUSED {:?} {refused:?}", note(q, &q.answer));
                    }
                }
                if checked.verdict != Verdict::Kept {
                    tally.true_changed += 1;
                    if std::env::var_os("SOMNA_SHOW").is_some() {
                        println!(
                            "CHANGED {:?} missing {:?}",
                            item(q, &q.answer),
                            checked.missing
                        );
                    }
                }
                // A value is kept when the committed text still says it (as written or quoted).
                let value_words = q.answer.to_lowercase();
                if checked.verdict == Verdict::Dropped
                    || !checked.text.to_lowercase().contains(
                        value_words
                            .split_whitespace()
                            .last()
                            .unwrap_or(&value_words),
                    )
                {
                    tally.true_lost += 1;
                    if std::env::var_os("SOMNA_SHOW").is_some() {
                        println!("LOST {:?} -> {:?}", item(q, &q.answer), checked);
                    }
                }
                // The value given to whoever said it of someone else.
                let p = person(q);
                let first = &turns[usize::try_from(q.turns[0]).unwrap()];
                if let Some(speaker) = first.name.as_deref()
                    && turns.iter().any(|t| t.name.as_deref() == Some(p))
                    && speaker != p
                    && q.turns.len() == 1
                    && !first.content.contains(speaker)
                {
                    let moved = Question {
                        conversation: q.conversation.clone(),
                        question: q.question.replacen(p, speaker, 1),
                        answer: q.answer.clone(),
                        turns: q.turns.clone(),
                        category: q.category.clone(),
                    };
                    if !grounder.unsupported(&note(&moved, &q.answer)).is_empty() {
                        tally.misattributed_notes_refused += 1;
                    }
                    let written = item(&moved, &q.answer);
                    let checked = grounder.check(&written);
                    tally.misattributed += 1;
                    // Caught when what is committed no longer gives the value to the speaker:
                    // dropped, or their turn quoted.
                    if checked.verdict == Verdict::Dropped
                        || !written.starts_with(checked.text.as_str())
                    {
                        tally.misattributed_caught += 1;
                    } else if std::env::var_os("SOMNA_SHOW").is_some() {
                        println!(
                            "MISATTRIBUTED {:?} <- {:?} -> {:?} {:?} {:?}",
                            item(&moved, &q.answer),
                            first.content,
                            checked.verdict,
                            checked.cites,
                            cited(&turns, &checked.cites)
                        );
                    }
                }
                // The value denied: "not" added before it.
                let denied = format!("not {}", q.answer);
                let written = item(q, &denied);
                let checked = grounder.check(&written);
                tally.negated += 1;
                if !grounder.unsupported(&note(q, &denied)).is_empty() {
                    tally.negated_notes_refused += 1;
                }
                if checked.verdict == Verdict::Dropped
                    || !checked.text.to_lowercase().contains(&denied.to_lowercase())
                {
                    tally.negated_caught += 1;
                } else if std::env::var_os("SOMNA_SHOW").is_some() {
                    println!(
                        "NEGATED {written:?} -> {:?} {:?} {:?}",
                        checked.verdict,
                        checked.cites,
                        cited(&turns, &checked.cites)
                    );
                }
                // A value nobody in this body said, taken in turn.
                if !unsaid.is_empty() {
                    let value = unsaid[(i * 7 + b) % unsaid.len()];
                    let checked = grounder.check(&item(q, value));
                    tally.invented += 1;
                    if !grounder.unsupported(&note(q, value)).is_empty() {
                        tally.invented_notes_refused += 1;
                    }
                    let last = value.split_whitespace().last().unwrap_or(value);
                    if checked.verdict == Verdict::Dropped
                        || !checked.text.to_lowercase().contains(last)
                    {
                        tally.invented_caught += 1;
                    } else if std::env::var_os("SOMNA_SHOW").is_some() {
                        println!("INVENTED {:?} -> {:?}", item(q, value), checked.verdict);
                    }
                }
                // Another question's lower-case value that none of this one's answer turns says,
                // taken in turn so that every question borrows a different one where it can.
                let other = (1..asked.len())
                    .map(|k| asked[(i + k) % asked.len()])
                    .find(|o| {
                        o.answer.starts_with(char::is_lowercase)
                            && !said(q, &o.answer)
                            && person(o) != person(q)
                    });
                let Some(other) = other else { continue };
                let checked = grounder.check(&item(q, &other.answer));
                tally.borrowed += 1;
                let committed = checked.text.to_lowercase();
                if checked.verdict == Verdict::Dropped
                    || !committed.contains(&other.answer.to_lowercase())
                {
                    tally.borrowed_caught += 1;
                } else if std::env::var_os("SOMNA_SHOW").is_some() {
                    println!(
                        "MISS {:?} -> {:?} {:?} {:?}",
                        item(q, &other.answer),
                        checked.verdict,
                        checked.cites,
                        cited(&turns, &checked.cites)
                    );
                }
            }
        }
    }
    tally
}

fn pct(n: usize, of: usize) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

/// One kind of item's line: how many were caught as items, and refused as notes.
fn caught_and_refused(split: &str, kind: &str, of: usize, caught: usize, refused: usize) {
    println!(
        "{split}: {kind} caught {caught}/{of} ({:.1}%), as notes refused {refused} ({:.1}%)",
        pct(caught, of),
        pct(refused, of)
    );
}

fn report(split: &str, t: &Tally) {
    caught_and_refused(
        split,
        "negated",
        t.negated,
        t.negated_caught,
        t.negated_notes_refused,
    );
    caught_and_refused(
        split,
        "misattributed",
        t.misattributed,
        t.misattributed_caught,
        t.misattributed_notes_refused,
    );
    println!(
        "{split}: as journal notes, invented refused {}/{} ({:.1}%), true refused {}/{} ({:.1}%)",
        t.invented_notes_refused,
        t.invented,
        pct(t.invented_notes_refused, t.invented),
        t.true_notes_refused,
        t.true_items,
        pct(t.true_notes_refused, t.true_items),
    );
    println!(
        "{split}: invented values caught {}/{} ({:.1}%); borrowed values caught {}/{} ({:.1}%); true items changed {}/{} ({:.1}%), their value lost {}",
        t.invented_caught,
        t.invented,
        pct(t.invented_caught, t.invented),
        t.borrowed_caught,
        t.borrowed,
        pct(t.borrowed_caught, t.borrowed),
        t.true_changed,
        t.true_items,
        pct(t.true_changed, t.true_items),
        t.true_lost
    );
}

/// The tuning split, on which `RARE_WORD_SOURCES`, the same-person exception, `EVERYDAY_WORDS`,
/// `COMMON_WORDS` and `NEAR` were chosen. Before words no turn says were weighed: invented values
/// caught 18.3%, borrowed 91.8%, true items changed 11.3%, none lost; with values alone (before
/// `Claim::Word`): borrowed 6.8%, changed 1.7%.
#[test]
fn a_borrowed_or_invented_value_is_caught_on_the_tuning_split() {
    let t = measure("recall");
    report("recall (tuning)", &t);
    assert!(
        t.borrowed > 600 && t.true_items > 700 && t.invented > 700,
        "{t:?}"
    );
    assert!(pct(t.invented_caught, t.invented) >= 85.0, "{t:?}");
    assert!(pct(t.borrowed_caught, t.borrowed) >= 90.0, "{t:?}");
    assert!(pct(t.true_changed, t.true_items) <= 32.0, "{t:?}");
    assert_eq!(t.true_lost, 0, "a true value was lost: {t:?}");
    // As journal notes (before rare words were weighed: 8.9% and 1.3%; with them 65.9%, 10.2%;
    // with common words past the 4,000 commonest weighed against what the note would cite, 83.9%
    // and 17.0%: the true notes refused are in the question's own words, which these datasets
    // keep apart from the answer turn's, "Which substance makes Dmitri sick: hazelnuts" over
    // "I'm allergic to hazelnuts").
    assert!(pct(t.invented_notes_refused, t.invented) >= 80.0, "{t:?}");
    assert!(pct(t.true_notes_refused, t.true_items) <= 19.0, "{t:?}");
    // Given to the speaker who told it of someone else (before `Grounder::credited`: 7.2%; with
    // it 89.1%; with repairs that keep what the cited turn vouched for, 100%), and as journal
    // notes (before: 0.0%; with it 93.5%, true notes refused 10.2% → 10.3%).
    assert!(t.misattributed > 120, "{t:?}");
    assert!(
        pct(t.misattributed_caught, t.misattributed) >= 95.0,
        "{t:?}"
    );
    assert!(
        pct(t.misattributed_notes_refused, t.misattributed) >= 85.0,
        "{t:?}"
    );
    // The value denied where its turn says it (before `Grounder::flip`: 28.6% not committed as
    // written, for other reasons, and 10.3% as notes; with it 98.7% and 88.4%, true items
    // changed 28.9% → 29.2%, true notes refused 10.3% → 10.6%; 99.2% with repairs that keep what
    // the cited turn vouched for; as notes 90.7% → 98.7% with the one source of a word of the
    // note read too, true notes refused 17.0% → 17.1%).
    assert!(pct(t.negated_caught, t.negated) >= 95.0, "{t:?}");
    assert!(pct(t.negated_notes_refused, t.negated) >= 95.0, "{t:?}");
}

/// The held-out split, never tuned on. Before words no turn says were weighed: invented values
/// caught 14.9%, borrowed 80.6%, true items changed 11.1%, 3 values lost (quotes of a sentence
/// without them); measured once with the rule: 85.8%, 83.7%, 28.8%, 4.
#[test]
fn a_borrowed_or_invented_value_is_caught_on_the_held_out_split() {
    let t = measure("recall-heldout");
    report("recall-heldout", &t);
    assert!(
        t.borrowed > 400 && t.true_items > 400 && t.invented > 400,
        "{t:?}"
    );
    assert!(pct(t.invented_caught, t.invented) >= 80.0, "{t:?}");
    assert!(pct(t.borrowed_caught, t.borrowed) >= 78.0, "{t:?}");
    assert!(pct(t.true_changed, t.true_items) <= 32.0, "{t:?}");
    assert!(t.true_lost <= 4, "true values were lost: {t:?}");
    // As journal notes (before rare words were weighed: 7.1% and 2.1%; measured once with them:
    // 74.7%, 13.9%; twice with common words weighed against what the note would cite: 74.9% →
    // 89.8% and true notes 14.7% → 21.7% with every word past the 2,000 commonest, then 89.1% and
    // 20.1% past the 4,000 commonest).
    assert!(pct(t.invented_notes_refused, t.invented) >= 85.0, "{t:?}");
    assert!(pct(t.true_notes_refused, t.true_items) <= 23.0, "{t:?}");
    // Given to the speaker who told it of someone else (before `Grounder::credited`: 23.0%; with
    // it 80.0%, measured twice: 69.0% with a first version that read the whole turn; with
    // repairs that keep what the cited turn vouched for, measured once: 94.0%), and as journal
    // notes (before: 4.0%; measured once with the rule: 59.0%, true notes refused 13.9% →
    // 13.9%).
    assert!(t.misattributed > 80, "{t:?}");
    assert!(
        pct(t.misattributed_caught, t.misattributed) >= 88.0,
        "{t:?}"
    );
    assert!(
        pct(t.misattributed_notes_refused, t.misattributed) >= 50.0,
        "{t:?}"
    );
    // The value denied (before `Grounder::flip`: 28.1% and 13.9% as notes; measured twice:
    // 72.8% / 70.7% with a first version that read only the turn's closest clauses, then 99.8% /
    // 74.0%; true items changed 28.8% → 28.8%, true notes refused 13.9% → 14.7%; 100% with
    // repairs that keep what the cited turn vouched for; as notes, measured once with the one
    // source of a word of the note read too: 74.0% → 99.3%, true notes refused 20.1% → 20.1%).
    assert!(pct(t.negated_caught, t.negated) >= 95.0, "{t:?}");
    assert!(pct(t.negated_notes_refused, t.negated) >= 95.0, "{t:?}");
}
