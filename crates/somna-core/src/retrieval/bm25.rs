//! Okapi BM25 (k1 = 1.2, b = 0.75): the one scoring formula, used over the store's inverted index
//! and, for small in-memory collections, by [`top_k`].

use std::collections::{HashMap, HashSet};

use super::analyze;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// What BM25 needs to know about the collection a term is scored in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Collection {
    /// Documents in the collection.
    pub docs: u64,
    /// Their mean length in terms.
    pub avg_len: f64,
}

impl Collection {
    /// A collection of `docs` documents with `total_len` terms in all.
    pub fn new(docs: u64, total_len: u64) -> Self {
        Collection {
            docs,
            avg_len: if docs == 0 {
                1.0
            } else {
                (total_len as f64 / docs as f64).max(1.0)
            },
        }
    }

    /// The inverse document frequency of a term found in `df` documents (always positive).
    pub fn idf(&self, df: u64) -> f64 {
        let n = self.docs.max(df) as f64;
        let d = df as f64;
        ((n - d + 0.5) / (d + 0.5) + 1.0).ln()
    }

    /// A term's contribution to a document's score: it occurs `tf` times in a document of `len`
    /// terms, and its idf is `idf`.
    pub fn term_score(&self, idf: f64, tf: u32, len: u32) -> f64 {
        let f = f64::from(tf);
        let norm = 1.0 - B + B * f64::from(len) / self.avg_len;
        idf * f * (K1 + 1.0) / (f + K1 * norm)
    }
}

/// One scored hit: the document's index in the input and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub index: usize,
    pub score: f64,
}

/// Scores `docs` against `query` and returns the best `k` with a positive score, best first
/// (ties keep the later document first: newer is more relevant). For small collections held in
/// memory (an agent's facts); the archive is searched through the store's index.
pub fn top_k<S: AsRef<str>>(query: &str, docs: &[S], k: usize) -> Vec<Hit> {
    let query_terms: HashSet<String> = analyze::terms(query).into_iter().collect();
    if query_terms.is_empty() || docs.is_empty() || k == 0 {
        return Vec::new();
    }
    let analyzed: Vec<(HashMap<String, u32>, u32)> = docs
        .iter()
        .map(|d| analyze::document_terms(d.as_ref(), None))
        .collect();
    let total: u64 = analyzed.iter().map(|(_, len)| u64::from(*len)).sum();
    let collection = Collection::new(analyzed.len() as u64, total);
    let idf: HashMap<&str, f64> = query_terms
        .iter()
        .map(|t| {
            let df = analyzed.iter().filter(|(c, _)| c.contains_key(t)).count();
            (t.as_str(), collection.idf(df as u64))
        })
        .collect();
    let mut hits: Vec<Hit> = analyzed
        .iter()
        .enumerate()
        .filter_map(|(index, (counts, len))| {
            let score: f64 = idf
                .iter()
                .filter_map(|(t, idf)| {
                    counts
                        .get(*t)
                        .map(|&tf| collection.term_score(*idf, tf, *len))
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
    fn variants_match_through_the_stemmer() {
        let docs = [
            "We volunteer at the animal shelter",
            "The bakery sells bread",
        ];
        let hits = top_k("Which shelters did she volunteer at?", &docs, 2);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].index, 0);
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let c = Collection::new(1_000, 10_000);
        assert!(c.idf(1) > c.idf(100));
        assert!(c.idf(1_000) > 0.0);
        // A longer document scores a term lower.
        assert!(c.term_score(1.0, 1, 5) > c.term_score(1.0, 1, 50));
    }
}
