//! Keyword retrieval (BM25) for the working context and the `recall` tool.
//!
//! Small and allocation-light: documents are scored against a query with Okapi BM25 (k1 = 1.2,
//! b = 0.75) over lower-cased alphanumeric terms, with a short stop-word list. Good enough to bring
//! back the archived turn that mentions "Millbrook" when the user mentions Millbrook again.

use std::collections::{HashMap, HashSet};

const K1: f64 = 1.2;
const B: f64 = 0.75;

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "do", "for", "from", "has", "have",
    "he", "her", "his", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on",
    "or", "our", "she", "so", "that", "the", "their", "them", "then", "there", "they", "this",
    "to", "was", "we", "what", "when", "which", "who", "will", "with", "you", "your",
];

/// Splits text into lower-cased terms, dropping stop words and one-letter terms.
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.chars().count() > 1)
        .map(str::to_lowercase)
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .collect()
}

/// One scored hit: the document's index in the input and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
}

/// Scores `docs` against `query` and returns the best `k` with a positive score, best first
/// (ties keep the later document first: newer is more relevant).
pub fn top_k<S: AsRef<str>>(query: &str, docs: &[S], k: usize) -> Vec<Hit> {
    let query_terms: HashSet<String> = terms(query).into_iter().collect();
    if query_terms.is_empty() || docs.is_empty() || k == 0 {
        return Vec::new();
    }
    let tokenized: Vec<Vec<String>> = docs.iter().map(|d| terms(d.as_ref())).collect();
    let n = tokenized.len() as f64;
    let avg_len = tokenized.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for doc in &tokenized {
        let seen: HashSet<&str> = doc.iter().map(String::as_str).collect();
        for t in seen {
            if query_terms.contains(t) {
                *df.entry(t).or_default() += 1;
            }
        }
    }
    let mut hits: Vec<Hit> = tokenized
        .iter()
        .enumerate()
        .filter_map(|(index, doc)| {
            let len = doc.len() as f64;
            let mut tf: HashMap<&str, usize> = HashMap::new();
            for t in doc {
                if query_terms.contains(t) {
                    *tf.entry(t.as_str()).or_default() += 1;
                }
            }
            let score: f64 = tf
                .iter()
                .map(|(t, &f)| {
                    let d = df.get(t).copied().unwrap_or(0) as f64;
                    let idf = ((n - d + 0.5) / (d + 0.5) + 1.0).ln();
                    let f = f as f64;
                    idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                })
                .sum();
            (score > 0.0).then_some(Hit { index, score })
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.index.cmp(&a.index)));
    hits.truncate(k);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_relevant_document() {
        let docs = [
            "The weather is nice today.",
            "Aldric lost his sword near Millbrook while fighting wolves.",
            "Marta runs the inn and serves stew.",
            "Wolves were seen in the forest.",
        ];
        let hits = top_k("What happened at Millbrook with the wolves?", &docs, 2);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].index, 1);
        assert_eq!(hits[1].index, 3);
        assert!(top_k("the and of", &docs, 3).is_empty());
        assert!(top_k("dragons", &docs, 3).is_empty());
    }

    #[test]
    fn terms_drop_stop_words_and_case() {
        assert_eq!(
            terms("The Sword of Aldric, 40 gold!"),
            ["sword", "aldric", "40", "gold"]
        );
    }
}
