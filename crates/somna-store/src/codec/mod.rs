//! The value encoding: one format-version byte, then MessagePack with named fields.
//!
//! Named fields (`rmp_serde::to_vec_named`) cost a few bytes per value but let a later version add
//! optional fields (`#[serde(default)]`) without a migration. A change that old readers cannot
//! ignore bumps [`FORMAT_VERSION`]; docs/storage.md describes how such a migration runs.

use serde::Serialize;
use serde::de::DeserializeOwned;

use somna_core::Message;

use crate::error::{Result, StoreError};
use crate::keys;

mod message;
mod record;

pub(crate) use record::encode_record;

/// The format version this build writes and the only one it reads.
pub const FORMAT_VERSION: u8 = 1;

/// Encodes `value` for `tree`: the version byte, then named MessagePack.
pub fn encode<T: Serialize + ?Sized>(tree: &'static str, value: &T) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(128);
    encode_into(tree, value, &mut buf)?;
    Ok(buf)
}

/// [`encode`] into `buf` (cleared first), reusing its allocation.
pub fn encode_into<T: Serialize + ?Sized>(
    tree: &'static str,
    value: &T,
    buf: &mut Vec<u8>,
) -> Result<()> {
    buf.clear();
    buf.push(FORMAT_VERSION);
    rmp_serde::encode::write_named(buf, value).map_err(|cause| StoreError::Encode { tree, cause })
}

/// Decodes the value stored under `key` in `tree`, checking the version byte first.
pub fn decode<T: DeserializeOwned>(tree: &'static str, key: &[u8], bytes: &[u8]) -> Result<T> {
    let Some((&version, body)) = bytes.split_first() else {
        return Err(StoreError::EmptyValue {
            tree,
            key: keys::render(key),
        });
    };
    if version != FORMAT_VERSION {
        return Err(StoreError::UnsupportedVersion {
            tree,
            key: keys::render(key),
            version,
        });
    }
    rmp_serde::from_slice(body).map_err(|cause| StoreError::Decode {
        tree,
        key: keys::render(key),
        cause,
    })
}

/// [`decode`] for a message: the history and archive trees' values are read without serde when
/// they are in the exact form [`encode`] writes (`message::fast`, several times faster), with
/// serde otherwise. Either way the same message.
pub fn decode_message(tree: &'static str, key: &[u8], bytes: &[u8]) -> Result<Message> {
    match bytes.split_first() {
        Some((&FORMAT_VERSION, body)) => match message::fast(body) {
            Some(m) => Ok(m),
            None => decode(tree, key, bytes),
        },
        _ => decode(tree, key, bytes),
    }
}
