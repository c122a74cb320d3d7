//! The campaign's clients and what they record: each operation (submit,
//! read, and in `answers.rs` answer and signal) goes through `cairn
//! --server` (a real HTTP client) and is recorded as an `invoke`, then
//! `ok`, `fail` (a 4xx: a typed refusal) or `info` (a 5xx, a refused or
//! reset connection: it may have happened).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_history::{Event, EventKind, Op, OpType};

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

    /// Whether every kind of operation recorded so far was acknowledged at
    /// or after `since_ns` (what the checker asks of each fault window).
    pub fn every_kind_acknowledged_since(&self, since_ns: u64) -> bool {
        let events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let used: BTreeSet<OpType> = events.iter().map(|e| e.op.op_type()).collect();
        let acked: BTreeSet<OpType> = events
            .iter()
            .filter(|e| e.kind == EventKind::Ok && e.time_ns >= since_ns)
            .map(|e| e.op.op_type())
            .collect();
        used.is_subset(&acked)
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

    /// Every event recorded so far, leaving none.
    pub fn take(&self) -> Vec<Event> {
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
}

impl Clients {
    /// `n` clients against the server at `url`, each with its own
    /// generator from `seed`, sharing the waits they answered.
    pub fn start(case: &Case, url: &str, recorder: &Recorder, n: usize, seed: u64) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Answered::default();
        let threads = (0..n)
            .map(|i| {
                let client = Client::new(case, url, recorder, i as u32, seed, &answered);
                let stop = stop.clone();
                std::thread::spawn(move || client.run(&stop))
            })
            .collect();
        Clients { stop, threads }
    }

    /// Stops the clients (each finishes the operation under way); the
    /// history stays in the recorder.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("a client thread panicked");
        }
    }
}

/// A key a client submits under, and whether its runs are of the crew
/// that asks (`asking`) or of `campaign`: one crew per key, so a
/// resubmit names the same run.
struct Key {
    key: String,
    asks: bool,
}

/// The waits some client answered, with the decision it sent: another
/// client answers one of them again, with another decision (or the same),
/// so one wait gets two decisions.
pub type Answered = Arc<Mutex<Vec<super::answers::Asked>>>;

pub struct Client {
    pub process: u32,
    pub cli: Cli,
    pub url: String,
    pub recorder: Recorder,
    pub rng: Rng,
    /// Every key this client submitted under.
    keys: Vec<Key>,
    /// Runs whose submit was acknowledged, and whether they ask.
    acked: Vec<(String, bool)>,
    /// Acknowledged runs of the asking crew that no signal of this client
    /// reached yet, oldest first.
    pub unsignalled: VecDeque<String>,
    /// Signals (run, id) this client sent: a resend of one must be a
    /// no-op while its run waits.
    pub signalled: Vec<(String, String)>,
    /// Signals whose outcome was unknown, to send again under their id.
    pub unknown: Vec<(String, String)>,
    /// How many signal ids this client made (names the next).
    pub signal_ids: usize,
    pub answered: Answered,
}

impl Client {
    /// Client `process` against the server at `url`, its generator from
    /// `seed`.
    pub fn new(
        case: &Case,
        url: &str,
        recorder: &Recorder,
        process: u32,
        seed: u64,
        answered: &Answered,
    ) -> Client {
        Client {
            process,
            cli: Cli {
                dir: case.path("."),
            },
            url: url.to_owned(),
            recorder: recorder.clone(),
            rng: Rng::new(seed.wrapping_add(u64::from(process) * 7919)),
            keys: vec![],
            acked: vec![],
            unsignalled: VecDeque::new(),
            signalled: vec![],
            unknown: vec![],
            signal_ids: 0,
            answered: answered.clone(),
        }
    }

    /// How an operation the CLI refused ended, counted for the report.
    pub fn refused(&self, stderr: &[u8]) -> EventKind {
        let stderr = String::from_utf8_lossy(stderr);
        self.recorder.seen(&stderr);
        classify(&stderr)
    }

    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let done = match self.rng.below(100) {
                0..=29 => {
                    let n = self.keys.len();
                    let key = format!("k{}-{n}", self.process);
                    // Every third key asks: two waits and a signal each.
                    let asks = n % 3 == 1;
                    self.keys.push(Key {
                        key: key.clone(),
                        asks,
                    });
                    self.submit(key, asks);
                    true
                }
                30..=39 if !self.keys.is_empty() => {
                    let i = self.rng.below(self.keys.len() as u64) as usize;
                    let Key { key, asks } = &self.keys[i];
                    self.submit(key.clone(), *asks);
                    true
                }
                40..=69 => self.answer_one(),
                70..=84 => self.signal_one(),
                _ => false,
            };
            if done {
                continue;
            }
            match self.run_to_read() {
                Some(run) => self.read(run),
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// An acknowledged run to read: one that asks a quarter of the time
    /// (its read lasts until it ends, see [`Client::read`]), else one that
    /// does not.
    fn run_to_read(&mut self) -> Option<String> {
        let asks = self.rng.below(4) == 0;
        let mut of = |asks: bool| {
            let runs: Vec<&String> = self
                .acked
                .iter()
                .filter(|(_, a)| *a == asks)
                .map(|(r, _)| r)
                .collect();
            let i = self.rng.below(runs.len() as u64) as usize;
            runs.get(i).map(|r| (*r).clone())
        };
        of(asks).or_else(|| of(!asks))
    }

    fn submit(&mut self, key: String, asks: bool) {
        let op = |run| Op::Submit {
            key: key.clone(),
            run,
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op(None));
        let file = if asks {
            format!("{}.toml", super::ASKING)
        } else {
            "crew.toml".to_owned()
        };
        let crew = self.cli.dir.join(file);
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
                if !self.acked.iter().any(|(r, _)| *r == run) {
                    self.acked.push((run.clone(), asks));
                    if asks {
                        self.unsignalled.push_back(run.clone());
                    }
                }
                (EventKind::Ok, Some(run))
            }
            _ => (self.refused(&out.stderr), None),
        };
        self.recorder.record(self.process, kind, op(run));
    }

    /// Reads a run's events: `runs events --server` follows the run's
    /// stream until the run ends (docs/cli.md), so the read of a run that
    /// waits for a person or a signal lasts until they came; the client
    /// gives up after [`READ_LIMIT`] (`info`: a read changes nothing).
    fn read(&mut self, run: String) {
        let op = |seqs| Op::ReadEvents {
            run: run.clone(),
            seqs,
        };
        self.recorder
            .record(self.process, EventKind::Invoke, op(vec![]));
        let args = ["runs", "events", &run, "--json", "--server", &self.url];
        let out = self.cli.within(&args, READ_LIMIT);
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

/// How long a read may follow a run that has not ended.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// `cairn` run in the case's directory, as `Case::command` runs it.
pub struct Cli {
    pub dir: std::path::PathBuf,
}

impl Cli {
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"));
        cmd.current_dir(&self.dir)
            .env_remove("CAIRN_DATABASE_URL")
            .env_remove("CAIRN_FAILPOINTS")
            .env_remove("CAIRN_LOG")
            .stdin(std::process::Stdio::null())
            .args(args);
        cmd
    }

    pub fn raw(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().expect("run cairn")
    }

    /// [`Cli::raw`], killed once it has run for `limit` (its stderr then
    /// says so, and its status is the kill's).
    pub fn within(&self, args: &[&str], limit: Duration) -> std::process::Output {
        use std::io::Read;
        let mut child = self
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run cairn");
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = vec![];
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = drain(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let stderr = drain(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = Instant::now() + limit;
        let mut late = false;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for cairn") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                late = true;
                break child.wait().expect("wait for cairn");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = stderr.join().expect("read cairn's stderr");
        if late {
            let said = format!("the client stopped waiting after {} s\n", limit.as_secs());
            stderr.splice(0..0, said.into_bytes());
        }
        std::process::Output {
            status,
            stdout: stdout.join().expect("read cairn's stdout"),
            stderr,
        }
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
