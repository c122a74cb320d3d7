//! The campaign's clients and what they record: each operation goes
//! through `cairn --server` (a real HTTP client) and is recorded as an
//! `invoke`, then `ok`, `fail` (a 4xx: a typed refusal) or `info` (a 5xx,
//! a refused or reset connection: it may have happened).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cairn_history::{Event, EventKind, Op};

use crate::support::Case;

/// The campaign's one clock: nanoseconds since the Unix epoch, which the
/// step programs' effects log (`date +%s%N`) shares.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Every event of the campaign, in the order recorded, and how often each
/// error message was seen (for the report).
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Event>>>, Arc<Mutex<BTreeMap<String, usize>>>);

impl Recorder {
    pub fn new() -> Recorder {
        Recorder::default()
    }

    pub fn record(&self, process: u32, kind: EventKind, op: Op) {
        let event = Event {
            process,
            kind,
            op,
            time_ns: now_ns(),
        };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(event);
    }

    /// Counts an error the CLI printed (its first line, ids left out, so
    /// that one refusal of many waits counts as one).
    fn seen(&self, stderr: &str) {
        let line = without_ids(stderr.lines().next().unwrap_or_default());
        let line: String = line.chars().take(200).collect();
        *self
            .1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(line)
            .or_default() += 1;
    }

    /// The errors seen, most frequent first.
    pub fn errors(&self) -> Vec<(usize, String)> {
        let seen = self.1.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(usize, String)> = seen.iter().map(|(m, n)| (*n, m.clone())).collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.0));
        out
    }

    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// `text` with each UUID (a run's, a wait's) replaced by `ID`.
fn without_ids(text: &str) -> String {
    let is_id = |word: &str| {
        word.len() == 36
            && word.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let mut out = String::new();
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() || c == '-' {
            word.push(c);
            continue;
        }
        out.push_str(if is_id(&word) { "ID" } else { &word });
        word.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// A small deterministic generator (xorshift), one per client, from the
/// campaign's seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n.max(1)
    }
}

/// The client threads, until [`Clients::stop`].
pub struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    recorder: Recorder,
}

impl Clients {
    /// `n` clients against the server at `url`, each with its own
    /// generator from `seed`.
    pub fn start(case: &Case, url: &str, recorder: &Recorder, n: usize, seed: u64) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|i| {
                let client = Client {
                    process: i as u32,
                    cli: Cli {
                        dir: case.path("."),
                    },
                    url: url.to_owned(),
                    recorder: recorder.clone(),
                    rng: Rng::new(seed.wrapping_add(i as u64 * 7919)),
                    keys: vec![],
                    acked: vec![],
                };
                let stop = stop.clone();
                std::thread::spawn(move || client.run(&stop))
            })
            .collect();
        Clients {
            stop,
            threads,
            recorder: recorder.clone(),
        }
    }

    /// Stops the clients (each finishes the operation under way) and
    /// returns the history.
    pub fn stop(self) -> Vec<Event> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("a client thread panicked");
        }
        self.recorder.take()
    }
}

struct Client {
    process: u32,
    cli: Cli,
    url: String,
    recorder: Recorder,
    rng: Rng,
    /// Every key this client submitted under.
    keys: Vec<String>,
    /// Runs whose submit was acknowledged.
    acked: Vec<String>,
}

impl Client {
    /// How an operation the CLI refused ended, counted for the report.
    fn refused(&self, stderr: &[u8]) -> EventKind {
        let stderr = String::from_utf8_lossy(stderr);
        self.recorder.seen(&stderr);
        classify(&stderr)
    }

    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.rng.below(100) {
                0..=59 => {
                    let key = format!("k{}-{}", self.process, self.keys.len());
                    self.keys.push(key.clone());
                    self.submit(key);
                }
                60..=74 if !self.keys.is_empty() => {
                    let i = self.rng.below(self.keys.len() as u64) as usize;
                    self.submit(self.keys[i].clone());
                }
                _ if !self.acked.is_empty() => {
                    let i = self.rng.below(self.acked.len() as u64) as usize;
                    self.read(self.acked[i].clone());
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }

    fn submit(&mut self, key: String) {
        let op = |run| Op::Submit {
            key: key.clone(),
            run,
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op(None));
        let crew = self.cli.dir.join("crew.toml");
        let input = format!("{{\"key\": \"{key}\"}}");
        let args = [
            "submit",
            crew.to_str().unwrap_or_default(),
            "--idempotency-key",
            &key,
            "--input",
            &input,
            "--server",
            &self.url,
        ];
        let out = self.cli.raw(&args);
        let (kind, run) = match out.status.code() {
            Some(0) => {
                let run = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                self.acked.push(run.clone());
                (EventKind::Ok, Some(run))
            }
            _ => (self.refused(&out.stderr), None),
        };
        self.recorder.record(self.process, kind, op(run));
    }

    fn read(&mut self, run: String) {
        let op = |seqs| Op::ReadEvents {
            run: run.clone(),
            seqs,
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op(vec![]));
        let args = ["runs", "events", &run, "--json", "--server", &self.url];
        let out = self.cli.raw(&args);
        let read = match out.status.code() {
            Some(0) => serde_json::from_slice::<serde_json::Value>(&out.stdout).ok(),
            _ => None,
        };
        let seqs: Option<Vec<u64>> =
            read.and_then(|v| v.as_array()?.iter().map(|e| e["seq"].as_u64()).collect());
        match seqs {
            Some(seqs) => self.recorder.record(self.process, EventKind::Ok, op(seqs)),
            None => {
                let kind = self.refused(&out.stderr);
                self.recorder.record(self.process, kind, op(vec![]));
            }
        }
    }
}

/// `cairn` run in the case's directory, as `Case::command` runs it.
struct Cli {
    dir: std::path::PathBuf,
}

impl Cli {
    fn raw(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .current_dir(&self.dir)
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_FAILPOINTS")
            .env_remove("CAIRN_LOG")
            .stdin(std::process::Stdio::null())
            .args(args)
            .output()
            .expect("run cairn")
    }
}

/// A refusal the server typed (HTTP 4xx) certainly did nothing; anything
/// else (5xx, a refused or reset connection, a timeout) may have.
fn classify(stderr: &str) -> EventKind {
    match stderr.contains("HTTP 4") {
        true => EventKind::Fail,
        false => EventKind::Info,
    }
}
