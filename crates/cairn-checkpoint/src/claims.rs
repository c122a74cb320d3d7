//! What a claim asks and answers, in the contract's terms: the lease a
//! heartbeat finds (`Lease`), whether another holder's run may be taken
//! (`Takeover`), the request (`ClaimRequest`) and what was claimed
//! (`Claimed`). How a claim is decided is `plan.rs`; its SQL
//! `script/claim.rs`.

use std::time::Duration;

use cairn_core::{CrewDef, NewEvent, RunRecord, StepRecord};

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Still held, and extended.
    Held,
    /// Still held and extended, but an operator asked to cancel the run.
    CancelRequested,
    /// Another process holds the run now, or it is no longer running.
    Lost,
}

impl Lease {
    /// From the `cancel_requested_at IS NOT NULL` a heartbeat returned, if
    /// it matched the run at all.
    pub(crate) fn from_beat(cancel: Option<bool>) -> Lease {
        match cancel {
            None => Lease::Lost,
            Some(false) => Lease::Held,
            Some(true) => Lease::CancelRequested,
        }
    }

    /// Whether the heartbeat extended the lease.
    pub fn is_held(self) -> bool {
        self != Lease::Lost
    }
}

/// Whether a claim takes a run that is `running` under another lease.
/// Fencing makes the old holder harmless whichever is chosen: its next
/// write fails.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Takeover {
    /// Only `queued` runs are claimed; a running one is
    /// [`Error::WrongState`].
    #[default]
    Never,
    /// A running run once its lease expired by the database clock; a live
    /// one is [`Error::LeaseHeld`], naming its holder, so two resumes at
    /// once never both run the step.
    IfExpired,
    /// As `IfExpired`, and also a live lease held by exactly this owner:
    /// a holder the caller knows is dead (its process is gone). A lease
    /// that changed hands since is still refused.
    IfHeldBy(String),
    /// Any lease, live or not (an operator's `cairn resume --takeover`).
    Force,
}

impl Takeover {
    /// Whether a running run may be claimed at all.
    pub fn allowed(&self) -> bool {
        *self != Takeover::Never
    }
}

/// A request to take a run's lease.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// Who claims (recorded as `lease_owner` and in the event).
    pub owner: String,
    /// Whether a run `running` under another lease is claimed too.
    pub takeover: Takeover,
    /// How long the lease lasts, by the database clock.
    pub lease: Duration,
    /// Fail the run with `crash_loop` instead of taking over an in-flight
    /// attempt that has already been taken over this many times.
    pub crash_loop_cap: u32,
    /// Extra events recorded in the claim's transaction (e.g. a forced crew).
    pub events: Vec<NewEvent>,
    /// Store this crew definition (and its fingerprint) on the run: a forced
    /// resume with a changed crew.
    pub replace_crew: Option<CrewDef>,
    /// Merge this JSON object into the run's input (its keys replace the
    /// input's) in the claim's transaction, so the steps still to run see
    /// it: a resume with more context. The caller records who and why in
    /// `events`. Refused ([`Error::BadContext`]) unless both are objects.
    pub context: Option<serde_json::Value>,
    /// The crew definition the claimer read with the run, under the
    /// fingerprint it was stored with: the claim then reads the run without
    /// it (a 1,000-agent definition is 58 KB) and takes this one, unless
    /// the run's fingerprint changed since (then it is read again).
    pub read_crew: Option<(cairn_core::Fingerprint, std::sync::Arc<CrewDef>)>,
}

impl ClaimRequest {
    /// A claim by `owner` for `lease`, with the crash-loop cap, of a run no
    /// one else holds (`Takeover::Never`), recording nothing more, the
    /// crew as stored. Callers set what else they need.
    pub fn new(owner: impl Into<String>, lease: Duration, crash_loop_cap: u32) -> ClaimRequest {
        ClaimRequest {
            owner: owner.into(),
            takeover: Takeover::Never,
            lease,
            crash_loop_cap,
            events: vec![],
            replace_crew: None,
            context: None,
            read_crew: None,
        }
    }

    /// The same request, taking any lease, live or not
    /// ([`Takeover::Force`]) when `force`, only a run no one holds
    /// ([`Takeover::Never`]) otherwise.
    pub fn forced(self, force: bool) -> ClaimRequest {
        let takeover = match force {
            true => Takeover::Force,
            false => Takeover::Never,
        };
        ClaimRequest { takeover, ..self }
    }
}

/// A claimed run: the run after the claim (new epoch, status `running`) and
/// the checkpoint row at its cursor, which the claim marked `running`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub run: RunRecord,
    /// The lease the claim granted (the run's new epoch, the claimer):
    /// what every write of the holder is fenced by.
    pub fence: cairn_core::Fence,
    pub at_cursor: Option<StepRecord>,
    /// The claim found the cursor's attempt in flight under a previous holder.
    pub took_over: bool,
    /// The claim inserted the cursor's row: the step never ran before, so
    /// no wait of it was ever opened, let alone answered.
    pub first_run: bool,
}
