//! `somna eval recall --embed-cache DIR`: the vectors of every text the evaluation embeds, kept
//! on disk per model, so that measuring the same dataset again (another window, another fusion)
//! does not embed it again. An in-process model such as all-mpnet-base-v2 takes minutes per
//! dataset on a small machine; the prompts the evaluation builds are the same with or without the
//! cache (the vectors are the model's, byte for byte).
//!
//! The file `DIR/<model>.vectors` holds records of: the text's length in bytes (u32, little
//! endian), the text, the vector's length (u32), the floats (f32, little endian). New vectors are
//! appended after each call; a record cut short by a crash is ignored when the file is read.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures::future::BoxFuture;
use somna_llm::{EmbedError, Embedder};

/// An [`Embedder`] that answers from its file what was embedded before and asks `inner` the rest.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    path: PathBuf,
    known: Mutex<HashMap<String, Vec<f32>>>,
}

impl fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("inner", &self.inner)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl CachedEmbedder {
    /// Wraps `inner` with the cache in `dir` (created if missing), reading what it holds.
    pub fn open(inner: Arc<dyn Embedder>, dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the embedding cache {}", dir.display()))?;
        let name: String = inner
            .model()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{name}.vectors"));
        let known = match File::open(&path) {
            Ok(file) => {
                let (known, whole) = read_records(file).with_context(|| {
                    format!("cannot read the embedding cache {}", path.display())
                })?;
                // A record torn by a crash is cut off, so that appends follow whole ones.
                let file = OpenOptions::new().write(true).open(&path)?;
                if file.metadata()?.len() > whole {
                    file.set_len(whole)?;
                }
                known
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot open the embedding cache {}", path.display())
                });
            }
        };
        Ok(Self {
            inner,
            path,
            known: Mutex::new(known),
        })
    }

    fn append(&self, new: &[(String, Vec<f32>)]) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        for (text, vector) in new {
            let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
            bytes.extend_from_slice(&len(text.len()));
            bytes.extend_from_slice(text.as_bytes());
            bytes.extend_from_slice(&len(vector.len()));
            for x in vector {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?
            .write_all(&bytes)
    }
}

/// Every whole record of a cache file, and where the last one ends; a record cut short at the
/// end is left out.
fn read_records(file: File) -> std::io::Result<(HashMap<String, Vec<f32>>, u64)> {
    let mut reader = BufReader::new(file);
    let mut out = HashMap::new();
    let mut whole = 0u64;
    let mut word = [0u8; 4];
    loop {
        if read_exact_or_end(&mut reader, &mut word)?.is_none() {
            return Ok((out, whole));
        }
        let mut text = vec![0u8; u32::from_le_bytes(word) as usize];
        if read_exact_or_end(&mut reader, &mut text)?.is_none()
            || read_exact_or_end(&mut reader, &mut word)?.is_none()
        {
            return Ok((out, whole));
        }
        let mut floats = vec![0u8; u32::from_le_bytes(word) as usize * 4];
        if read_exact_or_end(&mut reader, &mut floats)?.is_none() {
            return Ok((out, whole));
        }
        whole += (8 + text.len() + floats.len()) as u64;
        let Ok(text) = String::from_utf8(text) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a text is not UTF-8: not an embedding cache",
            ));
        };
        let vector = floats
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        out.insert(text, vector);
    }
}

/// Fills `buf`, or `None` if the file ends first.
fn read_exact_or_end(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<Option<()>> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

impl Embedder for CachedEmbedder {
    fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let missing: Vec<String> = {
                let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
                let mut seen = std::collections::HashSet::new();
                texts
                    .iter()
                    .filter(|t| !known.contains_key(*t) && seen.insert(t.as_str()))
                    .cloned()
                    .collect()
            };
            if !missing.is_empty() {
                let vectors = self.inner.embed(missing.clone()).await?;
                let new: Vec<(String, Vec<f32>)> = missing.into_iter().zip(vectors).collect();
                self.append(&new).map_err(|e| {
                    EmbedError::Local(format!(
                        "cannot write the embedding cache {}: {e}",
                        self.path.display()
                    ))
                })?;
                self.known
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(new);
            }
            let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            texts
                .iter()
                .map(|t| {
                    known.get(t).cloned().ok_or_else(|| {
                        EmbedError::Malformed(format!("no vector for a text of {} bytes", t.len()))
                    })
                })
                .collect()
        })
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Embeds a text as its length and counts the texts it was asked for.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    impl Embedder for Counting {
        fn embed(&self, texts: Vec<String>) -> BoxFuture<'_, Result<Vec<Vec<f32>>, EmbedError>> {
            self.0.fetch_add(texts.len(), Ordering::Relaxed);
            Box::pin(async move { Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect()) })
        }
        fn model(&self) -> &str {
            "count/er"
        }
    }

    /// One run: a cache in `dir` over a fresh [`Counting`] embeds `texts`; the vectors it
    /// returned and how many texts reached the embedder.
    async fn run(dir: &Path, texts: &[&str]) -> (Vec<Vec<f32>>, usize) {
        let counting = Arc::new(Counting::default());
        let cache = CachedEmbedder::open(counting.clone(), dir).unwrap_or_else(|e| panic!("{e}"));
        let texts = texts.iter().map(|s| (*s).to_owned()).collect();
        let got = cache.embed(texts).await.unwrap_or_default();
        (got, counting.0.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn a_second_run_embeds_nothing_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (got, embedded) = run(dir.path(), &["a", "bcd", "a"]).await;
        assert_eq!(got, vec![vec![1.0, 1.0], vec![3.0, 1.0], vec![1.0, 1.0]]);
        assert_eq!(embedded, 2, "a repeated text is embedded once");

        // A crash in the middle of an append leaves a torn record behind.
        let file = dir.path().join("count_er.vectors");
        let mut f = OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap_or_else(|e| panic!("{e}"));
        f.write_all(&[9, 0, 0, 0, b'x'])
            .unwrap_or_else(|e| panic!("{e}"));

        let (got, embedded) = run(dir.path(), &["bcd", "a", "ef"]).await;
        assert_eq!(got, vec![vec![3.0, 1.0], vec![1.0, 1.0], vec![2.0, 1.0]]);
        assert_eq!(embedded, 1, "only the new text");

        // What was appended after the torn record was cut off reads back whole.
        let (got, embedded) = run(dir.path(), &["ef", "a"]).await;
        assert_eq!(got, vec![vec![2.0, 1.0], vec![1.0, 1.0]]);
        assert_eq!(embedded, 0);
    }
}
