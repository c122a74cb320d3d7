//! `cairn crews list|show|diff` and `cairn runs upgrade`: the crew
//! versions stored in the database, how two differ, which unfinished runs
//! can move, and moving them. Local only for now (next to the database).

use std::io::Write;
use std::path::Path;

use cairn::upgrade::{diff, StepChange};
use cairn::{Crew, Engine, UpgradeVerdict};
use serde_json::json;

use super::{engine, Connect};
use crate::args::CrewsCommand;
use crate::input::{load_crew, parse_run_id, usage};
use crate::output;
use crate::report::exit;

const WHY: &str = "crew versions are read next to the database for now (--db)";

pub async fn main(to: &impl Connect, command: CrewsCommand, json: bool) -> anyhow::Result<u8> {
    let api = to.connect(false).await?;
    let engine = engine(&api, "crews", WHY)?;
    match command {
        CrewsCommand::List => list(engine, json).await?,
        CrewsCommand::Show { name, version } => {
            let crew = match version {
                Some(v) => resolve(engine, &name, &v).await?,
                None => newest(engine, &name).await?,
            };
            output::write_json(&mut output::text_out(), crew.def())?;
        }
        CrewsCommand::Diff { name, from, to } => {
            let from = resolve(engine, &name, &from).await?;
            let to = resolve(engine, &name, &to).await?;
            let steps = diff(from.def(), to.def());
            let runs: Vec<UpgradeVerdict> = engine
                .upgrade_plan(&name, to.def(), None)
                .await?
                .into_iter()
                .filter(|v| v.version == from.def().version)
                .collect();
            match json {
                true => output::write_json(
                    &mut output::text_out(),
                    &json!({"from": version_of(&from), "to": version_of(&to),
                            "steps": steps, "runs": runs}),
                )?,
                false => print_diff(&from, &to, &steps, &runs)?,
            }
        }
    }
    Ok(exit::OK)
}

async fn list(engine: &Engine, json: bool) -> anyhow::Result<()> {
    let crews = engine.crews().await?;
    if json {
        return output::write_json(&mut output::text_out(), &crews);
    }
    let mut out = output::text_out();
    writeln!(
        out,
        "{:<20} {:<10} {:<24} {:<20} UNFINISHED",
        "NAME", "VERSION", "FINGERPRINT", "FIRST SEEN"
    )?;
    for c in &crews {
        let print: String = c.fingerprint.as_str().chars().take(23).collect();
        writeln!(
            out,
            "{:<20} {:<10} {:<24} {:<20} {}",
            c.name,
            c.version,
            print,
            c.first_seen.format("%Y-%m-%d %H:%M:%S"),
            c.unfinished
        )?;
    }
    Ok(())
}

/// A version `crews` stores, or a crew file when `what` names one.
async fn resolve(engine: &Engine, name: &str, what: &str) -> anyhow::Result<Crew> {
    let path = Path::new(what);
    if path.is_file() {
        let crew = load_crew(path)?;
        if crew.def().name != name {
            return Err(usage(format!(
                "{what} is crew `{}`, not `{name}`",
                crew.def().name
            )));
        }
        return Ok(crew);
    }
    Ok(engine.crew_version(name, what).await?)
}

/// The newest stored version of `name`.
async fn newest(engine: &Engine, name: &str) -> anyhow::Result<Crew> {
    let newest = engine
        .crews()
        .await?
        .into_iter()
        .filter(|c| c.name == name)
        .max_by(|a, b| cairn::upgrade::version_order(&a.version, &b.version));
    match newest {
        Some(c) => Ok(engine.crew_version(name, c.fingerprint.as_str()).await?),
        None => Err(usage(format!(
            "no run was ever stored with a crew `{name}`"
        ))),
    }
}

fn version_of(crew: &Crew) -> serde_json::Value {
    json!({"version": crew.def().version, "fingerprint": crew.fingerprint()})
}

fn print_diff(
    from: &Crew,
    to: &Crew,
    steps: &[cairn::upgrade::StepDiff],
    runs: &[UpgradeVerdict],
) -> anyhow::Result<()> {
    let mut out = output::text_out();
    let (a, b) = (&from.def().version, &to.def().version);
    writeln!(out, "crew {} {a} -> {b}", from.def().name)?;
    for s in steps.iter().filter(|s| s.change != StepChange::Same) {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let change = serde_json::to_value(s.change)?;
        let change = change.as_str().unwrap_or_default().to_owned();
        writeln!(
            out,
            "  step {:<3} {:<9} {} -> {}",
            s.idx,
            change,
            side(&s.from),
            side(&s.to)
        )?;
    }
    if steps.iter().all(|s| s.change == StepChange::Same) {
        writeln!(out, "  no step differs")?;
    }
    writeln!(out, "unfinished runs of {a}: {}", runs.len())?;
    write_verdicts(&mut out, runs, "can move")
}

fn write_verdicts(out: &mut impl Write, runs: &[UpgradeVerdict], yes: &str) -> anyhow::Result<()> {
    for v in runs {
        let what = match (&v.reason, v.moved) {
            (_, true) => "moved".to_owned(),
            (None, false) => yes.to_owned(),
            (Some(why), false) => format!("cannot move: {why}"),
        };
        writeln!(
            out,
            "  {} {:<11} step {:<3} {what}",
            v.run_id, v.status, v.cursor
        )?;
    }
    Ok(())
}

/// `runs upgrade`: moves the unfinished runs of `--crew` (or `--run`) that
/// can move to `--to`; `--dry-run` only says which. Exit 0 when every run
/// it judged moved (or, dry, could), else the conflict class's code.
#[allow(clippy::too_many_arguments)]
pub async fn upgrade(
    to_db: &impl Connect,
    crew: &str,
    to: &str,
    run: Option<String>,
    dry_run: bool,
    force: bool,
    actor: cairn::Actor,
    json: bool,
) -> anyhow::Result<u8> {
    let api = to_db.connect(false).await?;
    let engine = engine(&api, "runs upgrade", WHY)?;
    let target = resolve(engine, crew, to).await?;
    let run = run.as_deref().map(parse_run_id).transpose()?;
    let verdicts = engine
        .upgrade_runs(&target, run, dry_run, force, &actor)
        .await?;
    // Moved, or (on a dry run) would move.
    let done = |v: &UpgradeVerdict| v.moved || (dry_run && v.movable);
    let stuck = !verdicts.iter().all(done);
    if json {
        output::write_json(&mut output::text_out(), &verdicts)?;
    } else {
        let mut out = output::text_out();
        let verb = if dry_run { "would move" } else { "moved" };
        let n = verdicts
            .iter()
            .filter(|v| v.moved || (dry_run && v.movable));
        writeln!(
            out,
            "{verb} {} of {} runs to {crew} {} ({})",
            n.count(),
            verdicts.len(),
            target.def().version,
            target.fingerprint()
        )?;
        write_verdicts(&mut out, &verdicts, "would move")?;
    }
    Ok(match stuck {
        true => cairn::ErrorClass::Conflict.exit_code(),
        false => exit::OK,
    })
}
