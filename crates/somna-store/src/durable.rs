//! Group commit: waiting until everything written so far survives a process kill.
//!
//! sled 0.34 commits a write to an in-memory log buffer; the write survives a kill (and power loss)
//! only once the log is flushed (written and fsynced). (The Postgres backend's commits are durable
//! when they return, so its flush has nothing to do and a wait resolves at once.) [`Store::durable`] returns a future that
//! resolves once a flush that *started after the call* has finished, so every write that completed
//! before the call is on disk when it resolves.
//!
//! One dedicated thread (`somna-flush`, started on first use) does the flushing. It waits for the
//! first waiter, takes every other waiter queued at that moment, runs ONE flush and answers them
//! all; waiters that arrive during that flush are served by the next one. So under load one fsync
//! serves many acknowledgements (see docs/benchmarks.md), and an idle store costs nothing. Callers
//! await a channel, so an async caller never blocks its thread on the fsync.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use futures::channel::oneshot;

use crate::error::{Result, StorageError, StoreError};
use crate::store::Store;

/// Why a flush did not make the waiters' writes durable.
#[derive(Debug, Clone)]
pub(crate) enum FlushFailure {
    /// The storage engine's flush failed.
    Engine(StorageError),
    /// The store was dropped before the flush (sled's own flush on drop cannot be reported).
    Closed,
}

impl From<FlushFailure> for StoreError {
    fn from(failure: FlushFailure) -> Self {
        match failure {
            FlushFailure::Engine(e) => StoreError::Storage(e),
            FlushFailure::Closed => StoreError::Closed,
        }
    }
}

/// What a waiter is answered.
type Answer = std::result::Result<(), FlushFailure>;

/// The function that flushes: the backend's `flush` in the store, a gated stand-in in unit tests.
type FlushFn = dyn Fn() -> Answer + Send + Sync;

/// The group-commit queue of one store.
pub(crate) struct GroupCommit {
    /// The queue to the flusher thread, created with the thread on first use.
    queue: Mutex<Option<mpsc::Sender<oneshot::Sender<Answer>>>>,
    /// Shared with the thread.
    shared: Arc<Shared>,
}

struct Shared {
    flush: Box<FlushFn>,
    /// Flushes run by the thread.
    flushes: AtomicU64,
    /// Waiters answered by the thread.
    served: AtomicU64,
}

/// Counters of the group commit since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupCommitStats {
    /// Flushes run for waiters.
    pub flushes: u64,
    /// Waiters answered; `served / flushes` is the mean group size.
    pub served: u64,
}

impl GroupCommit {
    pub(crate) fn new(flush: impl Fn() -> Answer + Send + Sync + 'static) -> Self {
        GroupCommit {
            queue: Mutex::new(None),
            shared: Arc::new(Shared {
                flush: Box::new(flush),
                flushes: AtomicU64::new(0),
                served: AtomicU64::new(0),
            }),
        }
    }

    /// Queues a waiter now (not when the future is first polled) and returns its answer.
    pub(crate) fn wait(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let queued = {
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            let sender = queue.get_or_insert_with(|| self.spawn());
            sender.send(tx).is_ok()
        };
        async move {
            if !queued {
                return Err(StoreError::Closed);
            }
            match rx.await {
                Ok(answer) => answer.map_err(StoreError::from),
                // The thread is gone (it panicked): nothing vouches for the write.
                Err(oneshot::Canceled) => Err(StoreError::Closed),
            }
        }
    }

    pub(crate) fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            flushes: self.shared.flushes.load(Ordering::Relaxed),
            served: self.shared.served.load(Ordering::Relaxed),
        }
    }

    fn spawn(&self) -> mpsc::Sender<oneshot::Sender<Answer>> {
        let (tx, rx) = mpsc::channel::<oneshot::Sender<Answer>>();
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("somna-flush".to_string())
            .spawn(move || {
                // Ends when the store (which owns the queue's sender) is dropped.
                while let Ok(first) = rx.recv() {
                    let mut batch = vec![first];
                    batch.extend(rx.try_iter());
                    let answer = (shared.flush)();
                    if let Err(failure) = &answer {
                        tracing::error!(
                            ?failure,
                            waiters = batch.len(),
                            "group commit flush failed"
                        );
                    }
                    shared.flushes.fetch_add(1, Ordering::Relaxed);
                    shared
                        .served
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    for waiter in batch {
                        // A waiter that gave up (its future was dropped) needs no answer.
                        let _ = waiter.send(answer.clone());
                    }
                }
            });
        if let Err(e) = spawned {
            // Without the thread every wait fails (its receiver is dropped with the closure).
            tracing::error!(error = %e, "cannot start the group-commit flusher thread");
        }
        tx
    }
}

impl Store {
    /// Waits until every write that completed before this call survives a process kill and power
    /// loss (group commit: one flush serves every waiter queued when it starts).
    ///
    /// The waiter is queued when this is called; awaiting only collects the answer, and never blocks
    /// the caller's thread on the fsync. Fails with [`StoreError::Storage`] when the flush fails, and
    /// with [`StoreError::Closed`] when the store was dropped first.
    pub fn durable(&self) -> impl Future<Output = Result<()>> + Send + 'static {
        self.inner.group.wait()
    }

    /// The group commit's counters (flushes run for [`Store::durable`] waiters, waiters served).
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        self.inner.group.stats()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::mpsc as std_mpsc;
    use std::time::Duration;

    use futures::executor::block_on;

    use super::*;

    /// A flush that reports its start and then waits for the test to release it.
    fn gated() -> (
        GroupCommit,
        std_mpsc::Receiver<()>,
        std_mpsc::SyncSender<Answer>,
    ) {
        let (started_tx, started_rx) = std_mpsc::channel();
        let (release_tx, release_rx) = std_mpsc::sync_channel::<Answer>(0);
        let release_rx = Mutex::new(release_rx);
        let group = GroupCommit::new(move || {
            started_tx.send(()).unwrap();
            release_rx.lock().unwrap().recv().unwrap()
        });
        (group, started_rx, release_tx)
    }

    const WAIT: Duration = Duration::from_secs(10);

    /// Runs flush 1 of a [`gated`] group with `queued` waiters arriving during it, and returns
    /// them once flush 2 (theirs) has started.
    fn queued_during_flush_1<'a>(
        group: &'a GroupCommit,
        started: &std_mpsc::Receiver<()>,
        release: &std_mpsc::SyncSender<Answer>,
        queued: usize,
    ) -> Vec<impl Future<Output = Result<()>> + use<'a>> {
        let first = group.wait();
        started.recv_timeout(WAIT).unwrap();
        let later: Vec<_> = (0..queued).map(|_| group.wait()).collect();
        release.send(Ok(())).unwrap();
        block_on(first).unwrap();
        started.recv_timeout(WAIT).unwrap();
        later
    }

    #[test]
    fn one_flush_serves_every_waiter_queued_while_the_previous_one_ran() {
        // Three waiters arrive during flush 1 and must wait for flush 2.
        let (group, started, release) = gated();
        let later = queued_during_flush_1(&group, &started, &release, 3);
        assert_eq!(
            group.stats(),
            GroupCommitStats {
                flushes: 1,
                served: 1
            }
        );
        release.send(Ok(())).unwrap();
        for wait in later {
            block_on(wait).unwrap();
        }
        assert_eq!(
            group.stats(),
            GroupCommitStats {
                flushes: 2,
                served: 4
            }
        );
    }

    #[test]
    fn a_waiter_is_not_answered_by_a_flush_that_started_before_it() {
        let (group, started, release) = gated();
        let first = group.wait();
        started.recv_timeout(WAIT).unwrap();
        let mut second = Box::pin(group.wait());
        release.send(Ok(())).unwrap();
        block_on(first).unwrap();
        // Flush 2 has started (for `second`) but not finished: `second` is still pending.
        started.recv_timeout(WAIT).unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(second.as_mut().poll(&mut cx).is_pending());
        release.send(Ok(())).unwrap();
        block_on(second).unwrap();
    }

    #[test]
    fn a_failed_flush_fails_every_waiter_it_served() {
        let (group, started, release) = gated();
        let later = queued_during_flush_1(&group, &started, &release, 2);
        release
            .send(Err(FlushFailure::Engine(StorageError::new(
                crate::error::StorageErrorKind::Other,
                std::io::Error::other("disk full"),
            ))))
            .unwrap();
        for wait in later {
            let err = block_on(wait).unwrap_err();
            assert!(matches!(err, StoreError::Storage(_)), "{err:?}");
            assert!(err.to_string().contains("disk full"), "{err}");
        }
    }
}
