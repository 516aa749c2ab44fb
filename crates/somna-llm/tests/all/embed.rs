//! The embeddings client over real HTTP against the stub server: vectors in input order,
//! normalized, batched by `embedder.batch`, the key sent as a bearer; a server that answers too
//! few vectors, NaNs, an error status or nothing at all gives an error that says so.

use std::time::Duration;

use somna_core::config::{EmbedderProvider, EmbedderSection};
use somna_llm::embed::OpenAiEmbedder;
use somna_llm::{EmbedError, Embedder};
use somna_testkit::{Embeddings, StubLlmServer, hashed_embedding};

fn config(stub: &StubLlmServer, batch: u32) -> EmbedderSection {
    EmbedderSection {
        provider: EmbedderProvider::Openai,
        base_url: stub.base_url(),
        model: "stub-embed".into(),
        api_key_env: "SOMNA_TEST_EMBED_KEY".into(),
        batch,
        timeout: Duration::from_secs(5),
        ..EmbedderSection::default()
    }
}

fn client(stub: &StubLlmServer, batch: u32) -> OpenAiEmbedder {
    OpenAiEmbedder::from_config(&config(stub, batch), &|_| Some("sk-test".into())).unwrap()
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

#[tokio::test]
async fn vectors_come_back_in_order_normalized_and_batched() {
    let stub = StubLlmServer::start();
    let embedder = client(&stub, 2);
    let texts: Vec<String> = [
        "a puppy named Biscuit",
        "moving to Lisbon",
        "",
        "x y z",
        "Biscuit",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let vectors = embedder.embed(texts.clone()).await.unwrap();
    assert_eq!(vectors.len(), 5);
    for (text, v) in texts.iter().zip(&vectors) {
        let expected = unit(hashed_embedding(text, 64));
        assert_eq!(v.len(), 64);
        for (a, b) in v.iter().zip(&expected) {
            assert!((a - b).abs() < 1e-6, "{text}: {a} vs {b}");
        }
    }
    // Five texts, two a request: three requests, each naming the model, the key as a bearer.
    let requests = stub.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.path, "/v1/embeddings");
        assert_eq!(r.body["model"], "stub-embed");
        assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    }
    assert_eq!(requests[2].body["input"], serde_json::json!(["Biscuit"]));
    assert_eq!(embedder.model(), "stub-embed");
}

#[tokio::test]
async fn a_bad_answer_is_an_error_that_says_what_was_wrong() {
    let stub = StubLlmServer::start();
    let embedder = client(&stub, 16);
    let texts = || vec!["one".to_string(), "two".to_string()];
    stub.set_embeddings(Embeddings::OneShort);
    let e = embedder.embed(texts()).await.unwrap_err();
    assert!(
        matches!(&e, EmbedError::Malformed(m) if m.contains("1 vector(s) for 2 text(s)")),
        "{e}"
    );
    stub.set_embeddings(Embeddings::NotANumber);
    let e = embedder.embed(texts()).await.unwrap_err();
    assert!(matches!(e, EmbedError::Malformed(_)), "{e}");
    stub.set_embeddings(Embeddings::Status(503));
    let e = embedder.embed(texts()).await.unwrap_err();
    assert!(
        matches!(&e, EmbedError::Server { status: 503, excerpt, .. } if excerpt.contains("not loaded")),
        "{e}"
    );
    let url = stub.base_url();
    drop(stub);
    let gone = OpenAiEmbedder::from_config(
        &EmbedderSection {
            base_url: url,
            api_key_env: String::new(),
            ..config(&StubLlmServer::start(), 16)
        },
        &|_| None,
    )
    .unwrap();
    let e = gone.embed(texts()).await.unwrap_err();
    assert!(matches!(e, EmbedError::Request { .. }), "{e}");
    assert!(e.to_string().contains("/v1/embeddings"), "{e}");
}

#[tokio::test]
async fn a_server_slower_than_the_timeout_times_out() {
    // A listener that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = EmbedderSection {
        provider: EmbedderProvider::Openai,
        base_url: format!("http://{addr}/v1"),
        model: "m".into(),
        timeout: Duration::from_millis(300),
        ..EmbedderSection::default()
    };
    let embedder = OpenAiEmbedder::from_config(&cfg, &|_| None).unwrap();
    let e = embedder.embed(vec!["hi".into()]).await.unwrap_err();
    assert!(matches!(e, EmbedError::Timeout { .. }), "{e}");
    drop(listener);
}

/// Opt-in: a real OpenAI-compatible embeddings server (`SOMNA_REAL_EMBED_URL`, e.g. llama.cpp's
/// server started with embeddings on, and `SOMNA_REAL_EMBED_MODEL`; `SOMNA_REAL_EMBED_BATCH`
/// texts a request, default 1): one unit vector per text, of one length, the same text twice the
/// same vector, two different texts not. (llama-cpp-python 0.3's server embeds only the first
/// text of a batch right for a model without pooling, so batches of 1 are the default here.)
#[tokio::test]
async fn a_real_embeddings_server_answers_with_unit_vectors() {
    let (Ok(url), Ok(model)) = (
        std::env::var("SOMNA_REAL_EMBED_URL"),
        std::env::var("SOMNA_REAL_EMBED_MODEL"),
    ) else {
        somna_testkit::skip(
            "set SOMNA_REAL_EMBED_URL and SOMNA_REAL_EMBED_MODEL to test a real embeddings server \
             (docs/llm.md, \"Embeddings\")",
        );
        return;
    };
    let batch = std::env::var("SOMNA_REAL_EMBED_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1);
    let cfg = EmbedderSection {
        provider: EmbedderProvider::Openai,
        base_url: url,
        model,
        batch,
        timeout: Duration::from_secs(120),
        ..EmbedderSection::default()
    };
    let embedder = OpenAiEmbedder::from_config(&cfg, &|_| None).unwrap();
    let texts: Vec<String> = [
        "The cat sat on the mat",
        "A kitten was sitting on a rug",
        "Quarterly revenue rose by 4%",
        "The cat sat on the mat",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let v = embedder.embed(texts).await.unwrap();
    assert_eq!(v.len(), 4);
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for x in &v {
        assert_eq!(x.len(), v[0].len());
        assert!((cos(x, x) - 1.0).abs() < 1e-3, "not unit length");
    }
    assert!(
        cos(&v[0], &v[3]) > 0.999,
        "the same text gave another vector"
    );
    assert!(
        cos(&v[0], &v[2]) < 0.999,
        "two different texts gave one vector"
    );
    println!(
        "real embeddings: {} dimensions; cat~kitten {:.3}, cat~revenue {:.3}",
        v[0].len(),
        cos(&v[0], &v[1]),
        cos(&v[0], &v[2])
    );
}
