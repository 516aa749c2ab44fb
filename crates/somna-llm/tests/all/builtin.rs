//! The builtin provider through the `LlmClient` trait: every purpose, determinism, usage.

use std::sync::Arc;

use somna_core::config::{CompactionConfig, LlmConfig, Provider, SectionCaps, ToolSpec};
use somna_core::{JournalEntry, SourceType, Timestamp};
use somna_llm::builtin::JOURNAL_TOOL;
use somna_llm::{
    BuiltinClient, ChatMessage, ChatRequest, ChatResponse, LlmClient, Purpose, build_client,
    prompts,
};
use somna_testkit::transcript_200;
use somna_text::extractive::{Section, StructuredSummary, summarize};
use somna_text::transcript::Turn;
use somna_text::{cite, estimate_tokens};

fn builtin() -> Arc<dyn LlmClient> {
    let cfg = LlmConfig {
        provider: Provider::Builtin,
        model: "builtin".into(),
        base_url: String::new(),
        api_key_env: String::new(),
        timeout: std::time::Duration::from_secs(1),
        max_retries: 0,
        max_concurrent: 1,
        ..LlmConfig::default()
    };
    build_client(&cfg, &|_| None).unwrap()
}

/// A compaction config with the default prompt, `caps` and `max_tokens`.
fn compaction(caps: SectionCaps, max_tokens: u32) -> CompactionConfig {
    CompactionConfig {
        sections: caps,
        summary_max_tokens: max_tokens,
        ..CompactionConfig::default()
    }
}

/// A journal entry as the store hands it to consolidation and reflection.
fn entry(id: u64, text: &str) -> JournalEntry {
    let mut e = JournalEntry::new(Timestamp(1), SourceType::Observation, 5, text);
    e.id = id;
    e
}

fn journal_tool() -> ToolSpec {
    ToolSpec {
        name: JOURNAL_TOOL.into(),
        description: "Write a note in your journal".into(),
        parameters: r#"{"type":"object","properties":{"content":{"type":"string"},"importance":{"type":"integer"}}}"#.into(),
    }
}

/// The builtin model's answer when Mara says `said`, with `tools` offered.
async fn mara_says(said: &str, tools: Vec<ToolSpec>) -> ChatResponse {
    builtin()
        .chat(chat(vec![ChatMessage::user(said).with_name("Mara")], tools))
        .await
        .unwrap()
}

fn chat(messages: Vec<ChatMessage>, tools: Vec<ToolSpec>) -> ChatRequest {
    let mut all = vec![ChatMessage::system(
        "You are Wren, the steward of Millbrook. Speak warmly.",
    )];
    all.extend(messages);
    ChatRequest::new("npc", all).with_tools(tools)
}

#[tokio::test]
async fn summarize_requests_get_the_extractive_summary() {
    let messages = transcript_200().unwrap();
    let caps = SectionCaps::default();
    let request = prompts::summary_request("npc", &compaction(caps, 1500), &messages);
    let response = builtin().chat(request.clone()).await.unwrap();
    let turns: Vec<Turn> = messages.iter().map(Turn::from).collect();
    let expected = summarize(&turns, &caps, 1500, &estimate_tokens);
    // The request has a structured form, so the answer is JSON; the reader renders it to exactly
    // the text of the plain answer.
    assert_eq!(response.text, prompts::summary_json(&expected));
    assert_eq!(prompts::read_summary(&response.text), expected.render());
    assert_eq!(response.attempts, 1);
    assert_eq!(response.model, "npc");
    let usage = response.usage.unwrap();
    let prompt: u32 = request
        .messages_for(true)
        .iter()
        .map(|m| estimate_tokens(&m.content))
        .sum();
    assert_eq!(usage.prompt_tokens, prompt);
    assert_eq!(usage.completion_tokens, estimate_tokens(&response.text));
    // With structured output off, the plain form gets the rendered text.
    let plain = BuiltinClient::new()
        .with_structured_output(false)
        .chat(request)
        .await
        .unwrap();
    assert_eq!(plain.text, expected.render());
    assert_eq!(StructuredSummary::parse(&plain.text), expected);
}

#[tokio::test]
async fn caps_named_in_the_instructions_are_honoured() {
    let messages = transcript_200().unwrap();
    let caps = SectionCaps {
        topic_arc: 120,
        decisions: 90,
        pending: 80,
        user_facts: 60,
        artifacts: 30,
    };
    let response = builtin()
        .chat(prompts::summary_request(
            "npc",
            &compaction(caps, 600),
            &messages,
        ))
        .await
        .unwrap();
    let text = prompts::read_summary(&response.text);
    let summary = StructuredSummary::parse(&text);
    for section in Section::ALL {
        let tokens = estimate_tokens(&cite::strip_all(&summary.section_body(section)));
        assert!(tokens <= section.cap(&caps), "{section:?}: {tokens}");
        assert!(!summary.items(section).is_empty(), "{section:?} empty");
    }
    assert!(estimate_tokens(&cite::strip_all(&text)) <= 600);
}

#[tokio::test]
async fn a_custom_counter_is_used_for_caps() {
    // A counter that says every character is a token: the same caps hold far less text.
    let client = BuiltinClient::with_counter(Arc::new(|s: &str| s.chars().count() as u32));
    let messages = transcript_200().unwrap();
    let response = client
        .chat(prompts::summary_request(
            "npc",
            &compaction(SectionCaps::default(), 1500),
            &messages,
        ))
        .await
        .unwrap();
    let text = prompts::read_summary(&response.text);
    assert!(text.chars().count() <= 1500, "{}", text.chars().count());
}

#[tokio::test]
async fn chat_greets_in_persona_and_deterministically() {
    let request = chat(
        vec![ChatMessage::user("Hello there!").with_name("Mara")],
        vec![journal_tool()],
    );
    let first = builtin().chat(request.clone()).await.unwrap();
    let second = builtin().chat(request).await.unwrap();
    assert_eq!(first.text, second.text);
    assert!(first.text.contains("Mara"), "{}", first.text);
    assert!(first.text.contains("Wren"), "{}", first.text);
    assert!(first.tool_calls.is_empty());
}

#[tokio::test]
async fn replies_vary_with_the_input() {
    let mut seen = std::collections::BTreeSet::new();
    for said in [
        "The weather is fine today.",
        "The mill wheel creaks again.",
        "Bread smells good this morning.",
        "The river is high after the rain.",
        "Children are playing near the well.",
    ] {
        let r = builtin()
            .chat(chat(vec![ChatMessage::user(said)], vec![]))
            .await
            .unwrap();
        assert!(!r.text.is_empty());
        seen.insert(r.text);
    }
    assert!(seen.len() >= 4, "{seen:?}");
}

#[tokio::test]
async fn notable_news_becomes_a_journal_note_only_when_the_tool_is_offered() {
    let said = "My name is Mara Fenwick and I am allergic to walnuts.";
    let with_tool = mara_says(said, vec![journal_tool()]).await;
    assert_eq!(with_tool.text, "");
    assert_eq!(with_tool.tool_calls.len(), 1);
    let call = &with_tool.tool_calls[0];
    assert_eq!(call.name, JOURNAL_TOOL);
    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    assert_eq!(args["content"], format!("Mara told me: {said}"));
    let importance = args["importance"].as_u64().unwrap();
    assert!((6..=10).contains(&importance), "{importance}");

    let without = mara_says(said, vec![]).await;
    assert!(without.tool_calls.is_empty());
    assert!(!without.text.is_empty());

    // Small talk is not noted, even with the tool offered.
    let small = builtin()
        .chat(chat(
            vec![ChatMessage::user("Nice weather.")],
            vec![journal_tool()],
        ))
        .await
        .unwrap();
    assert!(small.tool_calls.is_empty());
}

#[tokio::test]
async fn after_a_tool_result_it_answers_in_text() {
    let said = "I am moving to Eastmere next spring with my daughter Pip.";
    let first = mara_says(said, vec![journal_tool()]).await;
    let call = first.tool_calls[0].clone();
    let request = chat(
        vec![
            ChatMessage::user(said).with_name("Mara"),
            ChatMessage::assistant_calls("", vec![call.clone()]),
            ChatMessage::tool_result(call.id.clone(), r#"{"ok":true,"entry_id":3}"#),
        ],
        vec![journal_tool()],
    );
    let answer = builtin().chat(request).await.unwrap();
    assert!(answer.tool_calls.is_empty());
    assert!(answer.text.contains("Mara"), "{}", answer.text);
    assert!(
        answer.text.contains("written that down") || answer.text.contains("Noted"),
        "{}",
        answer.text
    );
}

#[tokio::test]
async fn questions_are_answered_from_summaries_in_the_context() {
    let summary = StructuredSummary {
        user_facts: vec!["Mara: My name is Mara Fenwick.".into()],
        decisions: vec![
            "assistant: We decided the Harvest Festival will be held on the 14th of Brightmoon."
                .into(),
        ],
        ..Default::default()
    };
    let context = vec![
        ChatMessage::system(format!("[CONTEXT SUMMARY]\n{}", summary.render())),
        ChatMessage::user("What is my name?"),
    ];
    let r = builtin().chat(chat(context, vec![])).await.unwrap();
    assert_eq!(r.text, "You're Mara Fenwick, of course.");

    let context = vec![
        ChatMessage::system(format!("[CONTEXT SUMMARY]\n{}", summary.render())),
        ChatMessage::user("When is the Harvest Festival held?"),
    ];
    let r = builtin().chat(chat(context, vec![])).await.unwrap();
    assert!(r.text.contains("14th of Brightmoon"), "{}", r.text);

    let r = builtin()
        .chat(chat(
            vec![ChatMessage::user(
                "Who stole the silver bell from the tower?",
            )],
            vec![],
        ))
        .await
        .unwrap();
    assert!(!r.text.contains("14th"), "{}", r.text);
}

#[tokio::test]
async fn extraction_consolidation_scores_and_reflections() {
    let messages = transcript_200().unwrap();
    let facts = builtin()
        .chat(prompts::extract_request("npc", &messages))
        .await
        .unwrap();
    let facts = prompts::fact_lines(&facts.text);
    assert!(
        facts.iter().any(|f| f.contains("allergic to walnuts")),
        "{facts:?}"
    );
    assert!(
        facts.iter().any(|f| f.contains("14th of Brightmoon")),
        "{facts:?}"
    );

    let entries = vec![
        entry(1, "Mara Fenwick is allergic to walnuts."),
        entry(2, "Mara Fenwick is allergic to walnuts!"),
        entry(3, "ok"),
        entry(
            4,
            "Captain Hale doubled the night patrols on the North Pasture road because of wolves.",
        ),
    ];
    let consolidated = builtin()
        .chat(prompts::consolidate_request("npc", &entries))
        .await
        .unwrap();
    let prompts::Consolidation::Facts(facts) = prompts::parse_consolidation(&consolidated.text)
    else {
        panic!("{}", consolidated.text)
    };
    assert_eq!(
        facts.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
        vec![
            "Mara Fenwick is allergic to walnuts.",
            "Captain Hale doubled the night patrols on the North Pasture road because of wolves."
        ]
    );

    let low = builtin()
        .chat(prompts::score_request("npc", "ok thanks"))
        .await
        .unwrap();
    let high = builtin()
        .chat(prompts::score_request(
            "npc",
            "We decided Mara Fenwick will run the bakery at the Old Mill.",
        ))
        .await
        .unwrap();
    let (low, high) = (
        prompts::parse_score(&low.text).unwrap(),
        prompts::parse_score(&high.text).unwrap(),
    );
    assert_eq!(low, 1);
    assert!(high >= 6, "{high}");

    let reflection = builtin()
        .chat(prompts::reflect_request("npc", "You are Wren.", &entries))
        .await
        .unwrap();
    assert!(
        reflection.text.starts_with("Reflection: "),
        "{}",
        reflection.text
    );
    assert!(
        reflection.text.contains("Mara Fenwick"),
        "{}",
        reflection.text
    );
    assert_eq!(
        builtin()
            .chat(
                ChatRequest::new("npc", vec![ChatMessage::user("- ok")])
                    .with_purpose(Purpose::Consolidate)
            )
            .await
            .unwrap()
            .text,
        "(none)"
    );
}

#[tokio::test]
async fn merge_requests_fold_partial_summaries() {
    let messages = transcript_200().unwrap();
    let caps = SectionCaps::default();
    let turns: Vec<Turn> = messages.iter().map(Turn::from).collect();
    let first = summarize(&turns[..100], &caps, 1500, &estimate_tokens);
    let second = summarize(&turns[100..], &caps, 1500, &estimate_tokens);
    let request = prompts::merge_request(
        "npc",
        &compaction(caps, 1500),
        &[first.render(), second.render()],
    );
    let merged = StructuredSummary::parse(&prompts::read_summary(
        &builtin().chat(request).await.unwrap().text,
    ));
    // Items of both parts survive, in order, without speaker labels doubled.
    let decisions = merged.section_body(Section::Decisions);
    for key in ["14th of Brightmoon", "naming the bakery the Copper Kettle"] {
        assert!(decisions.contains(key), "{key} missing from {decisions}");
    }
    assert!(decisions.find("14th of Brightmoon") < decisions.find("Copper Kettle"));
    assert!(!decisions.contains("user: assistant:"), "{decisions}");
    for section in Section::ALL {
        assert!(
            estimate_tokens(&cite::strip_all(&merged.section_body(section))) <= section.cap(&caps),
            "{section:?}"
        );
    }
}
