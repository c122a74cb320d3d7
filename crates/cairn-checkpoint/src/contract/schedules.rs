//! Schedules: runs started by the clock, each slot exactly once.

use async_trait::async_trait;
use cairn_core::schedule::{CatchUp, Overlap, Schedule, SlotOutcome};
use cairn_core::{Cadence, CrewDef, RunId};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::Result;

/// A schedule to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub name: String,
    /// The crew its runs use (stored as a version if it is not yet).
    pub crew: CrewDef,
    pub input: Value,
    pub cadence: Cadence,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub thread: Option<String>,
    pub priority: cairn_core::Priority,
    pub tenant: Option<cairn_core::Tenant>,
    pub by: Option<String>,
}

/// What became of one slot of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Slot {
    pub schedule: String,
    pub slot: DateTime<Utc>,
    pub outcome: SlotOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// When it was decided.
    pub at: DateTime<Utc>,
}

/// Schedules and their slots. Firing is a pass any process makes
/// ([`fire_schedules`]); each schedule fires in a transaction of its own
/// that submits its slots' runs (key `schedule:NAME:SLOT`) and moves its
/// next slot forward, so a slot runs at most once however many fire.
///
/// [`fire_schedules`]: ScheduleStore::fire_schedules
#[async_trait]
pub trait ScheduleStore: Send + Sync + 'static {
    /// Stores a schedule whose first slot is the first after now; a name
    /// taken is `ScheduleExists`, nothing stored.
    async fn create_schedule(&self, new: &NewSchedule) -> Result<Schedule>;

    /// Every schedule, by name.
    async fn schedules(&self) -> Result<Vec<Schedule>>;

    /// The schedule `name` (`ScheduleNotFound` if none).
    async fn schedule(&self, name: &str) -> Result<Schedule>;

    /// Pauses or resumes `name`; a resumed schedule's next slot is the
    /// first after now (slots while it was paused never run).
    async fn pause_schedule(&self, name: &str, paused: bool) -> Result<Schedule>;

    /// Deletes `name` and its slots (its runs stay).
    async fn delete_schedule(&self, name: &str) -> Result<()>;

    /// Fires up to `limit` due schedules: each due slot's outcome by the
    /// catch-up and overlap policies, and buffered slots whose previous
    /// run ended. The slots decided, oldest first.
    async fn fire_schedules(&self, limit: u32) -> Result<Vec<Slot>>;

    /// Runs `name` now, outside its cadence (slot: the database's now).
    async fn trigger_schedule(&self, name: &str) -> Result<Slot>;

    /// Runs every slot of `name` from `from` to `to` (at most 1,000): a
    /// slot that ran already keeps its run.
    async fn backfill_schedule(
        &self,
        name: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Slot>>;

    /// The newest `limit` slots of `name`, newest first.
    async fn schedule_slots(&self, name: &str, limit: u32) -> Result<Vec<Slot>>;

    /// Slots recorded `missed`, over every schedule still stored (a
    /// deleted schedule's go with it).
    async fn missed_slots(&self) -> Result<u64>;
}
