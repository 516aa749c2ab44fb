//! The compact binary values of the derived trees (`terms`, `vectors`): LEB128 varints behind a
//! format byte, written by [`put_varint`] and read by [`Reader`], whose errors name the tree and
//! the key.

use crate::error::{Result, StoreError};

/// Appends `n` as an unsigned LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads one value of a derived tree, failing with an error that names the tree and the key.
pub(crate) struct Reader<'a> {
    tree: &'static str,
    /// How the tree's keys are shown in errors.
    render: fn(&[u8]) -> String,
    key: &'a [u8],
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes` (the value of `key` in `tree`), which must start with `format`
    /// (`what` names the format in the error: "postings", "vectors").
    pub(crate) fn new(
        tree: &'static str,
        what: &str,
        format: u8,
        render: fn(&[u8]) -> String,
        key: &'a [u8],
        bytes: &'a [u8],
    ) -> Result<Self> {
        let reader = Reader {
            tree,
            render,
            key,
            bytes,
            pos: 1,
        };
        match bytes.first() {
            Some(&f) if f == format => Ok(reader),
            Some(&version) => Err(reader.malformed(&format!(
                "has {what} format {version}, this build reads format {format}"
            ))),
            None => Err(reader.malformed("is empty")),
        }
    }

    /// The next varint.
    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(self.malformed("ends inside a number"));
            };
            self.pos += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(self.malformed("has a number longer than 64 bits"))
    }

    /// The next number of an ascending list stored as gaps: `prev` plus the next varint (`what`
    /// names the number in the error when the sum is past `u64`).
    pub(crate) fn next_after(&mut self, prev: u64, what: &str) -> Result<u64> {
        let gap = self.varint()?;
        prev.checked_add(gap)
            .ok_or_else(|| self.malformed(&format!("has {what} past u64")))
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| self.malformed("ends early"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// How many bytes are left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// Fails unless the whole value was read (`what` names what should have been last).
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(self.malformed(&format!("has bytes after its {what}")))
        }
    }

    /// The error for this value: the tree, the key, and `why`.
    pub(crate) fn malformed(&self, why: &str) -> StoreError {
        StoreError::Malformed {
            tree: self.tree,
            key: (self.render)(self.key),
            reason: why.to_string(),
        }
    }
}
