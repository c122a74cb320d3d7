//! `cairn crews list|show|diff` and `cairn runs upgrade`: the crew
//! versions stored in the database, how two differ, which unfinished runs
//! can move, and moving them; the same locally and against a server.

use std::io::Write;
use std::path::Path;

use cairn::upgrade::StepChange;
use cairn::{CrewDiff, UpgradeVerdict};

use super::Connect;
use crate::api::{Api, Upgrade, VersionArg};
use crate::args::CrewsCommand;
use crate::input::load_crew;
use crate::output;
use crate::report::exit;

pub async fn main(to: &impl Connect, command: CrewsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        CrewsCommand::List => {
            let crews = to.connect(false).await?.crew_versions().await?;
            print_list(&crews, json)?;
        }
        CrewsCommand::Show { name, version } => {
            let api = to.connect(false).await?;
            let def = api.crew_definition(&name, version.as_deref()).await?;
            output::write_json(&mut output::text_out(), &def)?;
        }
        CrewsCommand::Diff {
            name,
            from,
            to: want,
        } => {
            let (from, want) = (version_arg(&from)?, version_arg(&want)?);
            let diff = to
                .connect(false)
                .await?
                .crew_diff(&name, &from, &want)
                .await?;
            match json {
                true => output::write_json(&mut output::text_out(), &diff)?,
                false => print_diff(&name, &diff, &fork_onto(&want))?,
            }
        }
    }
    Ok(exit::OK)
}

/// `cairn workers`: the processes in the registry.
pub async fn workers(to: &impl Connect, json: bool) -> anyhow::Result<u8> {
    let workers = to.connect(false).await?.workers().await?;
    if json {
        output::write_json(&mut output::text_out(), &workers)?;
        return Ok(exit::OK);
    }
    let mut out = output::text_out();
    // Columns as wide as their longest value: a process id (host, pid
    // and a random part) is longer than any fixed width kept.
    let width = |f: &dyn Fn(&cairn::ProcessRecord) -> usize, head: &str| {
        workers.iter().map(f).max().unwrap_or(0).max(head.len())
    };
    let id_w = width(
        &|w| cairn::text::printable_line(&w.id).chars().count(),
        "PROCESS",
    );
    let host_w = width(
        &|w| cairn::text::printable_line(&w.host).chars().count(),
        "HOST",
    );
    writeln!(
        out,
        "{:<id_w$} {:<host_w$} {:>7} {:<5} {:>5}  {:<20} OFFERS",
        "PROCESS", "HOST", "PID", "LIVE", "HELD", "LAST BEAT"
    )?;
    for w in &workers {
        let offers: Vec<String> = w
            .offers
            .iter()
            .map(|o| {
                format!(
                    "{}@{}{}",
                    o.name,
                    o.version,
                    if o.needs_code { "*" } else { "" }
                )
            })
            .collect();
        writeln!(
            out,
            "{:<id_w$} {:<host_w$} {:>7} {:<5} {:>5}  {:<20} {}",
            cairn::text::printable_line(&w.id),
            cairn::text::printable_line(&w.host),
            w.pid,
            if w.live { "yes" } else { "no" },
            w.held,
            w.beat_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            offers.join(", ")
        )?;
    }
    if workers
        .iter()
        .any(|w| w.offers.iter().any(|o| o.needs_code))
    {
        writeln!(
            out,
            "* a version with Rust agents: only processes offering it run it"
        )?;
    }
    Ok(exit::OK)
}

/// A crew file when `what` names one, else a version.
pub(crate) fn version_arg(what: &str) -> anyhow::Result<VersionArg> {
    let path = Path::new(what);
    Ok(match path.is_file() {
        true => VersionArg::File(Box::new(load_crew(path)?), path.to_owned()),
        false => VersionArg::Named(what.to_owned()),
    })
}

fn print_list(crews: &[cairn::CrewVersion], json: bool) -> anyhow::Result<()> {
    if json {
        return output::write_json(&mut output::text_out(), crews);
    }
    let mut out = output::text_out();
    writeln!(
        out,
        "{:<20} {:<10} {:<24} {:<20} UNFINISHED",
        "NAME", "VERSION", "FINGERPRINT", "FIRST SEEN"
    )?;
    for c in crews {
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

fn print_diff(name: &str, diff: &CrewDiff, onto: &str) -> anyhow::Result<()> {
    let mut out = output::text_out();
    let (a, b) = (&diff.from.version, &diff.to.version);
    writeln!(out, "crew {name} {a} -> {b}")?;
    let changed: Vec<_> = diff
        .steps
        .iter()
        .filter(|s| s.change != StepChange::Same)
        .collect();
    for s in &changed {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let change = serde_json::to_value(s.change)?;
        // What a `changed` step changed in: its fields.
        let what = match s.fields.as_slice() {
            [] => String::new(),
            fields => format!(": {}", fields.join(", ")),
        };
        writeln!(
            out,
            "  step {:<3} {:<9} {} -> {}{what}",
            s.idx,
            change.as_str().unwrap_or_default(),
            side(&s.from),
            side(&s.to)
        )?;
    }
    if changed.is_empty() {
        writeln!(out, "  no step differs")?;
    }
    writeln!(out, "unfinished runs of {a}: {}", diff.runs.len())?;
    write_verdicts(&mut out, &diff.runs, "can move", onto)
}

/// Each run's verdict; for one that cannot move, the fork onto the
/// version (`onto`: how `runs fork` names it) that takes it there instead.
fn write_verdicts(
    out: &mut impl Write,
    runs: &[UpgradeVerdict],
    yes: &str,
    onto: &str,
) -> anyhow::Result<()> {
    for v in runs {
        let what = match (&v.reason, v.moved) {
            (_, true) => "moved".to_owned(),
            (_, false) if v.already => "already there (another upgrade moved it)".to_owned(),
            (None, false) => yes.to_owned(),
            (Some(why), false) => format!("cannot move: {why}"),
        };
        writeln!(
            out,
            "  {} {:<11} step {:<3} {what}",
            v.run_id, v.status, v.cursor
        )?;
        if let Some(from) = v.fork_from {
            writeln!(
                out,
                "    fork it onto the version instead: cairn runs fork {} --from-step {from} {onto}",
                v.run_id
            )?;
        }
    }
    Ok(())
}

/// How `runs fork` names the version `to` (`--crew-version` or `--crew`).
fn fork_onto(to: &VersionArg) -> String {
    match to {
        VersionArg::Named(v) => format!("--crew-version {v}"),
        VersionArg::File(_, path) => format!("--crew {}", path.display()),
    }
}

/// `runs upgrade`: moves the unfinished runs of `--crew` (or `--run`) that
/// can move to `--to`; `--dry-run` only says which. Exit 0 when every run
/// it judged moved (or, dry, could), else the conflict class's code.
pub async fn upgrade(
    to_db: &impl Connect,
    crew: &str,
    how: Upgrade,
    json: bool,
) -> anyhow::Result<u8> {
    let api = to_db.connect(false).await?;
    let verdicts = api.upgrade(crew, &how).await?;
    // Moved (by this upgrade or another), or (on a dry run) would move.
    let done = |v: &UpgradeVerdict| v.moved || v.already || (how.dry_run && v.movable);
    if json {
        output::write_json(&mut output::text_out(), &verdicts)?;
    } else {
        let mut out = output::text_out();
        let verb = if how.dry_run { "would move" } else { "moved" };
        let n = verdicts.iter().filter(|v| done(v)).count();
        let to = match &how.to {
            VersionArg::Named(v) => v.clone(),
            VersionArg::File(_, path) => path.display().to_string(),
        };
        writeln!(
            out,
            "{verb} {n} of {} runs of {crew} to {to}",
            verdicts.len()
        )?;
        write_verdicts(&mut out, &verdicts, "would move", &fork_onto(&how.to))?;
    }
    Ok(match verdicts.iter().all(done) {
        true => exit::OK,
        false => cairn::ErrorClass::Conflict.exit_code(),
    })
}
