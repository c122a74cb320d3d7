//! Schedules: runs started by the clock (`cairn_core::schedule` is the
//! rule, `ScheduleStore` applies it). Every worker and server fires due
//! schedules once a second (`work.rs`); each slot runs at most once however
//! many do.

use chrono::{DateTime, Utc};

use cairn_checkpoint::{NewSchedule, Slot};
use cairn_core::Schedule;

use crate::{Engine, Result};

/// The schedule that started a run and the slot it ran for, as its
/// idempotency key names them (`schedule:NAME:SLOT`): in `runs show
/// --json`, `runs list --json` and `GET /v1/runs/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scheduled {
    pub schedule: String,
    pub scheduled_for: DateTime<Utc>,
}

impl Scheduled {
    /// What `run`'s idempotency key says, if a schedule submitted it.
    pub fn of(run: &cairn_core::RunRecord) -> Option<Scheduled> {
        let (name, slot) = Schedule::of_key(run.idempotency_key.as_deref()?)?;
        Some(Scheduled {
            schedule: name.to_owned(),
            scheduled_for: slot,
        })
    }
}

/// A run as `runs list --json` prints it: the record, and what schedule
/// started it, if one did.
#[derive(Debug, serde::Serialize)]
pub struct Listed<'a> {
    #[serde(flatten)]
    pub run: &'a cairn_core::RunRecord,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<Scheduled>,
}

impl<'a> Listed<'a> {
    pub fn of(run: &'a cairn_core::RunRecord) -> Listed<'a> {
        Listed {
            run,
            scheduled: Scheduled::of(run),
        }
    }
}

/// Schedules one pass fires at most (the rest wait for the next pass).
const FIRE_BATCH: u32 = 32;

impl Engine {
    /// Stores a schedule (its crew version too); its first slot is the
    /// first after now.
    pub async fn create_schedule(&self, new: &NewSchedule) -> Result<Schedule> {
        Ok(self.store().create_schedule(new).await?)
    }

    /// Every schedule, by name.
    pub async fn schedules(&self) -> Result<Vec<Schedule>> {
        Ok(self.store().schedules().await?)
    }

    /// The schedule `name` and its newest `limit` slots, newest first.
    pub async fn schedule(&self, name: &str, limit: u32) -> Result<(Schedule, Vec<Slot>)> {
        let schedule = self.store().schedule(name).await?;
        let slots = self.store().schedule_slots(name, limit).await?;
        Ok((schedule, slots))
    }

    /// Pauses (`true`) or resumes `name`.
    pub async fn pause_schedule(&self, name: &str, paused: bool) -> Result<Schedule> {
        Ok(self.store().pause_schedule(name, paused).await?)
    }

    /// Deletes `name` and its slots; its runs stay.
    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        Ok(self.store().delete_schedule(name).await?)
    }

    /// Runs `name` now, outside its cadence.
    pub async fn trigger_schedule(&self, name: &str) -> Result<Slot> {
        Ok(self.store().trigger_schedule(name).await?)
    }

    /// Runs every slot of `name` from `from` to `to` (each once: a slot
    /// that ran keeps its run).
    pub async fn backfill_schedule(
        &self,
        name: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Slot>> {
        Ok(self.store().backfill_schedule(name, from, to).await?)
    }

    /// Slots recorded `missed`, over every stored schedule.
    pub async fn missed_slots(&self) -> Result<u64> {
        Ok(self.store().missed_slots().await?)
    }

    /// One firing pass over the due schedules: the slots decided.
    pub async fn fire_schedules(&self) -> Result<Vec<Slot>> {
        Ok(self.store().fire_schedules(FIRE_BATCH).await?)
    }
}
