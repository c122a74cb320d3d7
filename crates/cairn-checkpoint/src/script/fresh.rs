//! A submit or a start that needs nothing read first: `RunStore::submit`
//! or `LeaseStore::start` of a run of no thread and no tenant, with no
//! sampled trace (and, to start, no context and no crew to replace). What
//! it writes is decided here, once, so a backend can write it in one
//! statement (`ScriptHost::start_fresh`; PostgreSQL's is
//! `postgres/start.rs`) and mean exactly what `runs::submit_in` and
//! `claim::start_in` mean: the run submitted and, to start, claimed at
//! epoch 1 with its first step running.

use cairn_core::{
    AuditEntry, Fingerprint, LeaseEpoch, NewEvent, Role, RunId, RunStatus, StepIdx, TraceContext,
};

use crate::plan::{claim_events_at, ClaimPlan, ClaimStep};
use crate::{ClaimRequest, NewRun};

use super::audited::entries_of;
use super::runs::submitted_event;

/// The rows of a fresh submit or start beyond the run's own columns.
pub(crate) struct FreshStart {
    pub id: RunId,
    pub fingerprint: Fingerprint,
    /// To start: the first agent's role, the step the claim starts.
    pub role: Option<Role>,
    /// `run_submitted`, then the claim's events (numbered from 1).
    pub events: Vec<NewEvent>,
    /// The audit entries of those events (`audited.rs`).
    pub audit: Vec<AuditEntry>,
    pub trace: Option<TraceContext>,
}

/// The fresh submit of `new` (`req`: none) or its start claimed by `req`,
/// or none when it must read first (a thread's earlier runs, a tenant's
/// slot), write more (a sampled trace's row, a context) or, to start, has
/// no step to start.
pub(crate) fn fresh_start(new: &NewRun, req: Option<&ClaimRequest>) -> Option<FreshStart> {
    let plain = new.thread_id.is_none()
        && new.tenant.is_none()
        && req.is_none_or(|r| r.context.is_none() && r.replace_crew.is_none());
    let role = match req {
        Some(_) => Some(new.crew.agents.first()?.role.clone()),
        None => None,
    };
    let id = RunId::new();
    let trace = new.trace.as_ref().map(|t| t.context(id));
    if !plain || trace.as_ref().is_some_and(|t| t.sampled) {
        return None;
    }
    let fingerprint = new.crew.fingerprint();
    let mut events = vec![submitted_event(new, &fingerprint)];
    if let (Some(req), Some(role)) = (req, &role) {
        let plan = ClaimPlan {
            step: ClaimStep::Insert { role: role.clone() },
            took_over: false,
        };
        let from = (RunStatus::Queued, StepIdx(0));
        events.extend(claim_events_at(req, LeaseEpoch(1), from, &plan));
    }
    let audit = entries_of(id, &events);
    Some(FreshStart {
        id,
        fingerprint,
        role,
        events,
        audit,
        trace,
    })
}
