//! The real embedder: candle's BERT on the CPU, tokenized by `tokenizers`.

use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use crate::mpnet::{MpNetConfig, MpNetModel};
use crate::{CONFIG_FILE, DEFAULT_MODEL_NAME, EmbedError, MAX_TOKENS, MODEL_FILE, TOKENIZER_FILE};

/// Texts run through the model this many at a time; [`LocalEmbedder::embed`] takes any number.
const BATCH: usize = 32;
/// A batch is cut before padding would exceed one token in this many.
const PADDING_SHARE: usize = 10;

/// MiniLM-L6-H384's BERT configuration (that of all-MiniLM-L6-v2), for a directory without
/// `config.json`.
const MINILM_L6_CONFIG: &str = r#"{
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "model_type": "bert"
}"#;

/// The network a model directory holds, told apart by its `config.json`'s `model_type`.
enum Encoder {
    /// BERT: all-MiniLM-L6-v2 (the default) and other BERT sentence-transformers.
    Bert(BertModel),
    /// MPNet: all-mpnet-base-v2.
    MpNet(MpNetModel),
}

impl Encoder {
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::Bert(model) => model.forward(ids, &ids.zeros_like()?, Some(mask)),
            Self::MpNet(model) => model.forward(ids, mask),
        }
    }

    fn device(&self) -> &Device {
        match self {
            Self::Bert(model) => &model.device,
            Self::MpNet(model) => model.device(),
        }
    }
}

/// What `config.json` says of the network, whichever its architecture.
struct Shape {
    hidden_size: usize,
    max_position_embeddings: usize,
    vocab_size: usize,
    pad_token_id: usize,
}

/// The architecture a `config.json` names: BERT's or MPNet's configuration.
enum ModelConfig {
    Bert(Config),
    MpNet(MpNetConfig),
}

impl ModelConfig {
    fn parse(text: &str) -> Result<Self, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Kind {
            model_type: Option<String>,
        }
        let kind: Kind = serde_json::from_str(text)?;
        match kind.model_type.as_deref() {
            Some("mpnet") => serde_json::from_str(text).map(Self::MpNet),
            _ => serde_json::from_str(text).map(Self::Bert),
        }
    }

    fn shape(&self) -> Shape {
        match self {
            Self::Bert(c) => Shape {
                hidden_size: c.hidden_size,
                max_position_embeddings: c.max_position_embeddings,
                vocab_size: c.vocab_size,
                pad_token_id: c.pad_token_id,
            },
            // MPNet's positions start after the pad id: two fewer tokens fit than it has positions.
            Self::MpNet(c) => Shape {
                hidden_size: c.hidden_size,
                max_position_embeddings: c
                    .max_position_embeddings
                    .saturating_sub(c.pad_token_id + 1),
                vocab_size: c.vocab_size,
                pad_token_id: c.pad_token_id,
            },
        }
    }
}

/// An in-process sentence embedder: a sentence-transformer (all-MiniLM-L6-v2 by default, BERT or
/// MPNet such as all-mpnet-base-v2) on the CPU.
///
/// Loaded once with [`LocalEmbedder::load`], then shared: it is `Send + Sync` and
/// [`LocalEmbedder::embed`] takes `&self`.
pub struct LocalEmbedder {
    model: Encoder,
    tokenizer: Tokenizer,
    name: String,
    dims: usize,
    max_tokens: usize,
    pad_id: u32,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_name", &self.name)
            .field("dims", &self.dims)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`: `model.safetensors` and `tokenizer.json` must be there;
    /// `config.json` is read when present (MiniLM-L6's configuration otherwise). The model's name
    /// is the directory's. Reads about 90 MB; nothing is fetched from anywhere.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let weights_path = dir.join(MODEL_FILE);
        let tokenizer_path = dir.join(TOKENIZER_FILE);
        let config_path = dir.join(CONFIG_FILE);
        require_file(&weights_path)?;
        require_file(&tokenizer_path)?;

        let config = match std::fs::read_to_string(&config_path) {
            Ok(text) => ModelConfig::parse(&text).map_err(|e| bad(&config_path, e))?,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                ModelConfig::parse(MINILM_L6_CONFIG).map_err(|e| bad(&config_path, e))?
            }
            Err(e) => return Err(bad(&config_path, e)),
        };
        let shape = config.shape();
        if shape.hidden_size == 0 || shape.max_position_embeddings < 2 {
            return Err(bad(
                &config_path,
                "hidden_size and max_position_embeddings must be positive",
            ));
        }

        let max_tokens = MAX_TOKENS.min(shape.max_position_embeddings);
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| bad(&tokenizer_path, e))?;
        // Padding is done here, per batch; the file's own settings (all-MiniLM-L6-v2's cut at 128
        // tokens) give way to `max_tokens`.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| bad(&tokenizer_path, e))?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab > shape.vocab_size {
            return Err(bad(
                &tokenizer_path,
                format!(
                    "the tokenizer has {vocab} tokens but the model's vocabulary only {}: \
                     they are not of the same model",
                    shape.vocab_size
                ),
            ));
        }

        let bytes = std::fs::read(&weights_path).map_err(|e| bad(&weights_path, e))?;
        let vb = VarBuilder::from_slice_safetensors(&bytes, DType::F32, &Device::Cpu)
            .map_err(|e| bad(&weights_path, e))?;
        let model = match &config {
            ModelConfig::Bert(c) => BertModel::load(vb, c).map(Encoder::Bert),
            ModelConfig::MpNet(c) => MpNetModel::load(vb, c).map(Encoder::MpNet),
        }
        .map_err(|e| bad(&weights_path, e))?;

        let name = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_path_buf())
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_MODEL_NAME)
            .to_owned();
        Ok(Self {
            model,
            tokenizer,
            name,
            dims: shape.hidden_size,
            max_tokens,
            pad_id: u32::try_from(shape.pad_token_id).unwrap_or(0),
        })
    }

    /// The length of an embedding: 384 for all-MiniLM-L6-v2.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The model's name: its directory's (`all-MiniLM-L6-v2` as `scripts/local-embedder.sh` lays
    /// it out).
    pub fn model_name(&self) -> &str {
        &self.name
    }

    /// Embeds each text, in order: unit-length vectors of [`LocalEmbedder::dims`] floats (mean of
    /// the token states over the attention mask, L2-normalized). A text longer than
    /// [`crate::MAX_TOKENS`] tokens is cut. Texts of similar length are run together, up to
    /// [`BATCH`] at a time and with little padding.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Tokenize {
                reason: e.to_string(),
            })?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());

        let mut out = vec![Vec::new(); encodings.len()];
        let mut start = 0;
        while start < order.len() {
            let end = batch_end(&order, start, |i| encodings[i].len());
            let chunk = &order[start..end];
            start = end;
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            let vectors = self.run(&batch).map_err(|e| EmbedError::Inference {
                reason: e.to_string(),
            })?;
            for (&i, vector) in chunk.iter().zip(vectors) {
                out[i] = vector;
            }
        }
        Ok(out)
    }

    /// `text`'s token ids as the model's tokenizer gives them, without special tokens (to check
    /// other tokenizers of the same vocabulary against).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EmbedError::Tokenize {
                reason: e.to_string(),
            })
    }

    /// Each token of the vocabulary run alone through the model, as `[CLS] token [SEP]`: the
    /// token's text and its unit-length sentence embedding, in id order. This is what a static
    /// embedding table is distilled from (`examples/distill.rs`, model2vec's method).
    pub fn embed_vocabulary(&self) -> Result<Vec<(String, Vec<f32>)>, EmbedError> {
        let special = |name: &str| {
            self.tokenizer
                .token_to_id(name)
                .ok_or_else(|| EmbedError::Tokenize {
                    reason: format!("the tokenizer has no {name} token"),
                })
        };
        // The tokens the model's tokenizer puts around a text: BERT's `[CLS]`/`[SEP]`, MPNet's
        // `<s>`/`</s>` (its vocabulary keeps BERT's names as ordinary tokens).
        let (cls, sep) = match self.model {
            Encoder::Bert(_) => (special("[CLS]")?, special("[SEP]")?),
            Encoder::MpNet(_) => (special("<s>")?, special("</s>")?),
        };
        let size = u32::try_from(self.tokenizer.get_vocab_size(true)).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(size as usize);
        let ids: Vec<u32> = (0..size).collect();
        for chunk in ids.chunks(BATCH * 8) {
            let rows: Vec<Vec<u32>> = chunk.iter().map(|&id| vec![cls, id, sep]).collect();
            let rows: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
            let vectors = self.run_ids(&rows).map_err(|e| EmbedError::Inference {
                reason: e.to_string(),
            })?;
            for (&id, vector) in chunk.iter().zip(vectors) {
                let token = self.tokenizer.id_to_token(id).unwrap_or_default();
                out.push((token, vector));
            }
        }
        Ok(out)
    }

    /// One forward pass over a batch, padded to its longest text.
    fn run(&self, batch: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let rows: Vec<&[u32]> = batch.iter().map(|e| e.get_ids()).collect();
        self.run_ids(&rows)
    }

    /// One forward pass over rows of token ids, each padded to the longest (the attention mask
    /// covers each row's own ids).
    fn run_ids(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let rows = batch.len();
        let width = batch.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![self.pad_id; rows * width];
        let mut mask = vec![0u32; rows * width];
        for (row, row_ids) in batch.iter().enumerate() {
            let start = row * width;
            ids[start..start + row_ids.len()].copy_from_slice(row_ids);
            mask[start..start + row_ids.len()].fill(1);
        }
        let device = self.model.device();
        let ids = Tensor::from_vec(ids, (rows, width), device)?;
        let mask = Tensor::from_vec(mask, (rows, width), device)?;

        let hidden = self.model.forward(&ids, &mask)?; // (rows, width, dims)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (rows, width, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (rows, dims)
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (rows, 1)
        let mean = summed.broadcast_div(&counts)?;
        // As torch.nn.functional.normalize: divide by max(‖v‖, 1e-12).
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }
}

/// Where the batch that starts at `order[start]` ends: at most [`BATCH`] texts, and no more than
/// one token in [`PADDING_SHARE`] of padding to the batch's longest (`order` runs from shortest to
/// longest). On the CPU a batch saves little over one text at a time, while padding costs in full.
fn batch_end(order: &[usize], start: usize, len: impl Fn(usize) -> usize) -> usize {
    let mut real = len(order[start]);
    let mut end = start + 1;
    while end < order.len() && end - start < BATCH {
        let longest = len(order[end]);
        let padded = longest * (end - start + 1);
        if (padded - (real + longest)) * PADDING_SHARE > padded {
            break;
        }
        real += longest;
        end += 1;
    }
    end
}

/// `path` must be a file: a missing one (or a missing directory) is named in the error.
fn require_file(path: &Path) -> Result<(), EmbedError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(bad(path, "not a regular file")),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(EmbedError::MissingFile {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(bad(path, e)),
    }
}

fn bad(path: &Path, reason: impl fmt::Display) -> EmbedError {
    EmbedError::BadFile {
        path: PathBuf::from(path),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_names_the_weights_file() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let dir = root.path().join("no-such-model");
        let err = LocalEmbedder::load(&dir).err();
        let Some(EmbedError::MissingFile { path }) = &err else {
            panic!("expected MissingFile, got {err:?}");
        };
        assert_eq!(path, &dir.join(MODEL_FILE));
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("model.safetensors"), "{message}");
        assert!(message.contains("scripts/local-embedder.sh"), "{message}");
    }

    #[test]
    fn a_missing_tokenizer_is_named() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::write(root.path().join(MODEL_FILE), b"x").unwrap_or_else(|e| panic!("{e}"));
        let err = LocalEmbedder::load(root.path()).err();
        assert!(
            matches!(&err, Some(EmbedError::MissingFile { path }) if path.ends_with(TOKENIZER_FILE)),
            "{err:?}"
        );
    }

    #[test]
    fn bad_files_are_named() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let write = |name: &str, body: &[u8]| {
            std::fs::write(root.path().join(name), body).unwrap_or_else(|e| panic!("{e}"));
        };
        write(MODEL_FILE, b"not safetensors");
        write(TOKENIZER_FILE, b"{ not json");
        write(CONFIG_FILE, b"{\"hidden_size\": \"wide\"}");
        let expect_bad = |file: &str| {
            let err = LocalEmbedder::load(root.path()).err();
            match &err {
                Some(EmbedError::BadFile { path, .. }) if path.ends_with(file) => {}
                other => panic!("expected BadFile for {file}, got {other:?}"),
            }
            let message = err.map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(file), "{message}");
        };
        expect_bad(CONFIG_FILE);
        std::fs::remove_file(root.path().join(CONFIG_FILE)).unwrap_or_else(|e| panic!("{e}"));
        expect_bad(TOKENIZER_FILE);
    }

    #[test]
    fn batches_hold_similar_lengths() {
        let lens = [10, 10, 10, 11, 30, 30, 31, 200];
        let order: Vec<usize> = (0..lens.len()).collect();
        let mut batches = Vec::new();
        let mut start = 0;
        while start < order.len() {
            let end = batch_end(&order, start, |i| lens[i]);
            batches.push(start..end);
            start = end;
        }
        assert_eq!(batches, [0..4, 4..7, 7..8]);
        let same = vec![7; 100];
        assert_eq!(batch_end(&order_of(&same), 0, |i| same[i]), BATCH);
    }

    fn order_of(lens: &[usize]) -> Vec<usize> {
        (0..lens.len()).collect()
    }

    #[test]
    fn the_builtin_config_is_minilm_l6() {
        let Ok(ModelConfig::Bert(config)) = ModelConfig::parse(MINILM_L6_CONFIG) else {
            panic!("the builtin config is not BERT's");
        };
        assert_eq!(config.hidden_size, 384);
        assert_eq!(config.num_hidden_layers, 6);
        assert_eq!(config.num_attention_heads, 12);
        assert_eq!(config.intermediate_size, 1536);
        assert_eq!(config.vocab_size, 30522);
        assert_eq!(config.max_position_embeddings, 512);
    }
}
