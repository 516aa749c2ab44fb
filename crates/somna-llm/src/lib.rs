//! somna-llm (placeholder)
