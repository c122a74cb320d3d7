//! `cairn threads …` and `cairn compact`.

use cairn::ThreadPage;

use super::{Api, Connect};
use crate::api::BudgetChange;
use crate::args::{CompactArgs, ThreadsCommand};
use crate::input::{parse_thread, usage};
use crate::output;
use crate::report::exit;

pub async fn main(to: &impl Connect, command: ThreadsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        ThreadsCommand::List => list(&to.connect(false).await?, json).await?,
        ThreadsCommand::Show { thread_id } => {
            let id = parse_thread(Some(thread_id))?.unwrap_or_default();
            let api = to.connect(false).await?;
            let view = api.thread(&id).await?;
            // Text shows each run's final output.
            let mut finals = vec![];
            for r in view.runs.iter().filter(|_| !json) {
                finals.push(output::final_output(&api.show(r.id).await?));
            }
            output::print_thread(&view, json, &finals)?;
        }
        ThreadsCommand::Budget {
            thread_id,
            budget,
            by,
            reason,
        } => {
            let id = parse_thread(Some(thread_id))?.unwrap_or_default();
            let raises = budget.iter().filter(|f| f.contains("=+")).count();
            let raise = match raises {
                0 => false,
                n if n == budget.len() => true,
                _ => {
                    return Err(usage(
                        "--budget: set limits (N) or raise them (+N), not both",
                    ))
                }
            };
            let asked = cairn::Budget::parse(budget.iter().map(String::as_str), raise)
                .map_err(|e| usage(format!("--budget: {e}")))?;
            let actor = crate::args::ActionArgs {
                by,
                reason,
                enqueue: false,
            }
            .actor();
            let change = BudgetChange {
                budget: asked,
                raise,
                actor,
            };
            let api = to.connect(false).await?;
            let set = api.set_thread_budget(&id, &change).await?;
            output::print_thread_budget(&set, json)?;
        }
    }
    Ok(exit::OK)
}

/// `threads list`: every thread, a page at a time, each printed before the
/// next is read.
async fn list(api: &impl Api, json: bool) -> anyhow::Result<()> {
    let mut array = match json {
        true => Some(output::JsonArray::start()?),
        false => {
            output::thread_header(&mut output::text_out())?;
            None
        }
    };
    let mut page = ThreadPage {
        after: None,
        limit: Some(super::page_size()),
    };
    loop {
        let threads = api.threads(&page).await?;
        match &mut array {
            Some(array) => array.push_all(&threads)?,
            None => output::thread_rows(&mut output::text_out(), &threads)?,
        }
        match threads.last() {
            Some(last) if Some(threads.len() as u32) == page.limit => {
                page.after = Some(last.thread_id.clone());
            }
            _ => break,
        }
    }
    if let Some(array) = array {
        array.end()?;
    }
    Ok(())
}

/// `cairn compact`: the policy the flags name, for every run or one
/// thread; with `--vacuum`, then the space given back.
pub async fn compact(
    to: &impl Connect,
    policy: CompactArgs,
    thread: Option<String>,
    vacuum: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let mut policy = policy.policy()?;
    policy.thread = parse_thread(thread)?;
    let api = to.connect(false).await?;
    // Refused before anything is removed.
    let why = "it rewrites the database next to it (--db)";
    let engine = match vacuum {
        true => Some(super::engine(&api, "compact --vacuum", why)?),
        false => None,
    };
    let removed = api.compact(&policy).await?;
    output::print_compacted(&removed, policy.dry_run, json)?;
    if let Some(engine) = engine {
        engine.vacuum().await?;
        if !json {
            eprintln!("vacuumed: the space the removed rows held is given back");
        }
    }
    Ok(exit::OK)
}
