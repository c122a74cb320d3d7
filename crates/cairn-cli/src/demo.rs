//! `cairn demo`: the crash-and-resume promise, shown end to end with real
//! processes. A child `cairn run` executes a crew of `command` steps on an
//! embedded SQLite file; the demo SIGKILLs it during step `kill_at`, resumes
//! the run in this process and checks, from the steps' own execution log,
//! that every step before the kill ran exactly once. `cairn demo --agent`
//! does the same to an LLM agent step (scripted model): it is killed after a
//! non-idempotent tool charged a card but before the result was journaled,
//! and the resume tells the model instead of charging again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use cairn::{ResumeOptions, RunFilter, RunStatus, StepStatus};

use crate::{exit, output};

/// `println!` that returns a closed stdout as an error (`cairn demo | head`
/// then ends quietly) instead of panicking.
macro_rules! say {
    () => {
        std::io::Write::write_all(&mut std::io::stdout(), b"\n")?
    };
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(&mut std::io::stdout(), format_args!("{}\n", format_args!($($arg)*)))?
    };
}

const STEP_SCRIPT: &str = r#"#!/bin/sh
# One demo step: record the execution, read the context, work a little, answer.
echo "$CAIRN_STEP_IDX" >> "$(dirname "$0")/executions.log"
context=$(cat)
sleep 0.1
printf '{"step": %s, "role": "%s", "context_bytes": %s}\n' "$CAIRN_STEP_IDX" "$CAIRN_STEP_ROLE" "${#context}"
"#;

fn crew_toml(steps: u32, script: &Path) -> String {
    let mut toml = String::from("name = \"demo\"\nversion = \"1\"\n");
    for i in 0..steps {
        toml.push_str(&format!(
            "\n[[agents]]\nrole = \"step-{i:02}\"\nkind = \"command\"\ncommand = [\"sh\", {:?}]\n",
            script.display().to_string()
        ));
    }
    toml
}

fn executions(log: &Path) -> BTreeMap<u32, u32> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if let Ok(idx) = line.trim().parse::<u32>() {
            *counts.entry(idx).or_insert(0) += 1;
        }
    }
    counts
}

/// Starts `child` (a `cairn run`), SIGKILLs it once `ready` holds, and
/// returns its pid.
async fn kill_when(
    mut child: std::process::Command,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<Pid> {
    let mut child = child
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the child `cairn run`")?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready() {
        if let Some(status) = child.try_wait()? {
            bail!("the child exited ({status}) before {what}");
        }
        ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pid = Pid::from_raw(i32::try_from(child.id())?);
    kill(pid, Signal::SIGKILL).context("killing the child")?;
    child.wait()?;
    Ok(pid)
}

/// The engine on the demo's database, and the one run the child left.
async fn the_run(url: &str) -> anyhow::Result<(cairn::Engine, cairn::RunRecord)> {
    let engine = crate::api::local::Local::open(url, false).await?.engine;
    let run = engine
        .list(&RunFilter::default())
        .await?
        .into_iter()
        .next()
        .context("the child left no run in the database")?;
    Ok((engine, run))
}

/// The demo's directory: the one given, or a temporary one (kept alive by
/// the returned guard).
fn demo_dir(dir: Option<PathBuf>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(d) => {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            Ok((d.canonicalize()?, None))
        }
        None => {
            let tmp = tempfile::tempdir()?;
            Ok((tmp.path().canonicalize()?, Some(tmp)))
        }
    }
}

/// The paths of a demo's database `db` and its log `log` in `dir`, with
/// what an earlier demo left there (the database, its WAL and shared
/// memory, the log) removed.
fn fresh(dir: &Path, db: &str, log: &str) -> (PathBuf, PathBuf) {
    let (db_path, log_path) = (dir.join(db), dir.join(log));
    for stale in [
        db_path.clone(),
        dir.join(format!("{db}-wal")),
        dir.join(format!("{db}-shm")),
        log_path.clone(),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    (db_path, log_path)
}

pub async fn run(steps: u32, kill_at: u32, dir: Option<PathBuf>) -> anyhow::Result<u8> {
    let (dir, _tmp) = demo_dir(dir)?;
    let (db, log) = fresh(&dir, "demo.db", "executions.log");
    let script = dir.join("step.sh");
    std::fs::write(&script, STEP_SCRIPT)?;
    let crew = dir.join("demo-crew.toml");
    std::fs::write(&crew, crew_toml(steps, &script))?;
    let url = format!("sqlite://{}", db.display());

    say!(
        "1. `cairn run` in a child process: {steps} command steps on {}",
        db.display()
    );
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child
        .arg("run")
        .arg(&crew)
        .args(["--db", &url, "--input", r#"{"topic": "durable agents"}"#]);
    let what = format!("step {kill_at} to start");
    let pid = kill_when(child, &what, || executions(&log).contains_key(&kill_at)).await?;
    say!("2. SIGKILLed the child (pid {pid}) while step {kill_at} was executing");

    let (engine, run) = the_run(&url).await?;
    say!(
        "   the database says: run {} is `{}` with cursor {} ({} steps committed)",
        run.id,
        run.status,
        run.cursor,
        run.cursor
    );

    say!("3. resume {} (same executor as a fresh run)", run.id);
    let started = Instant::now();
    let driven = engine.resume(run.id, killed_holder()).await?;
    say!(
        "   resumed at step {}, executed {} steps in {:.1?}",
        driven
            .executed
            .first()
            .map(|i| i.to_string())
            .unwrap_or_else(|| "-".into()),
        driven.executed.len(),
        started.elapsed()
    );

    let view = engine.show(run.id).await?;
    let counts = executions(&log);
    let count_of =
        |s: &cairn::StepRecord| counts.get(&s.idx.get()).copied().unwrap_or(0).to_string();
    say!();
    let text = output::RunText {
        extra: Some(("executions", &count_of)),
        ..output::RunText::default()
    };
    output::print_run(&view, false, &text)?;

    let mut problems = vec![];
    if view.run.status != RunStatus::Succeeded {
        problems.push(format!("run ended `{}`", view.run.status));
    }
    if view.steps.len() != steps as usize
        || view
            .steps
            .iter()
            .any(|s| s.status != StepStatus::Succeeded || s.output.is_none())
    {
        problems.push("not every step has a succeeded checkpoint with an output".to_owned());
    }
    for i in 0..steps {
        let n = counts.get(&i).copied().unwrap_or(0);
        let want = if i == kill_at { 2 } else { 1 };
        if n != want {
            problems.push(format!("step {i} executed {n} times, expected {want}"));
        }
    }
    say!();
    if problems.is_empty() {
        say!(
            "OK: steps 0-{} ran exactly once; step {kill_at} was interrupted by the kill and ran again; steps {}-{} completed after the resume. All {steps} outputs are stored.",
            kill_at.saturating_sub(1),
            kill_at + 1,
            steps - 1
        );
        Ok(exit::OK)
    } else {
        for p in &problems {
            say!("FAILED: {p}");
        }
        Ok(exit::ERROR)
    }
}

/// The agent demo's tool: charges (appends its idempotency key to
/// `charges.log`), then lingers so the kill lands before its result is
/// journaled.
const CHARGE_TOOL: &str = r#"#!/bin/sh
cat > /dev/null
echo "$CAIRN_IDEMPOTENCY_KEY" >> "$(dirname "$0")/charges.log"
# `exec`: the parent-death signal then reaches the sleeping process itself.
[ -n "${CAIRN_DEMO_LINGER:-}" ] && exec sleep 30
echo '{"charged": true}'
"#;

const MODEL: &str = r#"
[[responses]]
text = "I will charge the order once."
tool_calls = [{ id = "call_charge", name = "charge", arguments = { order = "A-1001", cents = 4200 } }]

[[responses]]
text = "The charge was interrupted and may have happened; I will not charge again. Please check order A-1001 before retrying."
"#;

fn agent_crew(dir: &Path) -> String {
    format!(
        r#"name = "demo-agent"
version = "1"

[[agents]]
role = "cashier"
kind = "llm"
provider = "scripted"
script = "model.toml"
instructions = "Charge the order exactly once."
env = ["CAIRN_DEMO_LINGER"]

[[agents.tools]]
name = "charge"
description = "Charge an order. Not idempotent."
parameters = {{ type = "object", properties = {{ order = {{ type = "string" }}, cents = {{ type = "integer" }} }}, required = ["order", "cents"] }}
command = ["sh", {:?}]
"#,
        dir.join("charge.sh").display().to_string()
    )
}

/// `cairn demo --agent`.
pub async fn agent(dir: Option<PathBuf>) -> anyhow::Result<u8> {
    let (dir, _tmp) = demo_dir(dir)?;
    let (db, charges) = fresh(&dir, "demo-agent.db", "charges.log");
    std::fs::write(dir.join("charge.sh"), CHARGE_TOOL)?;
    std::fs::write(dir.join("model.toml"), MODEL)?;
    let crew = dir.join("demo-agent.toml");
    std::fs::write(&crew, agent_crew(&dir))?;
    let url = format!("sqlite://{}", db.display());

    say!("1. `cairn run` in a child process: an LLM agent with a `charge` tool that is not idempotent");
    let mut child = std::process::Command::new(std::env::current_exe()?);
    child
        .arg("run")
        .arg(&crew)
        .args(["--db", &url, "--input", r#"{"order": "A-1001"}"#])
        .env("CAIRN_DEMO_LINGER", "1");
    let charged = || {
        std::fs::read_to_string(&charges)
            .unwrap_or_default()
            .lines()
            .count()
            > 0
    };
    let pid = kill_when(child, "the tool to charge", charged).await?;
    say!("2. SIGKILLed the child (pid {pid}) after `charge` charged, before its result was journaled");

    let (engine, run) = the_run(&url).await?;
    say!(
        "3. resume {}: the journal is repaired before the model is called again",
        run.id
    );
    engine.resume(run.id, killed_holder()).await?;
    say!();
    for e in engine.journal(run.id, None).await? {
        say!(
            "   {:>2}  {:<17} {}",
            e.entry.seq,
            e.entry.kind.as_str(),
            e.entry.payload
        );
    }
    let view = engine.show(run.id).await?;
    let charged = std::fs::read_to_string(&charges)?.lines().count();
    say!();
    say!("   charges.log: {charged} line(s)");
    let repaired = engine
        .journal(run.id, None)
        .await?
        .iter()
        .any(|e| e.entry.payload["action"] == "synthesized_result");
    if view.run.status == RunStatus::Succeeded && charged == 1 && repaired {
        say!(
            "OK: the card was charged once; after the kill the model was told the charge was \
             interrupted (a synthesized error result) instead of the tool running again."
        );
        Ok(exit::OK)
    } else {
        say!(
            "FAILED: run `{}`, {charged} charge(s), repair recorded: {repaired}",
            view.run.status
        );
        Ok(exit::ERROR)
    }
}

/// The demo SIGKILLed the run's holder itself, so its lease, still live,
/// has no one behind it: take it over rather than wait for it to expire.
fn killed_holder() -> ResumeOptions {
    ResumeOptions {
        takeover: true,
        ..ResumeOptions::default()
    }
}
