//! The builtin embedder: a static token table distilled from all-MiniLM-L6-v2 (model2vec's
//! method, `examples/distill.rs`), shipped inside the binary. A text's vector is the weighted sum
//! of its WordPiece tokens' rows, L2-normalized: no network, no model run, a few microseconds a
//! message.
//!
//! Table format (`assets/minilm-static.bin`): [`STATIC_MAGIC`], then the token count and the
//! width as little-endian `u32`, then per token in id order: its length (`u16` LE), its UTF-8
//! text, its row's scale (`f32` LE) and `width` `i8` components (a component is `i8 × scale`).

use std::collections::HashMap;
use std::fmt;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::EmbedError;

/// The first bytes of a static table file.
pub const STATIC_MAGIC: &[u8; 8] = b"SOMNAST1";

/// The table shipped with Somna: all-MiniLM-L6-v2's 30,522 WordPiece tokens, 64 components.
const BUILTIN_TABLE: &[u8] = include_bytes!("../assets/minilm-static.bin");
/// The builtin table's model name, stored beside its vectors.
pub const BUILTIN_MODEL_NAME: &str = "somna-static-minilm-64";

/// Smooth inverse frequency's `a` (Arora et al.): a token of estimated probability `p` weighs
/// `a / (a + p)`, so "the" weighs ~0.01 and a rare word ~1.
const SIF_A: f64 = 1e-4;
/// Words longer than this are one unknown token (BERT's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

/// A static token-table embedder (see the module docs). Cheap to share; `embed` takes `&self`.
pub struct StaticEmbedder {
    ids: HashMap<Box<str>, u32>,
    /// `width` components per token, in id order.
    rows: Vec<i8>,
    /// Per token: its row's scale times its weight (0 for tokens that carry no meaning).
    scales: Vec<f32>,
    width: usize,
    unknown: Option<u32>,
    /// The id of `the`, the vocabulary's first (most frequent) word.
    first_word: u32,
    name: String,
}

impl fmt::Debug for StaticEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticEmbedder")
            .field("name", &self.name)
            .field("tokens", &self.scales.len())
            .field("dims", &self.width)
            .finish_non_exhaustive()
    }
}

impl StaticEmbedder {
    /// The table compiled into Somna (all-MiniLM-L6-v2, 64 components). It is well-formed (a
    /// test reads it), so an error here means a broken build.
    pub fn builtin() -> Result<Self, EmbedError> {
        Self::from_bytes(BUILTIN_TABLE, BUILTIN_MODEL_NAME)
    }

    /// Reads a table (the format in the module docs). Token weights follow the vocabulary's
    /// order, which for BERT's WordPiece vocabulary is by frequency from the token `the` on:
    /// the `r`-th word is given Zipf's probability `1 / (r · H)`.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Self, EmbedError> {
        let bad = |reason: &str| EmbedError::BadFile {
            path: name.into(),
            reason: reason.to_owned(),
        };
        let mut cursor = Reader { bytes, at: 0 };
        if cursor
            .take(STATIC_MAGIC.len())
            .ok_or_else(|| bad("empty"))?
            != STATIC_MAGIC
        {
            return Err(bad("not a static embedding table (bad magic)"));
        }
        let count = cursor.u32().ok_or_else(|| bad("truncated header"))? as usize;
        let width = cursor.u32().ok_or_else(|| bad("truncated header"))? as usize;
        if count == 0 || width == 0 {
            return Err(bad("no tokens or no components"));
        }
        let mut ids = HashMap::with_capacity(count);
        let mut rows = Vec::with_capacity(count * width);
        let mut raw_scales = Vec::with_capacity(count);
        // Whether each token carries meaning: letters or digits, and not `[CLS]`-like.
        let mut meaningful = Vec::with_capacity(count);
        for id in 0..count {
            let truncated = || bad(&format!("truncated at token {id}"));
            let len = cursor.u16().ok_or_else(truncated)? as usize;
            let text = std::str::from_utf8(cursor.take(len).ok_or_else(truncated)?)
                .map_err(|_| bad(&format!("token {id} is not UTF-8")))?;
            let scale = cursor.f32().ok_or_else(truncated)?;
            if !scale.is_finite() {
                return Err(bad(&format!("token {id} has a scale that is not finite")));
            }
            let row = cursor.take(width).ok_or_else(truncated)?;
            rows.extend(row.iter().map(|&b| i8::from_le_bytes([b])));
            raw_scales.push(scale);
            ids.entry(Box::from(text))
                .or_insert(u32::try_from(id).unwrap_or(u32::MAX));
            meaningful.push(
                text.chars().any(char::is_alphanumeric)
                    && !(text.starts_with('[') && text.ends_with(']')),
            );
        }
        if cursor.at != bytes.len() {
            return Err(bad("trailing bytes after the last token"));
        }
        let first_word = ids.get("the").map_or(0, |&id| id as usize);
        #[allow(clippy::cast_precision_loss)]
        let harmonic = ((count - first_word).max(2) as f64).ln() + 0.577;
        let scales = meaningful
            .iter()
            .enumerate()
            .zip(&raw_scales)
            .map(|((id, &meaningful), &scale)| {
                if !meaningful {
                    return 0.0;
                }
                // Tokens before "the" are single characters: as frequent as the most frequent word.
                #[allow(clippy::cast_precision_loss)]
                let rank = (id.saturating_sub(first_word) + 1) as f64;
                let p = 1.0 / (rank * harmonic);
                #[allow(clippy::cast_possible_truncation)]
                let weight = (SIF_A / (SIF_A + p)) as f32;
                scale * weight
            })
            .collect();
        Ok(Self {
            unknown: ids.get("[UNK]").copied(),
            first_word: u32::try_from(first_word).unwrap_or(u32::MAX),
            ids,
            rows,
            scales,
            width,
            name: name.to_owned(),
        })
    }

    /// The vectors' length.
    pub fn dims(&self) -> usize {
        self.width
    }

    /// The model name stored with the vectors.
    pub fn model_name(&self) -> &str {
        &self.name
    }

    /// `text`'s WordPiece token ids (BERT uncased; no `[CLS]` or `[SEP]`): what [`Self::embed`]
    /// sums the rows of.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.tokenize(text, &mut ids, &mut String::new());
        ids
    }

    /// A word's place among the vocabulary's words by frequency (`the` is 1), when the word is
    /// one token of the vocabulary; `None` when WordPiece splits it or does not know it (a rarer
    /// word than any ranked one).
    pub fn word_rank(&self, word: &str) -> Option<u32> {
        match self.token_ids(word)[..] {
            [id] if Some(id) != self.unknown && id >= self.first_word => {
                Some(id - self.first_word + 1)
            }
            _ => None,
        }
    }

    /// One unit-length vector per text. A text with no token that carries meaning (empty, or
    /// punctuation alone) gets the unknown token's row, so that every vector is a direction.
    pub fn embed(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        let mut ids = Vec::new();
        let mut piece = String::new();
        texts
            .iter()
            .map(|text| {
                ids.clear();
                self.tokenize(text, &mut ids, &mut piece);
                let mut sum = vec![0f32; self.width];
                for &id in &ids {
                    let scale = self.scales[id as usize];
                    if scale != 0.0 {
                        for (s, &q) in sum.iter_mut().zip(self.row(id)) {
                            *s += f32::from(q) * scale;
                        }
                    }
                }
                if !normalize(&mut sum) {
                    sum.fill(0.0);
                    if let Some(unknown) = self.unknown {
                        for (s, &q) in sum.iter_mut().zip(self.row(unknown)) {
                            *s = f32::from(q);
                        }
                    }
                    if !normalize(&mut sum) {
                        sum[0] = 1.0;
                    }
                }
                sum
            })
            .collect()
    }

    /// Token `id`'s components, unscaled.
    fn row(&self, id: u32) -> &[i8] {
        let at = id as usize * self.width;
        &self.rows[at..at + self.width]
    }

    /// BERT's uncased basic tokenizer (control characters dropped, accents stripped, lower case,
    /// split on whitespace and punctuation, each CJK ideograph a word), then WordPiece's greedy
    /// longest match; a word with no match is the unknown token.
    fn tokenize(&self, text: &str, ids: &mut Vec<u32>, piece: &mut String) {
        let mut word = String::new();
        for c in text.nfd() {
            let dropped = matches!(
                c,
                '\0' | '\u{fffd}' | '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}'
                    | '\u{feff}'
            );
            if dropped || is_combining_mark(c) || (c.is_control() && !c.is_whitespace()) {
                continue;
            }
            if c.is_whitespace() {
                self.word_pieces(&word, ids, piece);
                word.clear();
            } else if is_punctuation(c) || is_cjk(c) {
                self.word_pieces(&word, ids, piece);
                word.clear();
                let mut one = [0u8; 4];
                self.word_pieces(c.encode_utf8(&mut one), ids, piece);
            } else {
                word.extend(c.to_lowercase());
            }
        }
        self.word_pieces(&word, ids, piece);
    }

    fn word_pieces(&self, word: &str, ids: &mut Vec<u32>, piece: &mut String) {
        if word.is_empty() {
            return;
        }
        if word.chars().count() > MAX_WORD_CHARS {
            ids.extend(self.unknown);
            return;
        }
        let found = ids.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut hit = None;
            while end > start {
                if word.is_char_boundary(end) {
                    piece.clear();
                    if start > 0 {
                        piece.push_str("##");
                    }
                    piece.push_str(&word[start..end]);
                    if let Some(&id) = self.ids.get(piece.as_str()) {
                        hit = Some(id);
                        break;
                    }
                }
                end -= 1;
            }
            match hit {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(found);
                    ids.extend(self.unknown);
                    return;
                }
            }
        }
    }
}

/// BERT's punctuation: the ASCII symbols, and Unicode's punctuation (general category P) in the
/// blocks chat text uses — Latin-1's, General Punctuation's, CJK's and the full-width forms.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '\u{a1}' | '\u{a7}' | '\u{ab}' | '\u{b6}' | '\u{b7}' | '\u{bb}' | '\u{bf}'
                | '\u{2010}'..='\u{2027}'
                | '\u{2030}'..='\u{2043}'
                | '\u{2045}'..='\u{2051}'
                | '\u{2053}'..='\u{205e}'
                | '\u{3001}'..='\u{3003}'
                | '\u{3008}'..='\u{3011}'
                | '\u{3014}'..='\u{301f}'
                | '\u{ff01}'..='\u{ff03}'
                | '\u{ff05}'..='\u{ff0a}'
                | '\u{ff0c}'..='\u{ff0f}'
                | '\u{ff1a}'..='\u{ff1b}'
                | '\u{ff1f}'..='\u{ff20}'
        )
}

/// CJK ideographs, which BERT's tokenizer makes words of their own.
fn is_cjk(c: char) -> bool {
    matches!(
        c,
        '\u{4e00}'..='\u{9fff}'
            | '\u{3400}'..='\u{4dbf}'
            | '\u{20000}'..='\u{2a6df}'
            | '\u{2a700}'..='\u{2b73f}'
            | '\u{2b740}'..='\u{2b81f}'
            | '\u{2b820}'..='\u{2ceaf}'
            | '\u{f900}'..='\u{faff}'
            | '\u{2f800}'..='\u{2fa1f}'
    )
}

/// Scales `v` to unit length; false when it is (nearly) zero.
fn normalize(v: &mut [f32]) -> bool {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm.is_nan() || norm <= 1e-12 {
        return false;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    true
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn f32(&mut self) -> Option<f32> {
        Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn the_builtin_table_loads_and_embeds_unit_vectors() {
        let e = StaticEmbedder::builtin().unwrap();
        assert_eq!(e.dims(), 64);
        assert!(e.scales.len() > 30_000);
        for v in e.embed(&["I moved to Lisbon last spring.", "", "?!", "Zzzzqqq"]) {
            assert_eq!(v.len(), 64);
            let norm = dot(&v, &v).sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        }
    }

    #[test]
    fn wordpiece_splits_as_bert_does() {
        let e = StaticEmbedder::builtin().unwrap();
        let mut ids = Vec::new();
        let mut piece = String::new();
        e.tokenize("Unaffable, isn't it?", &mut ids, &mut piece);
        let tokens: Vec<&str> = ids
            .iter()
            .map(|&id| {
                e.ids
                    .iter()
                    .find(|(_, v)| **v == id)
                    .map(|(k, _)| &**k)
                    .unwrap()
            })
            .collect();
        assert_eq!(
            tokens,
            ["una", "##ffa", "##ble", ",", "isn", "'", "t", "it", "?"]
        );
    }

    #[test]
    fn a_word_ranks_by_frequency_when_it_is_one_token() {
        let e = StaticEmbedder::builtin().unwrap();
        assert_eq!(e.word_rank("the"), Some(1));
        assert_eq!(e.word_rank("The"), Some(1));
        let (house, trombone) = (
            e.word_rank("house").unwrap(),
            e.word_rank("trombone").unwrap(),
        );
        assert!(house < trombone, "house {house}, trombone {trombone}");
        assert_eq!(e.word_rank("unaffable"), None, "split into pieces");
        assert_eq!(e.word_rank("two words"), None);
        assert_eq!(e.word_rank(""), None);
    }

    #[test]
    fn meaning_is_closer_than_unrelated_text() {
        let e = StaticEmbedder::builtin().unwrap();
        let v = e.embed(&[
            "What kind of job does she have?",
            "She works as a nurse at the hospital.",
            "The weather was rainy on the weekend.",
        ]);
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]));
    }

    #[test]
    fn a_bad_table_is_refused_with_its_reason() {
        let err = StaticEmbedder::from_bytes(b"nope", "t").unwrap_err();
        assert!(err.to_string().contains("t"), "{err}");
        let mut bytes = STATIC_MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.push(b'a');
        let err = StaticEmbedder::from_bytes(&bytes, "t").unwrap_err();
        assert!(err.to_string().contains("truncated at token 0"), "{err}");
    }
}
