//! Token counting and calibration.
//!
//! - [`Tokenizer`] names how a model's tokens are counted: exactly with OpenAI's `o200k_base` or
//!   `cl100k_base` BPE (through tiktoken-rs), or estimated by a heuristic for every other model.
//! - [`TokenCounter`] counts text, one message, or a whole prompt, adding the per-message overhead
//!   of chat formatting as OpenAI's published counting rules describe it.
//! - [`Calibration`] learns a per-agent correction factor from the `usage.prompt_tokens` that
//!   servers report, for models whose tokenizer is only estimated.
//!
//! # The heuristic
//!
//! DESIGN.md first said `len/4` on bytes. Measured against o200k on the corpus in
//! `somna_testkit::corpus`, `len/4` is off by −28% (JSON) to +55% (Russian); adding "one token
//! per CJK character" still leaves −28% to +55%. That spread matters more than the average: the
//! [`Calibration`] factor can absorb a constant bias, but not one that changes whenever an agent's
//! mix of prose, code and tool output changes. So the heuristic follows the shape of the BPE
//! pre-tokenizer instead, one cheap pass over the characters:
//!
//! - a run of letters (ASCII or two-byte UTF-8 such as Cyrillic, Greek, accented Latin) is
//!   `1 + (bytes - 1) / 6` tokens: one per short word, one more for every six further bytes, and
//!   one more when the run mixes ASCII and non-ASCII letters (`Bäckerin`);
//! - a run of digits is `ceil(n / 3)` tokens (the BPE splits numbers into groups of three);
//! - a run of punctuation and symbols is `ceil(n / 3)` tokens;
//! - a single space is free (it joins the next word); a longer run of whitespace, or one with a
//!   line break, is `1 + (n - 1) / 16`;
//! - a character of three UTF-8 bytes (CJK, kana, Hangul, most other scripts) is one token, one of
//!   four bytes (emoji, rare CJK) is two.
//!
//! On that corpus the heuristic lies between +3% and +23% of o200k for every sample (English
//! +16%, Chinese +23%, Russian +23%, German +5%, JSON +11%, Rust +16%, mixed +3%) and between
//! −23% and +16% of cl100k; `tests/tokens.rs` pins the whole table in a snapshot. It leans
//! towards overestimating, the safe side for a context-window guard, and runs an order of magnitude
//! faster than a BPE count (≈670 MiB/s on English against ≈50 MiB/s for o200k, see
//! `benches/tokens.rs`).

use std::fmt;

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

use crate::message::{Message, Role};

/// Tokens of chat formatting around every message (`<|start|>{role}<|message|>…<|end|>`), from
/// OpenAI's published counting rules for gpt-3.5-turbo, gpt-4 and gpt-4o.
pub const TOKENS_PER_MESSAGE: u32 = 3;

/// Extra tokens when a message carries a `name`, from the same rules.
pub const TOKENS_PER_NAME: u32 = 1;

/// Tokens that prime the reply (`<|start|>assistant<|message|>`), added once per request.
pub const REPLY_PRIMING: u32 = 3;

/// Framing tokens Somna adds for each tool call of an assistant message, on top of the call's id,
/// name and arguments. OpenAI publishes no rule for tool calls in messages; this is an estimate
/// that errs high, like the framing of a message.
pub const TOKENS_PER_TOOL_CALL: u32 = 3;

crate::str_enum! {
    /// How a model's tokens are counted; its name is the encoding's (`o200k_base`, `cl100k_base`,
    /// `heuristic`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Tokenizer as "tokenizer" {
        /// OpenAI's `o200k_base`: gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the o1/o3/o4 families, gpt-oss.
        O200k = "o200k_base",
        /// OpenAI's `cl100k_base`: gpt-4 (not 4o), gpt-3.5-turbo, text-embedding-3 and ada-002.
        Cl100k = "cl100k_base",
        /// The estimate for every other model (local llama-family models, `builtin`, `smollm2`…).
        Heuristic = "heuristic",
    }
}

impl Tokenizer {
    /// The tokenizer of `model`, ignoring case, provider prefixes (`openai/gpt-4o`) and the
    /// fine-tune wrapper (`ft:gpt-4o-mini-2024-07-18:org::id`). Unknown models get the heuristic.
    pub fn for_model(model: &str) -> Tokenizer {
        let name = base_model_name(model);
        let name = name.as_str();
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
        let family = |families: &[&str]| {
            families.iter().any(|f| {
                name.strip_prefix(f)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
            })
        };
        if starts(&[
            "gpt-4o",
            "chatgpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "gpt-oss",
            "codex-mini",
        ]) || family(&["o1", "o3", "o4"])
        {
            Tokenizer::O200k
        } else if family(&["gpt-4", "gpt-3.5-turbo", "gpt-35-turbo", "gpt-3.5"])
            || starts(&["text-embedding-3", "text-embedding-ada-002"])
        {
            Tokenizer::Cl100k
        } else {
            Tokenizer::Heuristic
        }
    }

    /// True when counts are exact (a known BPE), false for the heuristic.
    pub fn is_exact(self) -> bool {
        !matches!(self, Tokenizer::Heuristic)
    }

    /// The encoding's name (`o200k_base`, `cl100k_base`, `heuristic`): [`Tokenizer::as_str`].
    pub fn name(self) -> &'static str {
        self.as_str()
    }
}

/// Counts tokens for one model: text, a message with its chat-formatting overhead, or a prompt.
///
/// Cheap to clone and share between threads: the BPE tables are process-wide singletons, built
/// once on first use (100–200 ms each, so build counters at start-up, not in a latency-sensitive
/// handler).
#[derive(Clone, Copy)]
pub struct TokenCounter {
    /// Which tokenizer this counter applies.
    tokenizer: Tokenizer,
    /// The shared BPE for exact tokenizers; `None` for the heuristic.
    bpe: Option<&'static CoreBPE>,
}

/// How many texts [`TokenCounter::count_text_memo`] remembers a thread.
pub const MEMO_TEXTS: usize = 256;
/// Texts shorter than this are counted, not looked up: the lookup would cost about as much.
const MEMO_MIN_BYTES: usize = 24;

thread_local! {
    /// Remembered counts by the hash of their tokenizer and text, each with its text (a hash two
    /// texts share is counted, never answered from the other's count).
    static MEMO: std::cell::RefCell<rustc_hash::FxHashMap<u64, (Box<str>, u32)>> =
        std::cell::RefCell::default();
}

impl TokenCounter {
    /// The counter for `model` (see [`Tokenizer::for_model`]).
    pub fn for_model(model: &str) -> TokenCounter {
        TokenCounter::new(Tokenizer::for_model(model))
    }

    /// The counter for a given tokenizer.
    pub fn new(tokenizer: Tokenizer) -> TokenCounter {
        let bpe = match tokenizer {
            Tokenizer::O200k => Some(tiktoken_rs::o200k_base_singleton()),
            Tokenizer::Cl100k => Some(tiktoken_rs::cl100k_base_singleton()),
            Tokenizer::Heuristic => None,
        };
        TokenCounter { tokenizer, bpe }
    }

    /// The heuristic counter, for models Somna does not know.
    pub fn heuristic() -> TokenCounter {
        TokenCounter::new(Tokenizer::Heuristic)
    }

    /// The tokenizer this counter applies.
    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    /// True when counts are exact, false when they are the heuristic's estimate.
    pub fn is_exact(&self) -> bool {
        self.tokenizer.is_exact()
    }

    /// Tokens of plain text. Special-token markers such as `<|endoftext|>` count as ordinary text,
    /// as the chat API treats them in message content. Saturates at `u32::MAX`.
    pub fn count_text(&self, text: &str) -> u32 {
        let n = match self.bpe {
            Some(bpe) => count_bpe(bpe, text, MAX_BPE_CHUNK),
            None => heuristic_count(text),
        };
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// [`TokenCounter::count_text`] of a text counted again and again — a prompt's fixed pieces:
    /// the persona, the context note's framing and headings, a speaker's name — remembered by the
    /// calling thread (up to [`MEMO_TEXTS`] texts, then forgotten at once). The note's framing
    /// alone took ~8,000 instructions to count, five such counts a turn (docs/benchmarks.md).
    pub fn count_text_memo(&self, text: &str) -> u32 {
        if text.len() < MEMO_MIN_BYTES {
            return self.count_text(text);
        }
        let key = {
            use std::hash::{BuildHasher, Hash, Hasher};
            let mut h = rustc_hash::FxBuildHasher.build_hasher();
            self.tokenizer.hash(&mut h);
            text.hash(&mut h);
            h.finish()
        };
        MEMO.with_borrow_mut(|memo| {
            match memo.get(&key) {
                Some((known, n)) if **known == *text => return *n,
                Some(_) => return self.count_text(text),
                None => {}
            }
            let n = self.count_text(text);
            if memo.len() >= MEMO_TEXTS {
                memo.clear();
            }
            memo.insert(key, (Box::from(text), n));
            n
        })
    }

    /// [`TokenCounter::count_message`] of a message of `role` with `text` and nothing else (no
    /// name, no tool calls), its text counted by [`TokenCounter::count_text_memo`]: for a
    /// prompt's fixed messages (the persona, the context note's framing).
    pub fn count_fixed_message(&self, role: Role, text: &str) -> u32 {
        TOKENS_PER_MESSAGE
            .saturating_add(self.count_text(role.as_str()))
            .saturating_add(self.count_text_memo(text))
    }

    /// Tokens one message takes in a prompt: content, role, name, tool calls (id, name, arguments)
    /// and `tool_call_id`, plus [`TOKENS_PER_MESSAGE`], [`TOKENS_PER_NAME`] when named and
    /// [`TOKENS_PER_TOOL_CALL`] per call. This is the count stored in `Message::tokens`.
    pub fn count_message(&self, message: &Message) -> u32 {
        let mut n = TOKENS_PER_MESSAGE
            .saturating_add(self.count_text(message.role.as_str()))
            .saturating_add(self.count_text(&message.content));
        if let Some(name) = &message.name {
            n = n
                .saturating_add(TOKENS_PER_NAME)
                .saturating_add(self.count_text(name));
        }
        for call in &message.tool_calls {
            n = n
                .saturating_add(TOKENS_PER_TOOL_CALL)
                .saturating_add(self.count_text(&call.id))
                .saturating_add(self.count_text(&call.name))
                .saturating_add(self.count_text(&call.arguments));
        }
        if let Some(id) = &message.tool_call_id {
            n = n.saturating_add(self.count_text(id));
        }
        n
    }

    /// Tokens of a whole request: every message plus the [`REPLY_PRIMING`].
    pub fn count_messages(&self, messages: &[Message]) -> u32 {
        messages.iter().fold(REPLY_PRIMING, |sum, m| {
            sum.saturating_add(self.count_message(m))
        })
    }

    /// `estimate` corrected by `cal` when this counter only estimates; exact counts pass unchanged.
    pub fn calibrated(&self, estimate: u64, cal: &Calibration) -> u64 {
        if self.is_exact() {
            estimate
        } else {
            cal.apply(estimate)
        }
    }
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCounter")
            .field("tokenizer", &self.tokenizer)
            .finish_non_exhaustive()
    }
}

/// A per-agent correction factor for tokenizers Somna only estimates, learned from the
/// `usage.prompt_tokens` that servers report.
///
/// A server's report is evidence, not truth: it may be wrong (a proxy that always says 100, a
/// server that counts only the last message) or hostile. So:
///
/// - a report is **rejected** when it is implausible: zero, or a ratio reported/estimated outside
///   [`Self::MIN_RATIO`]..=[`Self::MAX_RATIO`], far beyond what any tokenizer family differs from
///   the heuristic (the heuristic lies within −23%…+23% of o200k and cl100k; llama-family
///   tokenizers count up to about twice as many tokens on code and CJK);
/// - an accepted report moves the factor by [`Self::ALPHA`] of the gap (an exponential moving
///   average over many samples, starting at 1.0), and never by more than [`Self::MAX_STEP`], so a
///   run of lying reports needs many turns to move it far, and one odd report barely at all;
/// - the factor applied is never below 1.0: calibration can raise usage above the local count,
///   never lower it ([`Self::apply`] ≥ its input), so no server can hide a full window;
/// - above [`Self::TRUSTED`] (what chat templates and tokenizer differences plausibly add on
///   prose) the factor is applied only once [`Self::CORROBORATION`] reports have fed it: a
///   server that over-reports from its first answer would otherwise make the agent compact as if
///   its window were a third of what it is, every few turns. Until then the learned factor is
///   kept, and shown ([`Self::held_back`]), but [`Self::TRUSTED`] is applied.
///
/// Two numbers are stored (`factor`, `samples`): O(1) in the agent's record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The learned ratio of the server's count to Somna's estimate (may be below 1.0; the applied
    /// factor is not, see [`Self::effective_factor`]).
    pub factor: f64,
    /// How many accepted server reports fed the average.
    pub samples: u32,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            factor: 1.0,
            samples: 0,
        }
    }
}

/// What [`Calibration::observe`] did with one report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observation {
    /// The report fed the average; `factor` is the new learned factor.
    Accepted { factor: f64 },
    /// The report was ignored; the factor is unchanged.
    Rejected(Implausible),
}

/// Why a server's usage report was ignored.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum Implausible {
    /// Nothing to compare: Somna's own estimate of the prompt is zero.
    #[error("the local estimate of the prompt is zero")]
    NothingSent,
    /// The server reported zero prompt tokens for a prompt that has some.
    #[error("the server reported 0 prompt tokens for a prompt of {estimated} (local count)")]
    Zero { estimated: u64 },
    /// The server reported far fewer tokens than the prompt holds by the local count.
    #[error("{0}: ratio {ratio:.3} is below {min}", ratio = .0.ratio, min = Calibration::MIN_RATIO)]
    TooLow(UsageRatio),
    /// The server reported far more tokens than any tokenizer would count.
    #[error("{0}: ratio {ratio:.3} is above {max}", ratio = .0.ratio, max = Calibration::MAX_RATIO)]
    TooHigh(UsageRatio),
}

/// A server's count of a prompt's tokens beside Somna's: what an implausible ratio is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageRatio {
    /// Somna's uncalibrated count of the prompt.
    pub estimated: u64,
    /// The server's `usage.prompt_tokens`.
    pub reported: u64,
    /// `reported / estimated`.
    pub ratio: f64,
}

impl std::fmt::Display for UsageRatio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server reported {} prompt tokens for a prompt of {} (local count)",
            self.reported, self.estimated
        )
    }
}

impl Calibration {
    /// Weight of a new report in the moving average.
    pub const ALPHA: f64 = 0.2;
    /// The most one report moves the factor, up or down.
    pub const MAX_STEP: f64 = 0.05;
    /// The smallest plausible ratio reported/estimated (and the smallest factor kept).
    pub const MIN_RATIO: f64 = 0.5;
    /// The largest plausible ratio reported/estimated (and the largest factor kept or applied).
    pub const MAX_RATIO: f64 = 3.0;
    /// The largest factor applied before [`Self::CORROBORATION`] reports have fed it.
    pub const TRUSTED: f64 = 1.3;
    /// Accepted reports it takes before a factor above [`Self::TRUSTED`] is applied.
    pub const CORROBORATION: u32 = 64;

    /// Feeds one report: `estimated` is Somna's uncalibrated count of the prompt that was sent,
    /// `reported` the server's `usage.prompt_tokens` for it. Implausible reports are rejected (see
    /// the type's docs); an accepted one moves the factor by [`Self::ALPHA`] of the gap, at most
    /// [`Self::MAX_STEP`].
    pub fn observe(&mut self, estimated: u64, reported: u64) -> Observation {
        if estimated == 0 {
            return Observation::Rejected(Implausible::NothingSent);
        }
        if reported == 0 {
            return Observation::Rejected(Implausible::Zero { estimated });
        }
        let ratio = reported as f64 / estimated as f64;
        let report = UsageRatio {
            estimated,
            reported,
            ratio,
        };
        if ratio < Self::MIN_RATIO {
            return Observation::Rejected(Implausible::TooLow(report));
        }
        if ratio > Self::MAX_RATIO {
            return Observation::Rejected(Implausible::TooHigh(report));
        }
        let current = self.learned_factor();
        let step = (Self::ALPHA * (ratio - current)).clamp(-Self::MAX_STEP, Self::MAX_STEP);
        self.factor = (current + step).clamp(Self::MIN_RATIO, Self::MAX_RATIO);
        self.samples = self.samples.saturating_add(1);
        Observation::Accepted {
            factor: self.factor,
        }
    }

    /// `tokens` times the [`Self::effective_factor`], rounded up (overestimating is the safe
    /// side). Never less than `tokens`.
    pub fn apply(&self, tokens: u64) -> u64 {
        let scaled = (tokens as f64 * self.effective_factor()).ceil();
        // f64 → u64 saturates; the floor keeps huge counts exact where f64 rounding would not.
        (scaled as u64).max(tokens)
    }

    /// The factor [`Self::apply`] uses: the learned one, clamped to 1.0..=[`Self::MAX_RATIO`]
    /// (a stored factor that is not a finite number counts as 1.0), and to [`Self::TRUSTED`]
    /// while fewer than [`Self::CORROBORATION`] reports fed it. Never below 1.0: the local count
    /// is a floor.
    pub fn effective_factor(&self) -> f64 {
        let factor = self.learned_factor().clamp(1.0, Self::MAX_RATIO);
        if self.samples < Self::CORROBORATION {
            factor.min(Self::TRUSTED)
        } else {
            factor
        }
    }

    /// Whether the learned factor is above what is applied, for want of corroboration.
    pub fn held_back(&self) -> bool {
        self.learned_factor() > self.effective_factor()
    }

    /// The stored factor, clamped to the plausible range; 1.0 when it is not a finite number.
    fn learned_factor(&self) -> f64 {
        if self.factor.is_finite() {
            self.factor.clamp(Self::MIN_RATIO, Self::MAX_RATIO)
        } else {
            1.0
        }
    }
}

/// The largest piece of text handed to the BPE in one call. tiktoken-rs panics on a whitespace run
/// of about a million bytes (its regex engine's backtracking stack overflows), so longer texts are
/// counted in chunks; a chunk this small cannot hold a run that long.
const MAX_BPE_CHUNK: usize = 64 * 1024;

/// The model name without provider prefix or fine-tune wrapper, in lower case.
fn base_model_name(model: &str) -> String {
    let name = model.trim();
    let name = name.rsplit_once('/').map_or(name, |(_, last)| last);
    let name = match name.strip_prefix("ft:") {
        Some(rest) => rest.split(':').next().unwrap_or(rest),
        None => name,
    };
    name.to_ascii_lowercase()
}

/// Counts `text` with `bpe`, in chunks of at most `max_chunk` bytes.
///
/// Chunks end, where possible, just before a space that follows an ASCII letter or digit and
/// precedes an ASCII letter. Both OpenAI pre-tokenizer patterns always start a new piece there and
/// no piece before it looks past it, so the chunked count equals the whole-text count. Only when
/// the second half of a window has no such space (a huge whitespace run, a long CJK text without
/// spaces) is the cut made at a character boundary, which may change the count by a token or two
/// per cut.
fn count_bpe(bpe: &CoreBPE, text: &str, max_chunk: usize) -> usize {
    let mut rest = text;
    let mut total = 0;
    while rest.len() > max_chunk {
        let cut = chunk_end(rest, max_chunk);
        let (head, tail) = rest.split_at(cut);
        total += bpe.encode_ordinary(head).len();
        rest = tail;
    }
    total + bpe.encode_ordinary(rest).len()
}

/// Where the chunk at the start of `text` (longer than `max_chunk`) ends: see [`count_bpe`].
fn chunk_end(text: &str, max_chunk: usize) -> usize {
    let bytes = text.as_bytes();
    let low = (max_chunk / 2).max(1);
    let safe = (low..max_chunk.min(bytes.len() - 1)).rev().find(|&i| {
        bytes[i] == b' '
            && bytes[i - 1].is_ascii_alphanumeric()
            && bytes[i + 1].is_ascii_alphabetic()
    });
    match safe {
        Some(i) => i,
        None => {
            let mut i = max_chunk.max(1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            // A chunk must not be empty; `max_chunk` is far larger than one character in practice.
            if i == 0 {
                text.chars().next().map_or(text.len(), char::len_utf8)
            } else {
                i
            }
        }
    }
}

/// The character classes of the heuristic (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharClass {
    /// Letters of one or two UTF-8 bytes.
    Letter,
    /// Digits.
    Digit,
    /// Whitespace.
    Space,
    /// Punctuation and symbols of one or two UTF-8 bytes.
    Symbol,
    /// Any character of three or four UTF-8 bytes.
    Wide,
}

fn char_class(c: char) -> CharClass {
    match c {
        // ASCII first, by range: most characters of most text are ASCII.
        'a'..='z' | 'A'..='Z' => CharClass::Letter,
        '0'..='9' => CharClass::Digit,
        // ASCII's white space; the vertical tab, which Unicode counts too, is a symbol here.
        '\t' | '\n' | '\x0c' | '\r' | ' ' => CharClass::Space,
        _ if c.is_ascii() => CharClass::Symbol,
        _ if c.len_utf8() >= 3 && c.is_whitespace() => CharClass::Space,
        _ if c.len_utf8() >= 3 => CharClass::Wide,
        _ if c.is_alphabetic() => CharClass::Letter,
        _ if c.is_numeric() => CharClass::Digit,
        _ if c.is_whitespace() => CharClass::Space,
        _ => CharClass::Symbol,
    }
}

/// A maximal run of characters of one class.
#[derive(Debug, Clone, Copy)]
struct Run {
    class: CharClass,
    chars: usize,
    /// How many of the characters are ASCII.
    ascii: usize,
    bytes: usize,
    line_break: bool,
}

impl Run {
    fn tokens(&self) -> usize {
        match self.class {
            CharClass::Letter => {
                // An accented letter inside a Latin word usually breaks the BPE merges there.
                let mixed = self.ascii > 0 && self.ascii < self.chars;
                1 + (self.bytes - 1) / 6 + usize::from(mixed)
            }
            CharClass::Digit | CharClass::Symbol => self.chars.div_ceil(3),
            CharClass::Space if self.chars == 1 && !self.line_break => 0,
            CharClass::Space => 1 + (self.chars - 1) / 16,
            // Counted per character as the run grows.
            CharClass::Wide => 0,
        }
    }
}

/// The heuristic estimate of `text`'s tokens (see the module docs).
fn heuristic_count(text: &str) -> usize {
    let mut total = 0;
    let mut run: Option<Run> = None;
    for c in text.chars() {
        let class = char_class(c);
        if class == CharClass::Wide {
            // Three-byte characters are one token, four-byte ones two.
            total += c.len_utf8() - 2;
        }
        let line_break = c == '\n' || c == '\r';
        match &mut run {
            Some(r) if r.class == class => {
                r.chars += 1;
                r.ascii += usize::from(c.is_ascii());
                r.bytes += c.len_utf8();
                r.line_break |= line_break;
            }
            _ => {
                if let Some(r) = run {
                    total += r.tokens();
                }
                run = Some(Run {
                    class,
                    chars: 1,
                    ascii: usize::from(c.is_ascii()),
                    bytes: c.len_utf8(),
                    line_break,
                });
            }
        }
    }
    total + run.map_or(0, |r| r.tokens())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn heuristic_counts_follow_the_rules() {
        let check = |text: &str, expected: usize| {
            assert_eq!(heuristic_count(text), expected, "{text:?}");
        };
        check("", 0);
        check("hello", 1);
        check("hello world", 2);
        check("internationalization", 1 + 19 / 6);
        check("1234567", 3);
        check("{\"a\":", 1 + 1 + 1);
        check("a  b", 3);
        check("a\nb", 3);
        check("привет", 1 + 11 / 6);
        check("Bäckerin", 1 + 8 / 6 + 1);
        check("你好", 2);
        check("🍺", 2);
        check("\n".repeat(17).as_str(), 2);
    }

    #[test]
    fn a_remembered_count_is_the_count() {
        let exact = TokenCounter::new(Tokenizer::Cl100k);
        let heuristic = TokenCounter::heuristic();
        let persona = "You are Bram, the blacksmith of Emberfield. You speak plainly.";
        for round in 0..3 {
            // More texts than the memo keeps, so that it forgets and counts again.
            for i in 0..MEMO_TEXTS + 40 {
                let text = format!(
                    "{persona} Line {i} of round {round}: {}",
                    "ab ".repeat(i % 7)
                );
                for counter in [&exact, &heuristic] {
                    // Two counters share the memo: each must get its own tokenizer's count.
                    assert_eq!(
                        counter.count_text_memo(&text),
                        counter.count_text(&text),
                        "{text}"
                    );
                    assert_eq!(
                        counter.count_fixed_message(Role::System, &text),
                        counter.count_message(&Message::new(Role::System, &text))
                    );
                }
            }
        }
        assert_ne!(
            exact.count_text_memo(persona),
            heuristic.count_text_memo(persona)
        );
        assert_eq!(exact.count_text_memo("short"), exact.count_text("short"));
    }

    #[test]
    fn chunk_ends_before_a_space_between_words() {
        let text = "alpha beta gamma delta";
        let end = chunk_end(text, 12);
        assert_eq!(&text[..end], "alpha beta");
    }

    #[test]
    fn chunk_ends_on_a_char_boundary_without_a_safe_space() {
        let text = "你好你好你好你好";
        let end = chunk_end(text, 10);
        assert!(text.is_char_boundary(end));
        assert_eq!(end, 9);
    }

    #[test]
    fn a_million_spaces_do_not_panic() {
        // Uncut, tiktoken-rs panics on this (its regex engine's backtracking stack overflows).
        let spaces = " ".repeat(1 << 20);
        for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k] {
            let n = TokenCounter::new(tokenizer).count_text(&spaces);
            // Both have tokens for long runs of spaces: far fewer tokens than bytes, but not zero.
            assert!(n > 0 && n < (1 << 20) / 16, "{tokenizer}: {n}");
        }
    }

    /// Words that start and end with an ASCII letter, with anything in between (digits,
    /// punctuation, line breaks, CJK, emoji), joined by single spaces: every join is a safe cut.
    fn text_with_safe_cuts() -> impl Strategy<Value = String> {
        let word = (
            "[a-zA-Z]",
            "[a-z0-9'.,:{}\"\\n\\té日本ж🍺-]{0,5}",
            "[a-zA-Z]",
        )
            .prop_map(|(a, b, c)| format!("{a}{b}{c}"));
        prop::collection::vec(word, 0..80).prop_map(|words| words.join(" "))
    }

    /// Anything: long whitespace runs, CJK without spaces, punctuation.
    fn any_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-zA-Z]{1,12}",
            "[0-9]{1,6}",
            "[ ]{1,40}",
            "[\\n\\t\\r]{1,4}",
            "[.,;:!?'\"(){}]{1,3}",
            "[é日本語ж🍺]{1,30}",
        ];
        prop::collection::vec(piece, 0..80).prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn chunked_counts_equal_whole_counts_at_safe_cuts(text in text_with_safe_cuts()) {
            for bpe in [tiktoken_rs::o200k_base_singleton(), tiktoken_rs::cl100k_base_singleton()] {
                // Words are at most 22 bytes (five middle characters of up to four bytes), so every
                // 24-byte window holds a join to cut at.
                prop_assert_eq!(count_bpe(bpe, &text, 48), bpe.encode_ordinary(&text).len());
            }
        }

        #[test]
        fn chunked_counts_stay_close_to_whole_counts(text in any_text()) {
            for bpe in [tiktoken_rs::o200k_base_singleton(), tiktoken_rs::cl100k_base_singleton()] {
                let whole = bpe.encode_ordinary(&text).len();
                let chunked = count_bpe(bpe, &text, 48);
                // At most a few tokens per cut, and there is at most one cut per 24 bytes.
                let cuts = text.len() / 24;
                prop_assert!(chunked.abs_diff(whole) <= 3 * cuts, "{chunked} vs {whole}");
            }
        }
    }
}
