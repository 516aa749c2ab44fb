//! Timing a turn's work where it runs: what [`TurnStats`](crate::stats::TurnStats) records.
//!
//! A turn's work is a few synchronous spans on a few threads (the input's append on the agent's
//! Arbiter, the tick that starts the step, the step's polls on the job pool, the Arbiter's
//! handling of its outcome); each span is timed by the monotonic clock, which reads in about
//! 20 ns without entering the kernel. A span's time is the CPU time it took, plus whatever time
//! its thread was preempted or blocked inside it, so it bounds the turn's CPU from above. (A
//! thread's CPU clock would count only the CPU, but reading it is a system call: at about ten
//! reads a turn it cost about a tenth of a turn here.)

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `fut` to its output, with the time its polls took summed over whichever threads polled
/// it (what it waited for in between is not in it).
pub(crate) async fn timed_polls<F: Future>(fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut spent = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let polled = fut.as_mut().poll(cx);
        spent += started.elapsed();
        polled
    })
    .await;
    (output, spent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_is_charged_for_its_polls_and_not_for_its_waits() {
        let (tx, rx) = futures::channel::oneshot::channel::<()>();
        let waiter = std::thread::spawn(move || {
            futures::executor::block_on(timed_polls(async move {
                std::thread::sleep(Duration::from_millis(20));
                rx.await.unwrap();
                std::thread::sleep(Duration::from_millis(20));
                7
            }))
        });
        // The future waits at least 300 ms on the channel between its two spans of work.
        std::thread::sleep(Duration::from_millis(300));
        tx.send(()).unwrap();
        let (out, spent) = waiter.join().unwrap();
        assert_eq!(out, 7);
        assert!(spent >= Duration::from_millis(40), "{spent:?}");
        assert!(spent < Duration::from_millis(300), "{spent:?}");
    }
}
