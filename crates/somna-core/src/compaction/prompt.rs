//! The summary message's text: the marker line, then the summary.
//!
//! The summarizer's prompts (instructions, data notice, merge) and the check of its answer live with
//! every other prompt Somna sends, in `somna_llm::prompts`.

use crate::message::Message;

/// The content of a summary message: the marker line, then the summary text.
pub fn summary_content(text: &str) -> String {
    format!("{}\n{}", Message::SUMMARY_PREFIX, text.trim())
}

/// The summary text of a summary message's content (the inverse of [`summary_content`]).
pub fn summary_text(content: &str) -> &str {
    content
        .strip_prefix(Message::SUMMARY_PREFIX)
        .map_or(content, str::trim_start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_text_inverts_summary_content() {
        let content = summary_content("  ## Topic arc\n- swords\n");
        assert!(content.starts_with(Message::SUMMARY_PREFIX));
        assert_eq!(summary_text(&content), "## Topic arc\n- swords");
        assert_eq!(summary_text("plain"), "plain");
    }
}
