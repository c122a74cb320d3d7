//! `run`, `submit`, and what needs the database itself: `resume` and
//! `doctor`.

use std::io::Write;

use cairn::{ResumeOptions, RunFilter, RunRecord, RunStatus, WaitFilter, WaitStatus};

use super::{engine, print_run, Api, Connect};
use crate::api::local::until_interrupted;
use crate::args::{ActionArgs, ResumeArgs, SubmitArgs};
use crate::input::{load_crew, parse_context, parse_input, parse_run_id, parse_thread};
use crate::report::{exit, view_exit};
use crate::{output, progress};

/// `cairn run`: submits, then takes the run to its next stop (executing
/// it here, or waiting for a server's workers) and exits with its status.
pub async fn run(
    to: &impl Connect,
    args: SubmitArgs,
    progress: progress::Progress,
    json: bool,
) -> anyhow::Result<u8> {
    // Everything the user typed is read before the database is touched.
    let crew = args.crew(to.read_crew(&args.crew)?)?;
    let input = parse_input(&args.input)?;
    let opts = args.options()?;
    let api = to.connect(true).await?;
    if let Some(engine) = api.engine() {
        crate::traces::export(engine)?;
    }
    let lines = progress.enabled(json) && api.engine().is_some();
    // Start (submit and claim), then drive, so the run id is known (and
    // printed) before the first step runs.
    let submitted = api.start(crew, input, opts).await?;
    let id = submitted.run.id;
    if lines {
        progress::start(&submitted.run)?;
    }
    if submitted.created {
        say_what_it_waits_behind(&api, &submitted.run).await;
    }
    if api.drive(submitted, lines).await?.is_none() {
        return Ok(exit::INTERRUPTED);
    }
    Ok(view_exit(&print_run(&api, id, json, false, lines).await?))
}

/// `cairn submit`: prints the run's id (`--json`: the run).
pub async fn submit(to: &impl Connect, args: SubmitArgs, json: bool) -> anyhow::Result<u8> {
    let crew = args.crew(to.read_crew(&args.crew)?)?;
    let input = parse_input(&args.input)?;
    let opts = args.options()?;
    let api = to.connect(true).await?;
    let submitted = api.submit(crew, input, opts).await?;
    if json {
        let view = api.show(submitted.run.id).await?;
        output::print_run(&view, true, &output::RunText::default())?;
    } else {
        writeln!(std::io::stdout(), "{}", submitted.run.id)?;
    }
    Ok(exit::OK)
}

/// `resume`: next to the database only.
pub async fn resume(to: &impl Connect, args: ResumeArgs, json: bool) -> anyhow::Result<u8> {
    let ResumeArgs {
        run_id,
        crew,
        force,
        thread,
        takeover,
        context,
        by,
        reason,
    } = args;
    let id = parse_run_id(&run_id)?;
    let crew = crew.as_deref().map(load_crew).transpose()?;
    let thread_id = parse_thread(thread)?;
    let context = context.as_deref().map(parse_context).transpose()?;
    let actor = ActionArgs {
        by,
        reason,
        enqueue: false,
    }
    .actor();
    let api = to.connect(false).await?;
    let why =
        "the server's workers execute and take over runs; use `runs continue` or `runs retry`";
    let engine = engine(&api, "resume", why)?;
    crate::traces::export(engine)?;
    let opts = ResumeOptions {
        crew,
        force,
        thread_id,
        takeover,
        context: context.map(|c| (c, actor)),
    };
    let mut driven = None;
    let work = async { engine.resume(id, opts).await.map(|d| driven = Some(d)) };
    if until_interrupted(id, work).await?.is_none() {
        return Ok(exit::INTERRUPTED);
    }
    if let (Some(driven), false) = (driven, json) {
        if driven.executed.is_empty() && driven.run.status.is_finished() {
            eprintln!(
                "run {id} is already {}; nothing executed",
                driven.run.status
            );
        } else if driven.took_over {
            eprintln!(
                "run {id} was running under another lease: taken over (epoch {})",
                driven.run.lease_epoch
            );
        }
    }
    Ok(view_exit(&print_run(&api, id, json, false, false).await?))
}

/// `doctor`: next to the database only.
pub async fn doctor(to: &impl Connect, json: bool) -> anyhow::Result<u8> {
    let api = to.connect(false).await?;
    let checkup = engine(&api, "doctor", "it reads the database itself (--db)")?
        .doctor()
        .await?;
    print_checkup(&checkup, json)?;
    Ok(match checkup.is_healthy() {
        true => exit::OK,
        false => exit::ERROR,
    })
}

fn print_checkup(checkup: &cairn::Checkup, json: bool) -> anyhow::Result<()> {
    let mut out = output::text_out();
    if json {
        return output::write_json(&mut out, checkup);
    }
    match checkup.integrity.as_slice() {
        [] => writeln!(out, "database: ok")?,
        problems => {
            for p in problems {
                writeln!(out, "database: {p}")?;
            }
        }
    }
    writeln!(
        out,
        "runs: {} checked, {} corrupt",
        checkup.runs,
        checkup.corrupt_runs.len()
    )?;
    for c in &checkup.corrupt_runs {
        writeln!(out, "  {}: {}", c.run, c.detail)?;
    }
    if let Some(r) = &checkup.replication {
        print_replication(&mut out, r)?;
    }
    Ok(())
}

/// The replication setup, and on an asynchronous one the warning that a
/// failover can lose acknowledged work, with the settings that make it
/// synchronous. A warning only: doctor's exit code does not change.
fn print_replication(out: &mut impl Write, r: &cairn::Replication) -> std::io::Result<()> {
    if r.in_recovery {
        writeln!(
            out,
            "server: a standby (in recovery): it refuses writes; point Cairn at the primary"
        )?;
    } else if r.read_only {
        writeln!(
            out,
            "server: read-only (transaction_read_only = on): writes fail until it takes them again"
        )?;
    }
    let standbys: Vec<String> = r
        .standbys
        .iter()
        .map(|s| {
            let seen = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_owned());
            format!(
                "{} ({}, {})",
                s.application_name,
                seen(&s.state),
                seen(&s.sync_state)
            )
        })
        .collect();
    let standbys = match standbys.is_empty() {
        true => "none".to_owned(),
        false => standbys.join(", "),
    };
    writeln!(out, "standbys: {standbys}")?;
    writeln!(
        out,
        "synchronous_standby_names = '{}'; synchronous_commit = {} (Cairn's connections)",
        r.synchronous_standby_names, r.synchronous_commit
    )?;
    if r.synchronous() {
        writeln!(
            out,
            "replication: synchronous (a failover to the synchronous standby loses no \
             acknowledged commit)"
        )?;
        return Ok(());
    }
    let why = asynchronous_because(r);
    let name = r
        .standbys
        .first()
        .map_or("STANDBY_NAME", |s| s.application_name.as_str());
    writeln!(
        out,
        "warning: replication is asynchronous ({why}): a failover can lose acknowledged \
         submits, answers and step commits. For zero loss, make commits wait for a \
         synchronous standby:\n  \
         PostgreSQL:       synchronous_standby_names = 'FIRST 1 ({name})' and \
         synchronous_commit = on (or remote_apply)\n  \
         pg_auto_failover: pg_autoctl set node replication-quorum true (the default; \
         with two or more standbys also pg_autoctl set formation number-sync-standbys 1)\n  \
         Patroni:          synchronous_mode: true and synchronous_mode_strict: true\n\
         (docs/operations.md, \"Database failover\"; a warning: the exit code is unchanged)"
    )
}

/// Why `r` is not synchronous, in a few words.
fn asynchronous_because(r: &cairn::Replication) -> String {
    if !matches!(
        r.synchronous_commit.as_str(),
        "on" | "remote_apply" | "remote_write"
    ) {
        return format!(
            "synchronous_commit = {} on Cairn's connections waits for no standby{}",
            r.synchronous_commit,
            match r.synchronous_commit.as_str() {
                "off" => "; ?durability=process sets it",
                _ => "",
            }
        );
    }
    if r.standbys.is_empty() {
        return "no standby streams from this server".to_owned();
    }
    if r.standbys.iter().any(|s| s.state.is_none()) {
        return "Cairn's role cannot see the standbys' state; grant it pg_monitor".to_owned();
    }
    if r.synchronous_standby_names.trim().is_empty() {
        return "synchronous_standby_names is empty".to_owned();
    }
    "no synchronous standby is streaming".to_owned()
}

/// A run queued behind an unfinished run of its thread starts only after
/// it: says so on stderr (the run, its status, and its open wait with the
/// command that answers it), so a silent `run` is not mistaken for a hang.
async fn say_what_it_waits_behind(api: &impl Api, run: &RunRecord) {
    let Some(thread) = &run.thread_id else { return };
    // The oldest two of each busy status (one may be this run): a few rows,
    // however long the thread.
    let mut earlier = vec![];
    for status in [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Waiting,
        RunStatus::Interrupted,
    ] {
        let filter = RunFilter {
            thread: Some(thread.clone()),
            status: Some(status),
            limit: Some(2),
            ..RunFilter::default()
        };
        let Ok(runs) = api.list(&filter).await else {
            return;
        };
        earlier.extend(
            runs.into_iter()
                .filter(|r| (r.created_at, r.id) < (run.created_at, run.id)),
        );
    }
    let Some(busy) = earlier.iter().min_by_key(|r| (r.created_at, r.id)) else {
        return;
    };
    let mut text = format!(
        "run {} is queued behind run {} of thread `{}` ({}); it starts when that run is done",
        run.id,
        busy.id,
        cairn::text::printable_line(thread),
        busy.status
    );
    let open = WaitFilter {
        run: Some(busy.id),
        status: Some(WaitStatus::Open),
        ..WaitFilter::default()
    };
    if let Some(w) = api
        .waits(&open)
        .await
        .ok()
        .and_then(|w| w.into_iter().next())
    {
        text.push_str(&format!(
            "\n  it waits for an answer: {}",
            output::answer_hint(w.id, w.kind)
        ));
    } else if busy.status == RunStatus::Interrupted {
        text.push_str(&format!(
            "\n  it is interrupted: {} runs continue {}",
            output::cairn_command(),
            busy.id
        ));
    }
    eprintln!("{text}");
}
