//! A small fixed corpus for token-counting tests and the `tokens` benchmark: English prose, a chat
//! turn, Chinese, Japanese, Russian, German, Rust code, a JSON tool result and a mixed sample.
//!
//! The texts were written for Somna (no third-party text). somna-core's tests pin the o200k/cl100k
//! counts of each sample (computed with independent tokenizers, see its `tests/tokens.rs`) and
//! measure the heuristic's error on them; its benchmark repeats them to ~100 KB.

/// English prose: a narrative paragraph and an expository one.
pub const ENGLISH: &str = "\
The village of Hollowmere wakes before the sun. Marta the baker lights her oven at four, and by \
the time the first cart rattles over the bridge the smell of rye bread has reached the mill. The \
miller, a quiet man named Oswin, claims he can tell the weather by the way the flour settles in \
the sacks; nobody believes him, but nobody argues either, because he has been right more often \
than the almanac. Children run errands between the stalls, carrying messages that are usually \
true and occasionally improved. When the bell in the square rings seven, the market is already \
loud with bargaining, gossip and the complaints of a goat that does not want to be sold.

Long-running conversational agents face a simple arithmetic problem: every turn adds text, but \
the model's context window does not grow. A system that hosts thousands of such agents must \
decide, for each of them, which parts of the past to keep verbatim, which to condense, and which \
to move out of the prompt entirely while keeping them searchable. Counting tokens accurately is \
the first step, because every later decision (when to compact, how much to preserve, whether a \
summary actually saved anything) depends on that number being right, or at least on being wrong \
in a predictable direction.
";

/// A typical short chat turn from a user to an NPC, about 200 bytes.
pub const CHAT_TURN: &str = "Hey Marta, did Oswin say anything about the storm tonight? I need to \
know whether to bring the sheep in early, and whether the bridge will still be open tomorrow \
morning for the market cart.";

/// Simplified Chinese prose.
pub const CHINESE: &str = "\
霍洛米尔村在太阳升起之前就醒了。面包师玛尔塔凌晨四点点燃烤炉，等第一辆马车驶过石桥时，黑麦面包的香味已经飘到了磨坊。\
磨坊主奥斯温是个沉默寡言的人，他说自己能从面粉在袋子里沉降的样子看出天气；没有人相信他，但也没有人反驳，因为他猜对的次数比历书还多。\
长期运行的对话代理面临一个简单的算术问题：每一轮对话都会增加文本，但模型的上下文窗口不会变大。\
因此，系统必须为每个代理决定哪些内容逐字保留，哪些内容压缩成摘要，哪些内容移出提示词但仍然可以检索。\
";

/// Japanese prose (kanji, hiragana and katakana).
pub const JAPANESE: &str = "\
ホロウミア村は日の出前に目を覚ます。パン屋のマルタは午前四時にかまどに火を入れ、最初の荷車が橋を渡るころには、\
ライ麦パンの香りが水車小屋まで届いている。粉屋のオズウィンは、袋の中で粉が沈む様子で天気がわかると言うが、誰も信じていない。\
長く動き続ける会話エージェントには単純な問題がある。発言のたびに文章は増えるが、モデルのコンテキストは広がらないのだ。\
";

/// Russian prose (Cyrillic, two bytes per letter in UTF-8).
pub const RUSSIAN: &str = "\
Деревня Холлоумир просыпается раньше солнца. Пекарша Марта растапливает печь в четыре часа утра, \
и к тому времени, когда первая телега прогрохочет по мосту, запах ржаного хлеба уже доходит до \
мельницы. Мельник Освин уверяет, что может предсказать погоду по тому, как оседает мука в мешках; \
никто ему не верит, но никто и не спорит, потому что он ошибается реже, чем календарь. Агентам, \
которые работают месяцами, приходится решать, что помнить дословно, а что пересказать кратко.
";

/// German prose (Latin script with umlauts and long compounds).
pub const GERMAN: &str = "\
Das Dorf Hollowmere erwacht vor der Sonne. Die Bäckerin Marta heizt um vier Uhr den Ofen an, und \
wenn der erste Karren über die Brücke rumpelt, ist der Duft des Roggenbrots schon bis zur Mühle \
gezogen. Der Müller behauptet, er könne das Wetter daran erkennen, wie sich das Mehl in den \
Säcken setzt. Langlebige Gesprächsagenten brauchen eine zuverlässige Kontextfensterverwaltung, \
sonst überschreitet die Eingabeaufforderung früher oder später die Höchstlänge des Modells.
";

/// Rust source code.
pub const RUST_CODE: &str = r#"/// Moves the cut so that an assistant message with tool calls keeps its results.
pub fn adjust_cut(history: &[Message], mut cut: usize) -> usize {
    while cut > 0 && cut < history.len() {
        let before = &history[cut - 1];
        let after = &history[cut];
        if after.role == Role::Tool || (before.has_tool_calls() && after.tool_call_id.is_some()) {
            cut -= 1;
        } else {
            break;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_pairs_whole() {
        let h = vec![Message::user("hi"), Message::assistant_calls("", vec![])];
        assert_eq!(super::adjust_cut(&h, 1), 1);
    }
}
"#;

/// A JSON tool result, as a tool message would carry it.
pub const JSON_TOOL_RESULT: &str = r#"{"location":"Hollowmere","forecast":[{"hour":18,"temp_c":11.5,"wind_kph":34,"condition":"heavy rain","precip_mm":7.2},{"hour":21,"temp_c":9.0,"wind_kph":51,"condition":"storm","precip_mm":14.8},{"hour":24,"temp_c":8.1,"wind_kph":47,"condition":"storm","precip_mm":11.3}],"warnings":["bridge may close after 22:00","keep livestock indoors"],"source":"village-almanac-v2","generated_at":"2026-11-03T17:42:09Z"}"#;

/// A mixed sample: English with Chinese names and phrases, an emoji, a number table and a URL.
pub const MIXED: &str = "\
User 李小龙 asked the innkeeper: 今天晚上还有空房间吗？ The innkeeper answered in English: \
\"Two rooms left, 45 silver each 🍺, breakfast included.\" Later the guest wrote in the ledger: \
入住 2 晚，房间 7 号，已付 90 银币。See https://example.com/hollowmere/inn?room=7&nights=2 for the map.
| item    | qty | price |
|---------|-----|-------|
| 面包    |  3  |  1.50 |
| 麦酒 🍺 |  2  |  4.00 |
";

/// Every sample with a short name, in a fixed order.
pub const SAMPLES: &[(&str, &str)] = &[
    ("english", ENGLISH),
    ("chat_turn", CHAT_TURN),
    ("chinese", CHINESE),
    ("japanese", JAPANESE),
    ("russian", RUSSIAN),
    ("german", GERMAN),
    ("rust_code", RUST_CODE),
    ("json_tool_result", JSON_TOOL_RESULT),
    ("mixed", MIXED),
];

/// `text` repeated (separated by newlines) until it is at least `bytes` long.
pub fn repeat_to(text: &str, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + text.len() + 1);
    while out.len() < bytes {
        out.push_str(text);
        out.push('\n');
    }
    out
}

/// About `bytes` of mixed text: all the samples in turn, repeated.
pub fn mixed_text(bytes: usize) -> String {
    let all: Vec<&str> = SAMPLES.iter().map(|(_, text)| *text).collect();
    repeat_to(&all.join("\n"), bytes)
}
