//! somna-testkit (placeholder)
