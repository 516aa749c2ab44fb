//! Taking input: appending it to history at once (or resolving a host tool call), counted and
//! checked against the agent's input limit before anything is written.

use somna_core::message::Message;
use somna_store::StoreError;

use super::Agent;
use crate::protocol::{AgentState, Inbound, InboundError};

impl Agent {
    /// Takes input: appends it to history (or resolves a tool call) at once, so nothing is lost.
    ///
    /// Input larger than the agent's input limit
    /// ([`CompactionConfig::input_limit`](somna_core::config::CompactionConfig::input_limit)) is
    /// refused with [`InboundError::TooLarge`] before anything is written, so one input can never
    /// put the agent beyond what compaction can repair.
    pub fn inbound(&mut self, input: Inbound) -> Result<(), InboundError> {
        self.inbound_via(input, None)
    }

    /// [`Agent::inbound`] of an input another node enqueued for this agent (a cluster's inbox):
    /// the inbox entry `key` is taken in the append's transaction, so the input reaches history
    /// once; an entry already delivered is skipped.
    pub fn inbound_from_inbox(&mut self, key: &[u8], input: Inbound) -> Result<(), InboundError> {
        self.inbound_via(input, Some(key))
    }

    fn inbound_via(&mut self, input: Inbound, inbox: Option<&[u8]>) -> Result<(), InboundError> {
        if input.is_blank() {
            return Err(InboundError::Empty);
        }
        let now = self.deps.clock.now();
        match input {
            Inbound::User { content, name } => {
                let mut m = Message::user(content).at(now);
                m.name = name;
                let m = self.admit(m)?;
                if self.append_counted(m, inbox)? {
                    self.needs_reply = true;
                }
            }
            Inbound::Observation { content } => {
                let m = self.admit(
                    Message::user(format!("[observation] {content}"))
                        .with_name("world")
                        .at(now),
                )?;
                if self.append_counted(m, inbox)? {
                    self.observations.push(content);
                }
            }
            Inbound::ToolResult { call_id, content } => {
                let Some(i) = self.pending_tools.iter().position(|p| p.call_id == call_id) else {
                    return Err(InboundError::UnknownToolCall(call_id));
                };
                let m = self.admit(Message::tool_result(call_id, content).at(now))?;
                if !self.append_counted(m, inbox)? {
                    return Ok(());
                }
                self.pending_tools.remove(i);
                if self.pending_tools.is_empty() {
                    self.needs_reply = true;
                    if self.state == AgentState::WaitingForTools {
                        self.set_state(AgentState::Idle);
                    }
                }
            }
        }
        self.note_usage();
        Ok(())
    }

    pub(super) fn append(&self, mut m: Message) -> Result<Message, StoreError> {
        m.tokens = self.counter.count_message(&m);
        self.deps.store.append(&self.id, m, self.deps.clock.now())
    }

    /// Counts an input message and checks it against the input limit; the counted message (its
    /// `tokens` set) when it fits.
    fn admit(&self, mut m: Message) -> Result<Message, InboundError> {
        m.tokens = self.counter.count_message(&m);
        let tokens = self
            .counter
            .calibrated(u64::from(m.tokens), &self.calibration);
        let limit = self.config.compaction.input_limit();
        if tokens > u64::from(limit) {
            return Err(InboundError::TooLarge { tokens, limit });
        }
        Ok(m)
    }

    /// Appends a message [`Agent::admit`] counted, taking its inbox entry when it came through the
    /// inbox; false when that entry was delivered already (nothing appended).
    fn append_counted(&self, m: Message, inbox: Option<&[u8]>) -> Result<bool, StoreError> {
        let now = self.deps.clock.now();
        match inbox {
            None => self.deps.store.append(&self.id, m, now).map(|_| true),
            Some(key) => Ok(self
                .deps
                .store
                .append_from_inbox(&self.id, key, m, now)?
                .is_some()),
        }
    }
}
