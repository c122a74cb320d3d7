//! `cairn waits …`: list, answer, and (next to the database) expire.

use cairn::{WaitFilter, WaitId, WaitStatus};

use super::{engine, finish_action, Api, Connect};
use crate::api::Answering;
use crate::args::{ActionArgs, WaitsCommand};
use crate::input::{answered_by, parse_answer, parse_run_id, parse_wait_id, wait_status};
use crate::output;
use crate::report::{error_code, exit};

pub async fn main(to: &impl Connect, command: WaitsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        WaitsCommand::List { run, status, all } => {
            let run = run.as_deref().map(parse_run_id).transpose()?;
            let status = wait_status(status, all)?;
            let api = to.connect(false).await?;
            let waits = api
                .waits(&WaitFilter {
                    run,
                    step: None,
                    status,
                })
                .await?;
            output::print_waits(&waits, json)?;
            Ok(exit::OK)
        }
        WaitsCommand::Answer {
            wait_id,
            approve,
            edit,
            reject,
            answer,
            by,
            reason,
            digest,
            enqueue,
        } => {
            let id = parse_wait_id(&wait_id)?;
            let answer = parse_answer(approve, edit, reject, answer)?;
            let actor = ActionArgs {
                by: Some(answered_by(by)),
                reason,
                enqueue,
            }
            .actor();
            let answering = Answering {
                answer,
                actor,
                digest,
            };
            let api = to.connect(false).await?;
            let wait = match api.answer(id, &answering).await {
                Ok(wait) => wait,
                Err(e) => return Err(point_to_open_wait(&api, id, e).await),
            };
            finish_action(&api, wait.run_id, enqueue, json).await
        }
        WaitsCommand::Expire => {
            let api = to.connect(false).await?;
            let why = "the server's workers apply wait deadlines themselves";
            let expired = engine(&api, "waits expire", why)?
                .expire_due_waits()
                .await?;
            output::print_waits(&expired, json)?;
            Ok(exit::OK)
        }
    }
}

/// An answer to a closed wait, with the open wait of the same run (if
/// any) and the command that answers it: the wait a person most likely
/// meant (a rejected review's re-run opens a new one).
async fn point_to_open_wait(api: &impl Api, id: WaitId, err: anyhow::Error) -> anyhow::Error {
    if error_code(&err) != Some("wait_closed") {
        return err;
    }
    let Ok(waits) = api.waits(&WaitFilter::default()).await else {
        return err;
    };
    let Some(run) = waits.iter().find(|w| w.id == id).map(|w| w.run_id) else {
        return err;
    };
    let open = waits
        .iter()
        .find(|w| w.run_id == run && w.status == WaitStatus::Open);
    let said = err.to_string();
    let hint = match open {
        // A server names the open wait itself (`error.open_wait`): only
        // the command that answers it is added.
        Some(open) if said.contains(&open.id.to_string()) => {
            output::answer_hint(open.id, open.kind)
        }
        None if said.contains("has no open wait") => return err,
        Some(open) => format!(
            "run {run} waits on wait {} ({} of step {}): {}",
            open.id,
            open.kind.as_str(),
            open.step_idx,
            output::answer_hint(open.id, open.kind)
        ),
        None => format!("run {run} has no open wait"),
    };
    let text = format!("{err}; {hint}");
    err.context(text)
}
