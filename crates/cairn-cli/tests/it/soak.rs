//! The soak: runs of a crew of `command` steps and an `llm` step (the
//! scripted model calling an idempotent tool and a non-idempotent one) are
//! executed by `cairn resume` and by `cairn worker` processes that are
//! SIGKILLed at seeded random moments, again and again, then finished. The
//! steps and tools record their side effects in files, and the soak fails
//! on any loss (a run that does not finish, a step or idempotent call whose
//! effect never happened) or repetition (a step that ran more often than
//! the kills and retries that hit it explain, a non-idempotent call whose
//! effect happened twice).
//!
//! The bound for repetition is independent of the engine's own counters:
//! after each kill the soak reads which runs the killed process held (their
//! lease epoch moved while it lived) and allows each one more execution of
//! the step at its cursor; an operator retry of a `crash_loop` failure
//! allows one more too.
//!
//! The killed process is `cairn resume` (45 %), `cairn worker` (35 %) or
//! `cairn serve` with its embedded runner (20 %).
//!
//! `CAIRN_SOAK_KILLS=N` (default 20 per database) and `CAIRN_SOAK_SEED=N`
//! (the decisions: which process, which run, when to kill; the timing of
//! the processes themselves still varies); `CAIRN_SOAK_IN_FLIGHT=N` (runs
//! kept unfinished, and the worker's and server's concurrency; default 4)
//! for many runs in one process; `CAIRN_SOAK_DURABILITY=process` for
//! SQLite's `?durability=process`. `just soak` runs the big ones.

use std::collections::HashMap;
use std::process::Child;
use std::time::{Duration, Instant};

use cairn::{Engine, ErrorKind, JournalKind, RunFilter, RunId, RunRecord, RunStatus};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{
    agent_command, agent_scripted, agent_template, crew_toml, env_u64, tool_block, Case, Kind, Rng,
    Setup,
};

both_backends!(random_kills_of_command_and_llm_steps_lose_and_repeat_nothing);

/// A `command` step: one line `RUN IDX` per execution, then a short piece of
/// work so kills land inside it.
const STEP: &str = r#"#!/bin/sh
d=$(dirname "$0")
echo "$CAIRN_RUN_ID $CAIRN_STEP_IDX" >> "$d/steps.log"
cat > /dev/null
sleep 0.1
printf '{"step": %s}\n' "$CAIRN_STEP_IDX"
"#;

/// A tool: each start in `NAME.started`, its effect in `NAME.effects`; an
/// idempotent tool skips a key whose effect is already recorded.
const TOOL: &str = r#"#!/bin/sh
d=$(dirname "$0"); name=$1; mode=$2
cat > /dev/null
echo "$CAIRN_IDEMPOTENCY_KEY" >> "$d/$name.started"
sleep 0.02
if [ "$mode" = idempotent ] && grep -qx "$CAIRN_IDEMPOTENCY_KEY" "$d/$name.effects" 2>/dev/null; then
  :
else
  echo "$CAIRN_IDEMPOTENCY_KEY" >> "$d/$name.effects"
fi
sleep 0.02
echo '{"ok": true}'
"#;

/// The model: look the order up (streamed slowly), charge it, answer.
const MODEL: &str = r#"
[[responses]]
text = "Looking the order up."
tool_calls = [{ id = "c_lookup", name = "lookup", arguments = { order = "A-1001" } }]
chunk_bytes = 6
chunk_delay_ms = 8

[[responses]]
tool_calls = [{ id = "c_charge", name = "charge", arguments = { order = "A-1001", cents = 4200 } }]
chunk_bytes = 6
chunk_delay_ms = 8

[[responses]]
text = "Charged once."
"#;

const FINAL: &str = "Charged once.";
/// Steps: 0 command, 1 llm, 2 command, 3 template.
const STEPS: usize = 4;
const COMMAND_STEPS: [usize; 2] = [0, 2];
const LLM_STEP: usize = 1;
/// Runs kept unfinished at once, unless `CAIRN_SOAK_IN_FLIGHT` says.
const IN_FLIGHT: usize = 4;

/// Which process a round starts (and kills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proc {
    Resume,
    Worker,
    Serve,
}

fn crew(case: &Case) -> String {
    case.write("step.sh", STEP);
    case.write("tool.sh", TOOL);
    let step = case.path("step.sh").display().to_string();
    let tool = case.path("tool.sh").display().to_string();
    let model = case.write("model.toml", MODEL);
    let clerk = agent_scripted("clerk", &model, "Charge the order once.")
        + &tool_block("lookup", &["sh", &tool, "lookup", "idempotent"], true)
        + &tool_block("charge", &["sh", &tool, "charge", "once"], false);
    let agents = [
        agent_command("prepare", &["sh", &step]),
        clerk,
        agent_command("ship", &["sh", &step]),
        agent_template("receipt", "receipt: {{ outputs.clerk }}"),
    ];
    case.write("crew.toml", &crew_toml("soak", &agents))
        .display()
        .to_string()
}

/// What the soak counted.
#[derive(Debug, Default)]
struct Tally {
    kills: u64,
    kills_resume: u64,
    kills_worker: u64,
    kills_serve: u64,
    /// Processes that ended before their kill (a run finished first).
    exited: u64,
    finished: u64,
    lost: Vec<String>,
    repeated: Vec<String>,
    crash_loops: u64,
    synthesized: u64,
    takeovers: u64,
}

struct Soak {
    case: Case,
    crew: String,
    rt: tokio::runtime::Runtime,
    /// Reads the database in-process (no `cairn` spawn per look).
    engine: Engine,
    rng: Rng,
    /// Executions allowed per run and step beyond the first.
    allowed: HashMap<String, [u64; STEPS]>,
    submitted: Vec<String>,
    tally: Tally,
    in_flight: usize,
}

impl Soak {
    fn runs(&self) -> Vec<RunRecord> {
        let filter = RunFilter {
            limit: Some(100_000),
            ..RunFilter::default()
        };
        self.rt
            .block_on(self.engine.list(&filter))
            .expect("list runs")
    }

    fn unfinished(&self) -> Vec<RunRecord> {
        self.runs()
            .into_iter()
            .filter(|r| !matches!(r.status, RunStatus::Succeeded | RunStatus::Failed))
            .collect()
    }

    fn submit(&mut self) {
        let n = self.submitted.len();
        let out = self
            .case
            .cairn(&["submit", &self.crew, "--input", &format!("{{\"n\": {n}}}")])
            .expect_code(0);
        let id = out.stdout.trim().to_owned();
        self.allowed.insert(id.clone(), [0; STEPS]);
        self.submitted.push(id);
    }

    /// Lease epochs of every run, to see afterwards which ones a process claimed.
    fn epochs(&self) -> HashMap<String, i64> {
        self.runs()
            .into_iter()
            .map(|r| (r.id.to_string(), r.lease_epoch.0))
            .collect()
    }

    /// One process, killed at a random moment unless it ends first.
    fn round(&mut self) {
        while self.unfinished().len() < self.in_flight {
            self.submit();
        }
        let before = self.epochs();
        let proc = match self.rng.below(100) {
            0..35 => Proc::Worker,
            35..55 => Proc::Serve,
            _ => Proc::Resume,
        };
        let concurrency = self.in_flight.to_string();
        let (mut child, limit) = match proc {
            Proc::Worker => {
                let args = [
                    "worker",
                    "--concurrency",
                    &concurrency,
                    "--lease-ms",
                    "800",
                    "--heartbeat-ms",
                    "150",
                    "--poll-ms",
                    "30",
                ];
                (self.spawn(&args), self.rng.below(1500))
            }
            Proc::Serve => {
                // Its runner holds runs under the default lease: a later
                // `resume --takeover` or the final pass takes them over.
                let port = std::net::TcpListener::bind("127.0.0.1:0")
                    .and_then(|l| l.local_addr())
                    .expect("a free port")
                    .port();
                let listen = format!("127.0.0.1:{port}");
                let args = ["serve", "--listen", &listen, "--concurrency", &concurrency];
                (self.spawn(&args), self.rng.below(1500))
            }
            Proc::Resume => {
                let runs = self.unfinished();
                let run = runs[self.rng.below(runs.len() as u64) as usize]
                    .id
                    .to_string();
                // The killed holder's lease is still live: take it over.
                (
                    self.spawn(&["resume", "--takeover", &run]),
                    self.rng.below(800),
                )
            }
        };
        let deadline = Instant::now() + Duration::from_millis(limit);
        let mut ended = None;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().expect("try_wait") {
                ended = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        match ended {
            Some(status) => {
                self.tally.exited += 1;
                // A resume ends 0 (finished) or 3 (failed: a crash loop);
                // a worker or a server only when killed.
                assert!(
                    proc == Proc::Resume && matches!(status.code(), Some(0) | Some(3)),
                    "{proc:?} ended on its own ({status}):\n{}",
                    std::fs::read_to_string(self.case.path("bg.stderr")).unwrap_or_default()
                );
            }
            None => {
                kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("SIGKILL");
                child.wait().expect("reap the killed process");
                self.tally.kills += 1;
                match proc {
                    Proc::Worker => self.tally.kills_worker += 1,
                    Proc::Serve => self.tally.kills_serve += 1,
                    Proc::Resume => self.tally.kills_resume += 1,
                }
                // The runs the dead process held: their step at the cursor
                // may have run (or be running still) and will run again.
                for run in self.runs() {
                    let id = run.id.to_string();
                    let claimed = before.get(&id).is_none_or(|e| *e < run.lease_epoch.0);
                    if run.status == RunStatus::Running && claimed {
                        if let Some(a) = self.allowed.get_mut(&id) {
                            a[(run.cursor.0 as usize).min(STEPS - 1)] += 1;
                        }
                    }
                }
            }
        }
        self.retry_crash_loops();
    }

    /// A run that failed `crash_loop` is retried by an operator (one more
    /// execution of its step); any other failure is a loss, found at the end.
    fn retry_crash_loops(&mut self) {
        for run in self.runs() {
            let crash_loop = run.status == RunStatus::Failed
                && run
                    .error
                    .as_ref()
                    .is_some_and(|e| e.kind == ErrorKind::CrashLoop);
            if crash_loop {
                let id = run.id.to_string();
                self.tally.crash_loops += 1;
                self.case
                    .cairn(&["runs", "retry", &id, "--enqueue", "--reason", "soak"])
                    .expect_code(0);
                if let Some(a) = self.allowed.get_mut(&id) {
                    a[(run.cursor.0 as usize).min(STEPS - 1)] += 1;
                }
            }
        }
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.case.spawn(args, &[("CAIRN_LOG", "warn")])
    }

    /// Resumes every unfinished run to its end, with no kills.
    fn finish(&mut self) {
        for _ in 0..10 {
            let runs = self.unfinished();
            if runs.is_empty() {
                return;
            }
            for run in runs {
                let out = self
                    .case
                    .cairn(&["resume", "--takeover", &run.id.to_string()]);
                assert!(
                    matches!(out.code(), Some(0) | Some(3)),
                    "resume {}: {out:?}",
                    run.id
                );
            }
            self.retry_crash_loops();
        }
    }

    fn lines(&self, file: &str) -> Vec<String> {
        std::fs::read_to_string(self.case.path(file))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every run, step and tool call against the files and the allowance.
    fn check(&mut self) {
        let steps = self.lines("steps.log");
        let lookups = self.lines("lookup.started");
        let lookup_effects = self.lines("lookup.effects");
        let charges = self.lines("charge.effects");
        let count =
            |lines: &[String], want: &str| lines.iter().filter(|l| *l == want).count() as u64;
        for id in self.submitted.clone() {
            let run_id: RunId = id.parse().expect("a run id");
            let allowed = self.allowed[&id];
            let view = self
                .rt
                .block_on(self.engine.show(run_id))
                .expect("show a run");
            if view.run.status != RunStatus::Succeeded {
                self.tally
                    .lost
                    .push(format!("run {id} ended {}", view.run.status));
                continue;
            }
            self.tally.finished += 1;
            self.tally.takeovers += view
                .steps
                .iter()
                .map(|s| u64::from(s.takeovers))
                .sum::<u64>();
            for idx in COMMAND_STEPS {
                if view.steps[idx].output != Some(serde_json::json!({"step": idx})) {
                    self.tally
                        .lost
                        .push(format!("run {id} step {idx} has no output"));
                }
                let n = count(&steps, &format!("{id} {idx}"));
                if n == 0 {
                    self.tally
                        .lost
                        .push(format!("run {id} step {idx} never ran"));
                }
                if n > 1 + allowed[idx] {
                    self.tally.repeated.push(format!(
                        "run {id} step {idx} ran {n} times; kills and retries explain {}",
                        1 + allowed[idx]
                    ));
                }
            }
            let clerk = &view.steps[LLM_STEP];
            if clerk.output != Some(Value::from(FINAL)) {
                self.tally.lost.push(format!(
                    "run {id}: the clerk's output is {:?}",
                    clerk.output
                ));
            }
            let lookup = format!("{id}/{LLM_STEP}/c_lookup");
            let charge = format!("{id}/{LLM_STEP}/c_charge");
            if count(&lookup_effects, &lookup) != 1 {
                self.tally.lost.push(format!(
                    "run {id}: the idempotent lookup's effect is missing"
                ));
            }
            let runs = count(&lookups, &lookup);
            if runs > 1 + allowed[LLM_STEP] {
                self.tally.repeated.push(format!(
                    "run {id}: the idempotent lookup ran {runs} times; kills explain {}",
                    1 + allowed[LLM_STEP]
                ));
            }
            match count(&charges, &charge) {
                1 => {}
                0 => {
                    // Only if the resume told the model the call was
                    // interrupted (a synthesized result), never silently.
                    let journal = self
                        .rt
                        .block_on(self.engine.journal(run_id, Some(LLM_STEP as u32)))
                        .expect("journal");
                    let told = journal.iter().any(|e| {
                        e.entry.kind == JournalKind::ToolResult
                            && e.entry.payload["call_id"] == "c_charge"
                            && e.entry.payload["synthesized"] == true
                    });
                    if told {
                        self.tally.synthesized += 1;
                    } else {
                        self.tally
                            .lost
                            .push(format!("run {id}: the charge vanished untold"));
                    }
                }
                n => self.tally.repeated.push(format!(
                    "run {id}: the non-idempotent charge happened {n} times"
                )),
            }
        }
    }
}

fn random_kills_of_command_and_llm_steps_lose_and_repeat_nothing(kind: Kind) {
    let _load = crate::support::loads_the_machine();
    let kills = env_u64("CAIRN_SOAK_KILLS").unwrap_or(20);
    let seed = env_u64("CAIRN_SOAK_SEED").unwrap_or(0x50a4);
    let in_flight = env_u64("CAIRN_SOAK_IN_FLIGHT").map_or(IN_FLIGHT, |n| n.max(1) as usize);
    let process_durability = kind == Kind::Sqlite
        && std::env::var("CAIRN_SOAK_DURABILITY").is_ok_and(|d| d == "process");
    let case = Case::new(Setup {
        kind,
        process_durability,
    });
    let crew = crew(&case);
    // The first submit creates the database the soak then reads.
    case.cairn(&["submit", &crew, "--input", "{\"n\": \"first\"}"])
        .expect_code(0);
    let (rt, engine) = crate::support::in_process(&case);
    let mut soak = Soak {
        case,
        crew,
        rt,
        engine,
        rng: Rng(seed),
        allowed: HashMap::new(),
        submitted: Vec::new(),
        tally: Tally::default(),
        in_flight,
    };
    for run in soak.runs() {
        soak.allowed.insert(run.id.to_string(), [0; STEPS]);
        soak.submitted.push(run.id.to_string());
    }
    let started = Instant::now();
    while soak.tally.kills < kills {
        soak.round();
    }
    soak.finish();
    soak.check();
    let t = &soak.tally;
    println!(
        "soak {kind:?}{} seed {seed}, {in_flight} in flight: {} kills ({} of `cairn resume`, \
         {} of `cairn worker`, {} of `cairn serve`), {} runs finished, {}, {} crash-loop failures (retried), \
         {} takeovers, {} charges answered as interrupted, {} processes ended before their kill, {:.0?}",
        if process_durability {
            " (durability=process)"
        } else {
            ""
        },
        t.kills,
        t.kills_resume,
        t.kills_worker,
        t.kills_serve,
        t.finished,
        crate::support::losses(&t.lost, &t.repeated),
        t.crash_loops,
        t.takeovers,
        t.synthesized,
        t.exited,
        started.elapsed()
    );
    crate::support::assert_no_losses(&t.lost, &t.repeated);
    assert!(t.finished > 0 && t.kills >= kills);
}
