//! The campaign's people: clients answer the waits they find open (a
//! review: approve, edit or reject; a question: yes or no) and send the
//! signal the `asking` crew waits for, under ids of their own, each
//! recorded as an `invoke`, then `ok`, `fail` (a 4xx) or `info` as
//! submits are (`history.rs`). After healing, a [`Finisher`] answers and
//! signals the runs still waiting, recorded the same way, so that every
//! run can end.

use std::collections::BTreeSet;

use cairn_history::{EventKind, Op};
use serde_json::Value;

use super::history::{Answered, Client, Recorder};
use crate::support::Case;

/// The name of the signal the `asking` crew's `signal` step waits for.
pub const SIGNAL: &str = "go";

/// A decision on a wait, as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// A review: commit the output.
    Approve,
    /// A review: run the step again with this feedback.
    Reject(String),
    /// A review: commit this output (a JSON string) instead.
    Edit(String),
    /// A question: this answer (a JSON string).
    Answer(String),
}

impl Decision {
    /// The decision as the checker compares it: `approve`,
    /// `reject:FEEDBACK`, `edit:OUTPUT`, `answer:VALUE`, as
    /// [`decision_of`] reads a stored answer, so that two answers are the
    /// same decision exactly when Cairn sees them as the same answer (the
    /// same answer again is a no-op, another is refused).
    fn name(&self) -> String {
        match self {
            Decision::Approve => "approve".to_owned(),
            Decision::Reject(feedback) => format!("reject:{feedback}"),
            Decision::Edit(output) => format!("edit:{output}"),
            Decision::Answer(value) => format!("answer:{value}"),
        }
    }

    fn args(&self) -> Vec<String> {
        let json = |text: &str| Value::from(text).to_string();
        match self {
            Decision::Approve => vec!["--approve".to_owned()],
            Decision::Reject(feedback) => vec!["--reject".to_owned(), feedback.clone()],
            Decision::Edit(output) => vec!["--edit".to_owned(), json(output)],
            Decision::Answer(value) => vec!["--answer".to_owned(), json(value)],
        }
    }
}

/// The decision of a stored answer (`{"decision": …}`, as `waits list
/// --json` and `wait_answered` events show it), named as [`Decision::name`]
/// names a client's.
pub fn decision_of(answer: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let decision = answer["decision"].as_str()?;
    Some(match decision {
        "reject" => format!("reject:{}", text(&answer["feedback"])),
        "edit" => format!("edit:{}", text(&answer["output"])),
        "answer" => format!("answer:{}", text(&answer["value"])),
        other => other.to_owned(),
    })
}

/// An open wait as the server lists it.
#[derive(Debug, Clone)]
struct OpenWait {
    run: String,
    id: String,
    /// A question (else a review).
    question: bool,
}

/// A wait some client answered, and the decision it sent.
#[derive(Debug, Clone)]
pub struct Asked {
    wait: String,
    question: bool,
    decision: String,
}

impl Client {
    /// Answers a wait: most often one of the open waits the server lists
    /// (the oldest half the time, so that clients race for it), a quarter
    /// of the time again one that another client answered, mostly with
    /// another decision. False when there was none to answer.
    pub fn answer_one(&mut self) -> bool {
        let again = {
            let answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
            match answered.len() {
                0 => None,
                n if self.rng.below(4) == 0 => {
                    Some(answered[n - 1 - self.rng.below(n.min(16) as u64) as usize].clone())
                }
                _ => None,
            }
        };
        if let Some(asked) = again {
            let mut decision = self.decide(asked.question);
            if decision.name() == asked.decision && self.rng.below(3) > 0 {
                let no = format!("no, says p{}", self.process);
                decision = match asked.question {
                    true => Decision::Answer(no),
                    false => Decision::Reject(no),
                };
            }
            self.answer(&asked.wait, &decision);
            return true;
        }
        let Some(open) = self.open_waits() else {
            return false;
        };
        if open.is_empty() {
            return false;
        }
        let at = match self.rng.below(2) {
            0 => 0,
            _ => self.rng.below(open.len() as u64) as usize,
        };
        let OpenWait { id, question, .. } = open[at].clone();
        let decision = self.decide(question);
        self.answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Asked {
                wait: id.clone(),
                question,
                decision: decision.name(),
            });
        self.answer(&id, &decision);
        true
    }

    /// A question's answer: yes or no. A review's: approve mostly; reject
    /// (the step runs again) or edit sometimes.
    fn decide(&mut self, question: bool) -> Decision {
        let me = self.process;
        match (question, self.rng.below(10)) {
            (true, 0..=6) => Decision::Answer(format!("yes, says p{me}")),
            (true, _) => Decision::Answer(format!("no, says p{me}")),
            (false, 0..=5) => Decision::Approve,
            (false, 6 | 7) => Decision::Reject(format!("again, says p{me}")),
            (false, _) => Decision::Edit(format!("edited by p{me}")),
        }
    }

    /// The open waits, oldest first, as the server lists them (not an
    /// operation of the history: a way to find one); `None` when the
    /// server could not say.
    fn open_waits(&self) -> Option<Vec<OpenWait>> {
        let args = [
            "waits", "list", "--status", "open", "--json", "--server", &self.url,
        ];
        let out = self.cli.raw(&args);
        if out.status.code() != Some(0) {
            self.refused(&out.stderr);
            return None;
        }
        let waits: Value = serde_json::from_slice(&out.stdout).ok()?;
        let open = waits.as_array()?.iter().filter_map(|w| {
            Some(OpenWait {
                run: w["run_id"].as_str()?.to_owned(),
                id: w["id"].as_str()?.to_owned(),
                question: w["kind"] == "question",
            })
        });
        Some(open.collect())
    }

    /// `cairn waits answer WAIT … --enqueue --json --server`: recorded
    /// `ok` once the server answered with the run the answer left (printed
    /// whatever its status, which sets the exit code: a repeated answer to
    /// a run now waiting for its signal exits 4), `fail` on a 4xx (another
    /// decision already stands: 409 `wait_closed`), else `info`.
    fn answer(&mut self, wait: &str, decision: &Decision) {
        let op = Op::Answer {
            wait: wait.to_owned(),
            decision: decision.name(),
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op.clone());
        let how = decision.args();
        let mut args = vec!["waits", "answer", wait];
        args.extend(how.iter().map(String::as_str));
        args.extend(["--enqueue", "--json", "--server", &self.url]);
        let out = self.cli.raw(&args);
        let shown =
            serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|v| v["status"].is_string());
        let kind = match shown {
            true => EventKind::Ok,
            false => self.refused(&out.stderr),
        };
        self.recorder.record(self.process, kind, op);
    }

    /// Sends a signal: one whose outcome was unknown again under its id
    /// (what a careful sender does), or a quarter of the time any sent
    /// before (a no-op while its run waits, refused once it ended), else a
    /// new one to the oldest run of this client not signalled yet, or now
    /// and then a second one to a run (left buffered if the first was
    /// consumed). False when there was no run to signal.
    pub fn signal_one(&mut self) -> bool {
        let again = match self.unknown.pop() {
            Some(sent) => Some(sent),
            None if !self.signalled.is_empty() && self.rng.below(4) == 0 => {
                let i = self.rng.below(self.signalled.len() as u64) as usize;
                Some(self.signalled[i].clone())
            }
            None => None,
        };
        if let Some((run, id)) = again {
            self.signal_or_remember(&run, &id);
            return true;
        }
        let run = match self.unsignalled.pop_front() {
            Some(run) => run,
            None if !self.signalled.is_empty() && self.rng.below(4) == 0 => {
                let i = self.rng.below(self.signalled.len() as u64) as usize;
                self.signalled[i].0.clone()
            }
            None => return false,
        };
        self.signal_ids += 1;
        let id = format!("s{}-{}", self.process, self.signal_ids);
        self.signalled.push((run.clone(), id.clone()));
        self.signal_or_remember(&run, &id);
        true
    }

    /// Sends the signal; one whose outcome is unknown is sent again later.
    fn signal_or_remember(&mut self, run: &str, id: &str) {
        if self.signal(run, id) == EventKind::Info {
            self.unknown.push((run.to_owned(), id.to_owned()));
        }
    }

    /// `cairn signal send RUN go --id ID --json --server`: `ok` with the
    /// signal the server stored (or, for an id sent before, the first),
    /// `fail` on a 4xx (the run has ended: `no_signal_target`), else
    /// `info`.
    fn signal(&mut self, run: &str, id: &str) -> EventKind {
        let op = Op::Signal {
            run: run.to_owned(),
            name: SIGNAL.to_owned(),
            id: id.to_owned(),
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op.clone());
        let args = [
            "signal", "send", run, SIGNAL, "--id", id, "--json", "--server", &self.url,
        ];
        let out = self.cli.raw(&args);
        let sent = match out.status.code() {
            Some(0) => serde_json::from_slice::<Value>(&out.stdout).ok(),
            _ => None,
        };
        let kind = match sent {
            Some(sent) if sent["signal"]["id"] == id => EventKind::Ok,
            _ => self.refused(&out.stderr),
        };
        self.recorder.record(self.process, kind, op);
        kind
    }
}

/// After healing, what a person does for the runs still waiting: answers
/// their open waits (an edit or an answer no client sends, so that an
/// acknowledged answer the database lost never looks stored) and signals
/// the runs waiting for a signal (under ids of its own). Its operations
/// are in the history as the clients' are, from a process of its own.
pub struct Finisher {
    client: Client,
    /// Answers and signals it sent.
    answers: usize,
    signals: usize,
}

impl Finisher {
    /// The finisher, process `process`, against the server at `url`.
    pub fn new(case: &Case, url: &str, recorder: &Recorder, process: u32) -> Finisher {
        let client = Client::new(case, url, recorder, process, 1, &Answered::default());
        Finisher {
            client,
            answers: 0,
            signals: 0,
        }
    }

    /// What it did, for the campaign's report.
    pub fn summary(&self) -> String {
        format!(
            "after healing: {} waits answered, {} signals sent",
            self.answers, self.signals
        )
    }

    /// Answers or signals each run of `waiting` (runs as `runs list
    /// --json` shows them, `waiting`): its open wait if it has one, else
    /// a signal.
    pub fn finish(&mut self, waiting: &[&Value]) {
        let client = &mut self.client;
        let Some(open) = client.open_waits() else {
            return;
        };
        let done: BTreeSet<&str> = open.iter().map(|w| w.run.as_str()).collect();
        for wait in &open {
            let settled = "settled after healing".to_owned();
            let decision = match wait.question {
                true => Decision::Answer(settled),
                false => Decision::Edit(settled),
            };
            client.answer(&wait.id, &decision);
            self.answers += 1;
        }
        for run in waiting.iter().filter_map(|r| r["id"].as_str()) {
            if !done.contains(run) {
                client.signal_ids += 1;
                let id = format!("f-{}", client.signal_ids);
                client.signal(run, &id);
                self.signals += 1;
            }
        }
    }
}
