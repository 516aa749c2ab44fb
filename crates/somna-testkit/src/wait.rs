//! Waiting in a test for something that happens asynchronously.

use std::future::Future;
use std::time::Duration;

/// Reads with `read` every `every` until `check` holds for what it read, and returns that. Past
/// `patience` it panics with `describe` of the last read instead: a hang guard, not a timing
/// assertion.
pub async fn poll_until<T, F: Future<Output = T>>(
    patience: Duration,
    every: Duration,
    mut read: impl FnMut() -> F,
    check: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> T {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let value = read().await;
        if check(&value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            describe(&value)
        );
        tokio::time::sleep(every).await;
    }
}
