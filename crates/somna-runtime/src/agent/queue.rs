//! [`JobQueue`]: which of an agent's jobs runs when, decided without actix.
//!
//! An agent runs one job at a time (a step, a sleep, a compaction). A request that needs the agent
//! (sleep, compact, uncompact) while a job is in flight waits in a bounded queue and runs when the
//! job ends; a drain (retire, shutdown) stops new work and is answered once the job in flight ends.
//! The actor (`actor.rs`) asks this component and does what it says; the component never starts
//! anything itself, so it is tested with plain values.

use std::collections::VecDeque;

use tokio::sync::oneshot;

/// Most sleep/compaction requests queued behind a busy agent; beyond it they get `Busy`.
pub const MAX_DEFERRED: usize = 8;

/// What to do with a request that arrived now ([`JobQueue::admit`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission<R> {
    /// The agent is free: run the request now.
    RunNow(R),
    /// A job is in flight: the request waits and comes back from [`JobQueue::finished`].
    Queued,
    /// The agent is stopping, or [`MAX_DEFERRED`] requests already wait: answer that it is busy.
    Refused(R),
}

/// What follows the end of a job ([`JobQueue::finished`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterJob<R> {
    /// Run this queued request now (the oldest).
    Run(R),
    /// Nothing waits.
    Idle,
    /// The agent is stopping: its drain waiters have been answered, and these queued requests
    /// will never run (answer that the agent is busy).
    Stopped(Vec<R>),
}

/// The job queue of one agent: the job in flight, the requests behind it, the drain.
#[derive(Debug)]
pub(crate) struct JobQueue<R> {
    /// True while a job runs.
    in_flight: bool,
    /// Set by [`JobQueue::drain`]: no new ticks or jobs.
    stopping: bool,
    /// Drains waiting for the job in flight to end.
    drain_waiters: Vec<oneshot::Sender<()>>,
    /// Requests waiting for the job in flight, oldest first.
    deferred: VecDeque<R>,
}

impl<R> Default for JobQueue<R> {
    fn default() -> Self {
        JobQueue {
            in_flight: false,
            stopping: false,
            drain_waiters: Vec::new(),
            deferred: VecDeque::new(),
        }
    }
}

impl<R> JobQueue<R> {
    /// An empty queue, no job in flight.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when a job may start now: none is in flight and the agent is not stopping. A tick
    /// asks this; a tick that finds the agent busy does nothing.
    pub fn is_free(&self) -> bool {
        !self.in_flight && !self.stopping
    }

    /// A job started: the agent is busy until [`JobQueue::finished`].
    pub fn started(&mut self) {
        self.in_flight = true;
    }

    /// Decides what happens to a request that arrived now.
    pub fn admit(&mut self, request: R) -> Admission<R> {
        if self.stopping {
            Admission::Refused(request)
        } else if !self.in_flight {
            Admission::RunNow(request)
        } else if self.deferred.len() < MAX_DEFERRED {
            self.deferred.push_back(request);
            Admission::Queued
        } else {
            Admission::Refused(request)
        }
    }

    /// The job in flight ended (or a request that needs no job ran in place): what runs next.
    /// When the agent is stopping, the drain waiters are answered here.
    pub fn finished(&mut self) -> AfterJob<R> {
        self.in_flight = false;
        if self.stopping {
            for waiter in self.drain_waiters.drain(..) {
                let _ = waiter.send(());
            }
            return AfterJob::Stopped(self.deferred.drain(..).collect());
        }
        match self.deferred.pop_front() {
            Some(request) => AfterJob::Run(request),
            None => AfterJob::Idle,
        }
    }

    /// Stops new ticks and jobs; `waiter` is answered once no job is in flight (at once if none
    /// is).
    pub fn drain(&mut self, waiter: oneshot::Sender<()>) {
        self.stopping = true;
        if self.in_flight {
            self.drain_waiters.push(waiter);
        } else {
            let _ = waiter.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::sync::oneshot::error::TryRecvError;

    /// A queue with a job in flight and `requests` queued behind it.
    fn busy_with<R: std::fmt::Debug + PartialEq>(
        requests: impl IntoIterator<Item = R>,
    ) -> JobQueue<R> {
        let mut q = JobQueue::new();
        q.started();
        for r in requests {
            assert_eq!(q.admit(r), Admission::Queued);
        }
        q
    }

    #[test]
    fn a_free_agent_runs_a_request_at_once() {
        let mut q = JobQueue::new();
        assert!(q.is_free());
        assert_eq!(q.admit("sleep"), Admission::RunNow("sleep"));
        q.started();
        assert!(!q.is_free(), "a job is in flight");
        assert_eq!(q.finished(), AfterJob::Idle);
        assert!(q.is_free());
    }

    #[test]
    fn requests_behind_a_job_run_one_after_another_in_order() {
        let mut q = busy_with(["sleep", "compact"]);
        assert!(!q.is_free());
        assert_eq!(q.finished(), AfterJob::Run("sleep"));
        q.started();
        assert_eq!(q.finished(), AfterJob::Run("compact"));
        q.started();
        assert_eq!(q.finished(), AfterJob::Idle);
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut q = busy_with(0..MAX_DEFERRED);
        assert_eq!(q.admit(99), Admission::Refused(99));
        assert_eq!(q.finished(), AfterJob::Run(0));
        q.started();
        assert_eq!(q.admit(100), Admission::Queued, "room again");
    }

    #[test]
    fn a_drain_with_no_job_in_flight_is_answered_at_once_and_refuses_what_follows() {
        let mut q = JobQueue::<&str>::new();
        let (tx, mut rx) = oneshot::channel();
        q.drain(tx);
        assert_eq!(rx.try_recv(), Ok(()));
        assert!(q.stopping && !q.is_free(), "no tick runs any more");
        assert_eq!(q.admit("sleep"), Admission::Refused("sleep"));
    }

    #[test]
    fn a_drain_waits_for_the_job_in_flight_and_refuses_the_queued_requests() {
        let mut q = busy_with(["sleep", "compact"]);
        let (first, mut first_rx) = oneshot::channel();
        let (second, mut second_rx) = oneshot::channel();
        q.drain(first);
        q.drain(second);
        assert_eq!(
            first_rx.try_recv(),
            Err(TryRecvError::Empty),
            "the job runs on"
        );
        assert_eq!(q.admit("uncompact"), Admission::Refused("uncompact"));
        assert_eq!(q.finished(), AfterJob::Stopped(vec!["sleep", "compact"]));
        assert_eq!(first_rx.try_recv(), Ok(()));
        assert_eq!(second_rx.try_recv(), Ok(()));
        assert!(!q.is_free());
    }
}
