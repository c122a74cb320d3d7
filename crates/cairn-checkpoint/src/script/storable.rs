//! The NUL rule (`cairn_core::Unstorable`) on what an operation would
//! store, checked before its transaction with the field named as a user
//! knows it. The dialect layer refuses any NUL it binds as a backstop; the
//! backends' fast paths bind directly, so this is what guards them.

use std::fmt::Display;

use cairn_core::{Actor, NewEvent};

use crate::raw::error_value;
use crate::{ClaimRequest, NewRun, Result, StepCommit};

/// `what` names the field in the error; it is formatted only then, as
/// these checks run on every step commit.
pub(super) fn text_ok(what: impl Display, text: Option<&str>) -> Result<()> {
    match text {
        Some(t) if cairn_core::caps::has_nul(t) => Err(unstorable(what)),
        _ => Ok(()),
    }
}

pub(super) fn json_ok(what: impl Display, value: Option<&serde_json::Value>) -> Result<()> {
    match value {
        Some(v) if cairn_core::json_has_nul(v) => Err(unstorable(what)),
        _ => Ok(()),
    }
}

fn unstorable(what: impl Display) -> crate::Error {
    cairn_core::Unstorable {
        what: what.to_string(),
    }
    .into()
}

pub(super) fn actor_ok(actor: &Actor) -> Result<()> {
    text_ok("`by`", Some(&actor.by))?;
    text_ok("`reason`", actor.reason.as_deref())
}

/// A submit's values; the crew definition as it is stored.
pub(super) fn submit_ok(new: &NewRun) -> Result<serde_json::Value> {
    json_ok("the run input", Some(&new.input))?;
    text_ok("the idempotency key", new.idempotency_key.as_deref())?;
    text_ok("the thread id", new.thread_id.as_deref())?;
    let def = new.crew.to_json();
    json_ok("the crew definition", Some(&def))?;
    Ok(def)
}

pub(super) fn claim_ok(req: &ClaimRequest) -> Result<()> {
    text_ok("the lease owner", Some(&req.owner))?;
    events_ok(&req.events)?;
    json_ok(
        "the crew definition",
        req.replace_crew.as_ref().map(|d| d.to_json()).as_ref(),
    )
}

/// The events a caller asks to append. Writers build them from their typed
/// payloads (`NewEvent::typed`), so each decodes as its kind's and encodes
/// back to the same JSON (no field its type lacks); a debug build checks
/// it, which every test run does for every event it writes.
pub(super) fn events_ok(events: &[NewEvent]) -> Result<()> {
    for e in events {
        debug_assert!(
            e.payload().is_ok_and(|p| p.to_value() == e.data),
            "a `{}` event whose data is not its kind's payload: {}",
            e.kind.as_str(),
            e.data
        );
        json_ok(
            format_args!("the data of a `{}` event", e.kind.as_str()),
            Some(&e.data),
        )?;
    }
    Ok(())
}

/// A step commit's values (the scheduler checks the output first and fails
/// the step `unstorable` instead; this refuses whatever slips past).
pub(super) fn commit_ok(c: &StepCommit) -> Result<()> {
    let (step, rows) = (c.idx, c.rows());
    json_ok(format_args!("step {step}'s output"), rows.output)?;
    json_ok(
        format_args!("step {step}'s error"),
        error_value(rows.error).as_ref(),
    )?;
    json_ok("the run's error", error_value(rows.run_error).as_ref())?;
    events_ok(&c.events)?;
    if let Some(w) = rows.open_wait {
        json_ok("the wait's prompt", Some(&w.prompt))?;
        text_ok("the question id", w.question_id.as_deref())?;
    }
    Ok(())
}
