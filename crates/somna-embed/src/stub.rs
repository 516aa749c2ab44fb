//! The embedder of a build without the `candle` feature: it cannot be loaded.

use std::convert::Infallible;
use std::path::Path;

use crate::EmbedError;

/// The in-process sentence embedder. This build has none: [`LocalEmbedder::load`] always answers
/// [`EmbedError::NotBuilt`], so no value of this type exists.
#[derive(Debug)]
pub struct LocalEmbedder {
    never: Infallible,
}

impl LocalEmbedder {
    /// Always [`EmbedError::NotBuilt`]: rebuild with the `candle` feature.
    pub fn load(_dir: &Path) -> Result<Self, EmbedError> {
        Err(EmbedError::NotBuilt)
    }

    /// The length of an embedding.
    pub fn dims(&self) -> usize {
        match self.never {}
    }

    /// The model's name.
    pub fn model_name(&self) -> &str {
        match self.never {}
    }

    /// Embeds each text.
    pub fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.never {}
    }
}
