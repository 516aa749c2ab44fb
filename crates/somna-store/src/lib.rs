//! somna-store (placeholder)
