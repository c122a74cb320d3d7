//! `cairn runs watch RUN_ID`: a run's progress as it happens, with an `llm`
//! step's text printed as it streams. Reads the database (the run's events,
//! and `Engine::live_text`, which crosses processes on PostgreSQL) or, in
//! client mode, the server's event stream. Ends when the run has succeeded,
//! failed or been cancelled, with the step table as `runs show` prints it.
//!
//! Text is printed live when pieces arrive. When a response ends, its
//! journaled text is the reference: a step whose text never arrived live
//! (a SQLite database written by another process has no notifications)
//! gets it printed whole, and live text that stopped short (its last
//! pieces still in flight when the run, and the server's stream, ended) is
//! completed from it; pieces that arrive after are dropped (their
//! `after_seq` is below what the journal showed). The text is there either
//! way, once.

use std::collections::HashMap;
use std::io::Write;

use cairn::{EventData, EventRecord, JournalKind, OutputDelta, RunRecord, StepJournalEntry};

use crate::{output, progress};

/// What a watch hears, in order.
pub enum Heard {
    Event(EventRecord),
    Delta(OutputDelta),
}

/// Prints what is heard; `--json` prints one JSON document per line (each
/// stored event as `runs events --json` has it, each piece as
/// `{"kind": "output_delta", …}`).
pub struct Watch {
    json: bool,
    roles: Vec<String>,
    /// The step whose live text is being printed (a line is open).
    open_line: Option<(u32, u32)>,
    /// Text printed live per step since its last response ended.
    live: HashMap<u32, String>,
    /// Per step, the journal `seq` up to which its text has been shown.
    printed_seq: HashMap<u32, i64>,
    /// A closed stdout stops the printing, not the watch.
    printing: bool,
    /// The stored events heard (a children step's time is read from them).
    events: Vec<EventRecord>,
}

impl Watch {
    pub fn new(run: &RunRecord, json: bool) -> Watch {
        let roles = run
            .crew_definition
            .agents
            .iter()
            .map(|a| a.role.as_str().to_owned())
            .collect();
        let mut watch = Watch {
            json,
            roles,
            open_line: None,
            live: HashMap::new(),
            printed_seq: HashMap::new(),
            printing: true,
            events: Vec::new(),
        };
        if !json {
            watch.printing = progress::start(run).is_ok();
        }
        watch
    }

    /// Prints one thing heard. `journal` reads a step's journal, for text
    /// that did not arrive live; it is called only when a response ended.
    pub async fn hear<F, Fut>(&mut self, heard: Heard, journal: F)
    where
        F: FnOnce(u32) -> Fut,
        Fut: std::future::Future<Output = Vec<StepJournalEntry>>,
    {
        if let Heard::Event(e) = &heard {
            self.events.push(e.clone());
        }
        if !self.printing {
            return;
        }
        let printed = match heard {
            Heard::Delta(d) => self.delta(&d),
            Heard::Event(e) => {
                let text = match self.response_ended(&e) {
                    Some(idx) => {
                        let entries = journal(idx).await;
                        let journaled = self.unshown_text(idx, &entries);
                        let live = self.live.remove(&idx).unwrap_or_default();
                        catch_up(&live, journaled)
                    }
                    None => CatchUp::Lines(Vec::new()),
                };
                self.event(&e, text)
            }
        };
        self.printing = printed.is_ok();
    }

    fn delta(&mut self, d: &OutputDelta) -> std::io::Result<()> {
        let key = (d.idx.get(), d.attempt.get());
        if self.json {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", d.event_json())?;
            return out.flush();
        }
        // A late piece of text the journal already showed.
        if self
            .printed_seq
            .get(&key.0)
            .is_some_and(|shown| d.after_seq < *shown)
        {
            return Ok(());
        }
        let mut out = output::text_out();
        if self.open_line != Some(key) {
            if self.open_line.is_some() {
                writeln!(out)?;
            }
            let role = self.role(d.idx.get());
            write!(out, "      {role} (step {}) says: ", d.idx.get())?;
            self.open_line = Some(key);
        }
        self.live.entry(key.0).or_default().push_str(&d.text);
        write!(out, "{}", d.text)?;
        out.flush()
    }

    fn event(&mut self, e: &EventRecord, text: CatchUp) -> std::io::Result<()> {
        if self.json {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::to_string(e).unwrap_or_default())?;
            return out.flush();
        }
        let mut out = output::text_out();
        let text = match text {
            // The live line goes on where its pieces stopped.
            CatchUp::Rest(rest) if self.open_line.is_some() => {
                write!(out, "{rest}")?;
                vec![]
            }
            CatchUp::Rest(rest) => vec![rest],
            CatchUp::Lines(lines) => lines,
        };
        let line = progress::line(e, &self.roles);
        if (line.is_some() || !text.is_empty()) && self.open_line.take().is_some() {
            writeln!(out)?;
        }
        for t in &text {
            let idx = called_by(e).unwrap_or(0);
            writeln!(out, "      {} (step {idx}) says: {t}", self.role(idx))?;
        }
        if let Some(line) = line {
            writeln!(out, "{line}")?;
        }
        out.flush()
    }

    /// The step whose response just ended (a `model_called` event).
    fn response_ended(&self, e: &EventRecord) -> Option<u32> {
        if self.json {
            return None;
        }
        called_by(e)
    }

    /// The step's journaled texts not shown yet (from the journal or live).
    fn unshown_text(&mut self, idx: u32, entries: &[StepJournalEntry]) -> Vec<String> {
        let seen = self.printed_seq.entry(idx).or_insert(0);
        let mut texts = Vec::new();
        for item in entries.iter().filter(|i| i.idx.get() == idx) {
            if item.entry.seq <= *seen {
                continue;
            }
            *seen = item.entry.seq;
            if item.entry.kind == JournalKind::AssistantText {
                if let Some(t) = item.entry.payload["text"].as_str() {
                    texts.push(t.to_owned());
                }
            }
        }
        texts
    }

    fn role(&self, idx: u32) -> &str {
        self.roles.get(idx as usize).map_or("", String::as_str)
    }

    /// The end: a newline after open text, and the step table.
    pub fn finish(&mut self, view: &cairn::RunView, waits: &[cairn::WaitRecord]) {
        if self.json || !self.printing {
            return;
        }
        let mut out = output::text_out();
        if self.open_line.take().is_some() {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "\nrun {} {}", view.run.id, view.run.status.as_str());
        let _ = write!(
            out,
            "{}",
            output::step_table(&view.steps, waits, &self.events, None)
        );
        let _ = out.flush();
    }
}

/// What a response's end adds to the text printed live.
#[derive(Debug, PartialEq)]
enum CatchUp {
    /// Whole texts, on lines of their own.
    Lines(Vec<String>),
    /// The end of the live text, which stopped short.
    Rest(String),
}

/// Reconciles the text printed live since the step's last response with the
/// texts journaled for it: nothing if they agree, the rest if the live text
/// stopped short, the journaled texts whole if nothing (or something else)
/// arrived live.
fn catch_up(live: &str, journaled: Vec<String>) -> CatchUp {
    if live.is_empty() {
        return CatchUp::Lines(journaled);
    }
    let all = journaled.concat();
    match all.strip_prefix(live) {
        Some("") => CatchUp::Lines(vec![]),
        Some(rest) => CatchUp::Rest(rest.to_owned()),
        None => CatchUp::Lines(journaled),
    }
}

/// How often the database is read for new events.
const POLL: std::time::Duration = std::time::Duration::from_millis(150);

/// Watches run `id` in the database until it has succeeded, failed or been
/// cancelled; its final status.
pub async fn local(
    engine: &cairn::Engine,
    id: cairn::RunId,
    json: bool,
) -> anyhow::Result<cairn::RunStatus> {
    use tokio::sync::broadcast::error::RecvError;
    // Before the first read, so no piece in between is lost.
    let mut live = Some(engine.live_text().await);
    let run = engine.get_run(id).await?;
    let mut watch = Watch::new(&run, json);
    let mut seq = 0_i64;
    let mut tick = tokio::time::interval(POLL);
    let journal = |idx: u32| async move { engine.journal(id, Some(idx)).await.unwrap_or_default() };
    loop {
        let delta = async {
            match &mut live {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            delta = delta => match delta {
                Ok(d) if d.run_id == id => watch.hear(Heard::Delta(d), journal).await,
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => live = None,
            },
            _ = tick.tick() => {
                // Status first: once it shows the end, the events read after
                // it are all (they commit with the change).
                let run = engine.get_run(id).await?;
                for e in engine.events_after(id, seq).await? {
                    seq = e.seq;
                    watch.hear(Heard::Event(e), journal).await;
                }
                if ended(run.status) {
                    let view = engine.show(id).await?;
                    let waits = engine
                        .waits(&cairn::WaitFilter { run: Some(id), ..Default::default() })
                        .await?;
                    watch.finish(&view, &waits);
                    return Ok(view.run.status);
                }
            }
        }
    }
}

/// Where a watch ends: where the run's event stream ends.
pub fn ended(status: cairn::RunStatus) -> bool {
    use cairn::RunStatus::{Cancelled, Failed, Succeeded};
    matches!(status, Succeeded | Failed | Cancelled)
}

/// The step whose model call `e` records (a `model_called` event).
fn called_by(e: &EventRecord) -> Option<u32> {
    match e.payload() {
        Ok(EventData::ModelCalled(m)) => Some(m.idx.get()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{catch_up, CatchUp};

    fn texts(t: &[&str]) -> Vec<String> {
        t.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_response_end_completes_what_the_live_text_missed() {
        // All of it arrived live: nothing more.
        assert_eq!(
            catch_up("Hello world", texts(&["Hello world"])),
            CatchUp::Lines(vec![])
        );
        // The stream ended before the last pieces: the rest, once.
        assert_eq!(
            catch_up("Hello wo", texts(&["Hello world"])),
            CatchUp::Rest("rld".into())
        );
        // Nothing arrived live (SQLite written by another process): whole.
        assert_eq!(
            catch_up("", texts(&["a", "b"])),
            CatchUp::Lines(texts(&["a", "b"]))
        );
        // Pieces lost in the middle: the journaled text whole.
        assert_eq!(
            catch_up("Hello d", texts(&["Hello world"])),
            CatchUp::Lines(texts(&["Hello world"]))
        );
    }
}
