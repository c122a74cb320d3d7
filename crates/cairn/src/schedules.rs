//! Schedules: runs started by the clock (`cairn_core::schedule` is the
//! rule, `ScheduleStore` applies it). Every worker and server fires due
//! schedules once a poll (`work.rs`); each slot runs at most once however
//! many do.

use chrono::{DateTime, Utc};

use cairn_checkpoint::{NewSchedule, Slot};
use cairn_core::Schedule;

use crate::{Engine, Result};

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

    /// One firing pass over the due schedules: the slots decided.
    pub async fn fire_schedules(&self) -> Result<Vec<Slot>> {
        Ok(self.store().fire_schedules(FIRE_BATCH).await?)
    }
}
