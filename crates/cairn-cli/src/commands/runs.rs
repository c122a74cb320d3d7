//! `cairn runs …`: list, show, events, watch, journal, and the operator's
//! actions (retry, continue, cancel, fork).

use std::io::Write;
use std::path::Path;

use cairn::{ForkRequest, RunFilter, RunId, RunStatus, StepIdx};

use super::{engine, finish_action, print_run, Api, Connect};
use crate::api::local::until_interrupted;
use crate::api::Act;
use crate::args::{ActionArgs, RunsCommand};
use crate::input::{load_crew, parse_input, parse_run_id, parse_thread, usage};
use crate::output;
use crate::report::{exit, status_exit, view_exit};

pub async fn main(to: &impl Connect, command: RunsCommand, json: bool) -> anyhow::Result<u8> {
    // What was typed is read first: a typo must not open (or migrate) a database.
    match command {
        RunsCommand::List {
            status,
            limit,
            oldest,
            parent,
            tenant,
        } => {
            let which = RunFilter {
                status: status
                    .map(|s| s.parse::<RunStatus>().map_err(usage))
                    .transpose()?,
                parent: parent.as_deref().map(parse_run_id).transpose()?,
                tenant,
                ..RunFilter::default()
            };
            let api = to.connect(false).await?;
            list(&api, which, limit, oldest, json).await
        }
        RunsCommand::Show {
            run_id,
            outputs,
            step,
        } => {
            let id = parse_run_id(&run_id)?;
            let api = to.connect(false).await?;
            match step {
                Some(n) => {
                    let view = api.show(id).await?;
                    let waits = crate::api::run_waits(&api, id).await?;
                    let events = crate::api::children_events(&api, &view).await?;
                    output::print_step(&view, n, json, &waits, &events)?;
                }
                None => {
                    print_run(&api, id, json, outputs, false).await?;
                }
            }
            Ok(exit::OK)
        }
        RunsCommand::Watch { run_id } => {
            let id = parse_run_id(&run_id)?;
            let api = to.connect(false).await?;
            Ok(status_exit(api.watch(id, json).await?))
        }
        RunsCommand::Events { run_id } => {
            let id = parse_run_id(&run_id)?;
            events(&to.connect(false).await?, id, json).await
        }
        RunsCommand::Values { run_id, key } => {
            let act = crate::api::signals::SignalAct::Values(parse_run_id(&run_id)?, key);
            super::signals::print(to.connect(false).await?.signals(act).await?, json)
        }
        RunsCommand::Journal { run_id, step } => {
            let id = parse_run_id(&run_id)?;
            let journal = to.connect(false).await?.journal(id, step).await?;
            output::print_journal(&journal, json)?;
            Ok(exit::OK)
        }
        RunsCommand::Retry {
            run_id,
            crew: Some(crew),
            action,
            ..
        } => with_crew(to, &run_id, None, &crew, &action, json).await,
        RunsCommand::Retry {
            run_id,
            action,
            rerun_children,
            ..
        } => act(to, &run_id, Act::Retry { rerun_children }, action, json).await,
        RunsCommand::Continue {
            run_id,
            budget,
            action,
        } => {
            // The raise and the continue are one transaction: a refused
            // continue writes no raise.
            let raise = (!budget.is_empty())
                .then(|| cairn::Budget::parse(budget.iter().map(String::as_str), true))
                .transpose()
                .map_err(|e| crate::input::usage(format!("--budget: {e}")))?;
            act(to, &run_id, Act::Continue { raise }, action, json).await
        }
        RunsCommand::Cancel { run_id, action } => cancel(to, &run_id, action, json).await,
        RunsCommand::Upgrade {
            crew,
            to: version,
            run,
            dry_run,
            force,
            by,
            reason,
        } => {
            let how = crate::api::Upgrade {
                to: super::crews::version_arg(&version)?,
                run: run.as_deref().map(parse_run_id).transpose()?,
                dry_run,
                force,
                actor: ActionArgs {
                    by,
                    reason,
                    enqueue: false,
                }
                .actor(),
            };
            super::crews::upgrade(to, &crew, how, json).await
        }
        RunsCommand::Fork {
            run_id,
            from_step,
            input,
            thread,
            crew,
            crew_version,
            rerun_children,
            action,
        } => {
            let mut req = ForkRequest {
                from_step: StepIdx(from_step),
                input: input.as_deref().map(parse_input).transpose()?,
                thread_id: parse_thread(thread)?,
                crew: None,
                rerun_children,
            };
            if let Some(version) = crew_version {
                let id = parse_run_id(&run_id)?;
                let api = to.connect(false).await?;
                let name = api.show(id).await?.run.crew;
                req.crew = Some(api.crew_definition(&name, Some(&version)).await?);
            }
            match crew {
                Some(crew) => with_crew(to, &run_id, Some(&req), &crew, &action, json).await,
                None => act(to, &run_id, Act::Fork(&req), action, json).await,
            }
        }
    }
}

/// `runs retry|continue|fork`: records the action, then (unless
/// `--enqueue`) takes the run (a fork: the new run) to its next stop.
async fn act(
    to: &impl Connect,
    run_id: &str,
    act: Act<'_>,
    action: ActionArgs,
    json: bool,
) -> anyhow::Result<u8> {
    let id = parse_run_id(run_id)?;
    let api = to.connect(false).await?;
    let fork = match &act {
        Act::Fork(req) => Some(req.from_step),
        _ => None,
    };
    let run = api.act(id, act, &action.actor()).await?;
    if let (Some(from), false) = (fork, json) {
        eprintln!("forked run {id} at step {from} into run {}", run.id);
    }
    finish_action(&api, run.id, action.enqueue, json).await
}

/// `runs cancel`: a cancel never queues the run, so it is printed as it
/// stands (exit 0).
async fn cancel(
    to: &impl Connect,
    run_id: &str,
    action: ActionArgs,
    json: bool,
) -> anyhow::Result<u8> {
    let id = parse_run_id(run_id)?;
    let api = to.connect(false).await?;
    let run = api.act(id, Act::Cancel, &action.actor()).await?;
    if !json && run.status == RunStatus::Running {
        eprintln!("run {id} is running elsewhere: cancel requested; its executor stops the step at its next check");
    }
    print_run(&api, id, json, false, false).await?;
    Ok(exit::OK)
}

/// `runs retry --crew` (no `fork`) and `runs fork --crew`: the run goes on
/// with another crew file, executed here to its next stop.
async fn with_crew(
    to: &impl Connect,
    run_id: &str,
    fork: Option<&ForkRequest>,
    crew: &Path,
    action: &ActionArgs,
    json: bool,
) -> anyhow::Result<u8> {
    let id = parse_run_id(run_id)?;
    let crew = load_crew(crew)?;
    let actor = &action.actor();
    let api = to.connect(false).await?;
    let why = "the server runs the crews it loaded; run them next to the database (--db)";
    let engine = engine(&api, "runs retry --crew and runs fork --crew", why)?;
    let ran = match fork {
        None => {
            let retried = engine.retry_with_crew(id, &crew, actor);
            (id, until_interrupted(id, retried).await?)
        }
        Some(req) => {
            let child = engine.fork_with_crew(id, req, &crew, actor).await?;
            if !json {
                eprintln!(
                    "forked run {id} at step {} into run {} with crew {}",
                    req.from_step.0,
                    child.id,
                    crew.fingerprint()
                );
            }
            let drive = engine.execute_with_crew(child.id, &crew, actor);
            (child.id, until_interrupted(child.id, drive).await?)
        }
    };
    match ran {
        (_, None) => Ok(exit::INTERRUPTED),
        (run, Some(())) => Ok(view_exit(&print_run(&api, run, json, false, false).await?)),
    }
}

/// `runs events`: printed as they are read (a server's stream as it
/// arrives); `--json` one array at the end.
async fn events(api: &impl Api, id: RunId, json: bool) -> anyhow::Result<u8> {
    let mut all = Vec::new();
    api.events(id, true, &mut |event| {
        if json {
            all.push(event);
            return Ok(());
        }
        let mut out = output::text_out();
        output::write_event(&mut out, &event)?;
        Ok(out.flush()?)
    })
    .await?;
    if json {
        output::print_events(&all, true)?;
    }
    Ok(exit::OK)
}

/// `runs list`. With `--limit`, the newest N (the oldest N with
/// `--oldest`) whatever the form; the JSON array keeps its documented
/// order (oldest first), people read the newest first.
async fn list(
    api: &impl Api,
    which: RunFilter,
    limit: Option<u32>,
    oldest: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let Some(limit) = limit else {
        return list_all(api, which, oldest, json).await;
    };
    let mut runs = Vec::new();
    let mut after = None;
    // A server answers at most 1,000 runs a page.
    while runs.len() < limit as usize {
        let filter = RunFilter {
            limit: Some((limit - runs.len() as u32).min(1000)),
            after,
            newest_first: !oldest,
            ..which.clone()
        };
        let page = api.list(&filter).await?;
        let full = page.len() == filter.limit.unwrap_or_default() as usize;
        after = page.last().map(|r| r.id);
        runs.extend(page);
        if !full {
            break;
        }
    }
    if json && !oldest {
        runs.reverse();
    }
    output::print_list(&runs, json)?;
    Ok(exit::OK)
}

/// `runs list` without `--limit`: every run, a page at a time, each page
/// printed before the next is read, so memory stays bounded whatever the
/// database holds. Text newest first (oldest with --oldest); the JSON
/// array oldest first, as documented, written element by element.
async fn list_all(
    api: &impl Api,
    which: RunFilter,
    oldest: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let size = super::page_size();
    let newest_first = !json && !oldest;
    let mut array = match json {
        true => Some(output::JsonArray::start()?),
        false => {
            output::run_header(&mut output::text_out())?;
            None
        }
    };
    let mut after = None;
    loop {
        let filter = RunFilter {
            limit: Some(size),
            after,
            newest_first,
            ..which.clone()
        };
        let page = api.list(&filter).await?;
        match &mut array {
            Some(array) => {
                let listed: Vec<cairn::Listed> = page.iter().map(cairn::Listed::of).collect();
                array.push_all(&listed)?
            }
            None => output::run_rows(&mut output::text_out(), &page)?,
        }
        match page.last() {
            Some(last) if page.len() == size as usize => after = Some(last.id),
            _ => break,
        }
    }
    if let Some(array) = array {
        array.end()?;
    }
    Ok(exit::OK)
}
