//! The recorded history: one [`Event`] per line, as a campaign's clients and
//! workers write it, and [`parse_jsonl`] to read it back. Owns the vocabulary
//! of operations; knows nothing of the final state or of the properties.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an event says about its operation, in Jepsen's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The client is about to send the operation.
    Invoke,
    /// The operation was acknowledged: it happened.
    Ok,
    /// A typed refusal: the operation certainly did not happen.
    Fail,
    /// Unknown outcome (a timeout, a reset, a 5xx): it may or may not have
    /// happened, now or later.
    Info,
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            EventKind::Invoke => "invoke",
            EventKind::Ok => "ok",
            EventKind::Fail => "fail",
            EventKind::Info => "info",
        })
    }
}

/// An operation and its value. An invoke carries what the client sent; an
/// `ok` carries what the server answered too (the run a submit created, the
/// sequence numbers a read returned). Serialized with its name in `"f"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Op {
    /// Submit a run under an idempotency key; the `ok` names the run.
    Submit {
        /// The idempotency key the client chose.
        key: String,
        /// The run the server acknowledged (absent on the invoke).
        run: Option<String>,
    },
    /// Answer a wait (a person's decision).
    Answer {
        /// The wait's id.
        wait: String,
        /// The decision sent.
        decision: String,
    },
    /// Send a signal to a run.
    Signal {
        /// The run signalled.
        run: String,
        /// The signal's name.
        name: String,
        /// The client's id for this signal (deduplication).
        id: String,
    },
    /// Read a run's events from the start; the `ok` lists their sequence
    /// numbers in the order returned.
    ReadEvents {
        /// The run read.
        run: String,
        /// The sequence numbers returned (empty on the invoke).
        #[serde(default)]
        seqs: Vec<u64>,
    },
    /// A worker's claim of a run, acknowledged with a lease epoch. Workers
    /// may record the `ok` alone: the epoch is only known then.
    Claim {
        /// The run claimed.
        run: String,
        /// The lease epoch granted.
        epoch: u64,
        /// The worker that holds the lease.
        owner: String,
    },
    /// A worker's commit of a step under the lease it holds.
    Commit {
        /// The run committed to.
        run: String,
        /// The step's index.
        step: u32,
        /// The lease epoch the commit was fenced on.
        epoch: u64,
        /// The worker committing.
        owner: String,
    },
}

/// The name of an operation, without its value: what the operation counts
/// and the vacuous rule group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpType {
    /// [`Op::Submit`].
    Submit,
    /// [`Op::Answer`].
    Answer,
    /// [`Op::Signal`].
    Signal,
    /// [`Op::ReadEvents`].
    ReadEvents,
    /// [`Op::Claim`].
    Claim,
    /// [`Op::Commit`].
    Commit,
}

impl fmt::Display for OpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            OpType::Submit => "submit",
            OpType::Answer => "answer",
            OpType::Signal => "signal",
            OpType::ReadEvents => "read_events",
            OpType::Claim => "claim",
            OpType::Commit => "commit",
        })
    }
}

impl Op {
    /// The operation's name.
    pub fn op_type(&self) -> OpType {
        match self {
            Op::Submit { .. } => OpType::Submit,
            Op::Answer { .. } => OpType::Answer,
            Op::Signal { .. } => OpType::Signal,
            Op::ReadEvents { .. } => OpType::ReadEvents,
            Op::Claim { .. } => OpType::Claim,
            Op::Commit { .. } => OpType::Commit,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Submit { key, run: None } => write!(f, "submit key={key}"),
            Op::Submit {
                key,
                run: Some(run),
            } => write!(f, "submit key={key} run={run}"),
            Op::Answer { wait, decision } => write!(f, "answer wait={wait} decision={decision}"),
            Op::Signal { run, name, id } => write!(f, "signal run={run} name={name} id={id}"),
            Op::ReadEvents { run, seqs } => write!(f, "read_events run={run} seqs={seqs:?}"),
            Op::Claim { run, epoch, owner } => {
                write!(f, "claim run={run} epoch={epoch} owner={owner}")
            }
            Op::Commit {
                run,
                step,
                epoch,
                owner,
            } => {
                write!(
                    f,
                    "commit run={run} step={step} epoch={epoch} owner={owner}"
                )
            }
        }
    }
}

/// One line of a history. A process does one operation at a time: its
/// invoke, then that operation's `ok`, `fail` or `info`. Concurrent actors
/// (every step a worker runs at once) need process numbers of their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The client or worker task that recorded it.
    pub process: u32,
    /// Invoke, or how the operation ended.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The operation and its value.
    pub op: Op,
    /// When it was recorded, in nanoseconds on the campaign's one clock.
    pub time_ns: u64,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (time, process, kind, op) = (self.time_ns, self.process, self.kind, &self.op);
        write!(f, "{time:>14} ns  p{process:<4} {kind:<6} {op}")
    }
}

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A line is not one JSON event.
    #[error("history line {line}: not an event: {source}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What the JSON decoder said.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads a history written as JSON lines, one [`Event`] a line; blank lines
/// are skipped. The first line that is not an event is the error.
pub fn parse_jsonl(text: &str) -> Result<Vec<Event>, Error> {
    let mut events = vec![];
    for (at, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(line).map_err(|source| Error::Line {
            line: at + 1,
            source,
        })?;
        events.push(event);
    }
    Ok(events)
}

/// Writes a history as JSON lines, the form [`parse_jsonl`] reads.
pub fn to_jsonl(events: &[Event]) -> String {
    let mut out = String::new();
    for event in events {
        // An `Event` holds only strings and integers: it always serializes.
        if let Ok(line) = serde_json::to_string(event) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
