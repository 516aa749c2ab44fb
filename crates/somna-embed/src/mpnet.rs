//! MPNet's encoder (the architecture of all-mpnet-base-v2), which candle does not ship.
//!
//! It is BERT's encoder with three differences, all taken from Hugging Face's `modeling_mpnet.py`:
//! positions count from the padding id plus one (as in RoBERTa) and there are no token types; every
//! layer adds one shared relative-position bias (32 buckets per head, T5's bucketing) to its
//! attention scores; and the weights are named `attention.attn.{q,k,v,o}`.

use candle_core::{D, DType, Device, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, Module, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The fields of an MPNet `config.json` that the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MpNetConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
}

fn default_buckets() -> usize {
    32
}

/// Relative distances beyond this share the last bucket (MPNet's `max_distance`).
const MAX_DISTANCE: f64 = 128.0;

struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// MPNet's encoder: `forward` gives the last hidden states, `(rows, width, hidden)`.
pub(crate) struct MpNetModel {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    embeddings_norm: LayerNorm,
    relative_attention_bias: Embedding,
    layers: Vec<Layer>,
    heads: usize,
    head_dims: usize,
    buckets: usize,
    pad_id: u32,
}

impl MpNetModel {
    pub fn load(vb: VarBuilder, config: &MpNetConfig) -> Result<Self> {
        let vb = if vb.contains_tensor("mpnet.embeddings.word_embeddings.weight") {
            vb.pp("mpnet")
        } else {
            vb
        };
        let hidden = config.hidden_size;
        if config.num_attention_heads == 0 || hidden % config.num_attention_heads != 0 {
            candle_core::bail!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            );
        }
        let eps = config.layer_norm_eps;
        let emb = vb.pp("embeddings");
        let encoder = vb.pp("encoder");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let vb = encoder.pp(format!("layer.{i}"));
                let attention = vb.pp("attention");
                Ok(Layer {
                    q: linear(hidden, hidden, attention.pp("attn.q"))?,
                    k: linear(hidden, hidden, attention.pp("attn.k"))?,
                    v: linear(hidden, hidden, attention.pp("attn.v"))?,
                    o: linear(hidden, hidden, attention.pp("attn.o"))?,
                    attention_norm: layer_norm(hidden, eps, attention.pp("LayerNorm"))?,
                    intermediate: linear(
                        hidden,
                        config.intermediate_size,
                        vb.pp("intermediate.dense"),
                    )?,
                    output: linear(config.intermediate_size, hidden, vb.pp("output.dense"))?,
                    output_norm: layer_norm(hidden, eps, vb.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            word_embeddings: embedding(config.vocab_size, hidden, emb.pp("word_embeddings"))?,
            position_embeddings: embedding(
                config.max_position_embeddings,
                hidden,
                emb.pp("position_embeddings"),
            )?,
            embeddings_norm: layer_norm(hidden, eps, emb.pp("LayerNorm"))?,
            relative_attention_bias: embedding(
                config.relative_attention_num_buckets,
                config.num_attention_heads,
                encoder.pp("relative_attention_bias"),
            )?,
            layers,
            heads: config.num_attention_heads,
            head_dims: hidden / config.num_attention_heads,
            buckets: config.relative_attention_num_buckets,
            pad_id: u32::try_from(config.pad_token_id).unwrap_or(1),
        })
    }

    /// The last hidden states of `ids` (`(rows, width)`, padded with the pad id); `mask` is 1 on
    /// real tokens and 0 on padding.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (rows, width) = ids.dims2()?;
        let device = ids.device();

        // Positions as `create_position_ids_from_input_ids`: the count of real tokens so far, offset
        // by the pad id; padding keeps the pad id itself.
        let id_rows = ids.to_vec2::<u32>()?;
        let mut positions = Vec::with_capacity(rows * width);
        for row in &id_rows {
            let mut seen = 0u32;
            for &id in row {
                if id == self.pad_id {
                    positions.push(self.pad_id);
                } else {
                    seen += 1;
                    positions.push(seen + self.pad_id);
                }
            }
        }
        let positions = Tensor::from_vec(positions, (rows, width), device)?;
        let hidden =
            (self.word_embeddings.forward(ids)? + self.position_embeddings.forward(&positions)?)?;
        let mut hidden = self.embeddings_norm.forward(&hidden)?;

        // One bias for every layer: (1, heads, width, width), plus the padding mask.
        let buckets = relative_buckets(width, self.buckets);
        let buckets = Tensor::from_vec(buckets, (width, width), device)?;
        let bias = self
            .relative_attention_bias
            .forward(&buckets)? // (width, width, heads)
            .permute((2, 0, 1))?
            .unsqueeze(0)?;
        let mask = mask.to_dtype(DType::F32)?;
        let padding = ((mask.ones_like()? - &mask)? * f64::from(f32::MIN))?
            .unsqueeze(1)?
            .unsqueeze(1)?; // (rows, 1, 1, width)
        let bias = bias.broadcast_add(&padding)?.contiguous()?; // (rows, heads, width, width)

        let scale = (self.head_dims as f64).sqrt();
        for layer in &self.layers {
            let split = |x: Tensor| -> Result<Tensor> {
                x.reshape((rows, width, self.heads, self.head_dims))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let q = split(layer.q.forward(&hidden)?)?;
            let k = split(layer.k.forward(&hidden)?)?;
            let v = split(layer.v.forward(&hidden)?)?;
            let scores = ((q.matmul(&k.t()?)? / scale)? + &bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .flatten_from(D::Minus2)?;
            let attended = layer
                .attention_norm
                .forward(&(layer.o.forward(&context)? + &hidden)?)?;
            let inner = layer.intermediate.forward(&attended)?.gelu_erf()?;
            hidden = layer
                .output_norm
                .forward(&(layer.output.forward(&inner)? + &attended)?)?;
        }
        Ok(hidden)
    }

    pub fn device(&self) -> &Device {
        self.word_embeddings.embeddings().device()
    }
}

/// The bucket of every (query, key) pair of a `width`-token text, row by row: T5's bucketing as
/// MPNet's `relative_position_bucket` does it (half the buckets for keys before the query, exact
/// distances up to a quarter of them, logarithmic ones up to [`MAX_DISTANCE`]).
fn relative_buckets(width: usize, buckets: usize) -> Vec<u32> {
    let half = buckets / 2;
    let max_exact = half / 2;
    let mut out = Vec::with_capacity(width * width);
    for query in 0..width {
        for key in 0..width {
            // MPNet's n = -(key - query).
            let n = query as i64 - key as i64;
            let mut bucket = if n < 0 { half } else { 0 };
            let n = n.unsigned_abs() as usize;
            bucket += if n < max_exact {
                n
            } else {
                let scaled = (n as f64 / max_exact as f64).ln()
                    / (MAX_DISTANCE / max_exact as f64).ln()
                    * (half - max_exact) as f64;
                (max_exact + scaled as usize).min(half - 1)
            };
            out.push(u32::try_from(bucket).unwrap_or(u32::MAX));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_mpnets_bucketing() {
        // Values from transformers' `MPNetEncoder.relative_position_bucket` with 32 buckets and a
        // max distance of 128, for n = query - key.
        let bucket = |query: usize, key: usize| {
            let width = query.max(key) + 1;
            relative_buckets(width, 32)[query * width + key]
        };
        assert_eq!(bucket(0, 0), 0);
        assert_eq!(bucket(3, 0), 3); // n = 3: exact
        assert_eq!(bucket(0, 3), 19); // n = -3: 16 + 3
        assert_eq!(bucket(8, 0), 8); // n = 8: log bucket 8 + 0
        assert_eq!(bucket(20, 0), 10); // 8 + floor(ln(2.5)/ln(16)*8) = 8 + 2
        assert_eq!(bucket(0, 200), 31); // far after: 16 + 15
        assert_eq!(bucket(300, 0), 15); // far before: capped at 15
    }
}
