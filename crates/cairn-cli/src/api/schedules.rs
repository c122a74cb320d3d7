//! `cairn schedules` both ways: on the database (the engine) and through
//! a server (`/v1/schedules`). One action type, one answer type, so the
//! command and its printing are written once.

use chrono::{DateTime, Utc};
use serde_json::Value;

use cairn::schedule::{CatchUp, Overlap};
use cairn::{Cadence, Engine, NewSchedule, Schedule, Slot};

use super::CrewRef;
use crate::input::usage;

/// Slots `schedules show` lists.
const SHOWN_SLOTS: u32 = 20;

/// What `cairn schedules` does, but `create`.
pub enum ScheduleAct {
    List,
    Show(String),
    Pause(String),
    Resume(String),
    Trigger(String),
    Backfill(String, DateTime<Utc>, DateTime<Utc>),
    Delete(String),
}

/// What it answers.
pub enum ScheduleOut {
    List(Vec<Schedule>),
    One(Box<Schedule>, Vec<Slot>),
    Slots(Vec<Slot>),
    Deleted(String),
}

/// A schedule to create, but its crew.
pub struct ScheduleSpec {
    pub name: String,
    pub input: Value,
    pub cadence: Cadence,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub thread: Option<String>,
    pub priority: cairn::Priority,
    pub tenant: Option<cairn::Tenant>,
}

pub async fn local(engine: &Engine, act: ScheduleAct) -> anyhow::Result<ScheduleOut> {
    Ok(match act {
        ScheduleAct::List => ScheduleOut::List(engine.schedules().await?),
        ScheduleAct::Show(name) => {
            let (schedule, slots) = engine.schedule(&name, SHOWN_SLOTS).await?;
            ScheduleOut::One(Box::new(schedule), slots)
        }
        ScheduleAct::Pause(name) => {
            ScheduleOut::One(Box::new(engine.pause_schedule(&name, true).await?), vec![])
        }
        ScheduleAct::Resume(name) => {
            ScheduleOut::One(Box::new(engine.pause_schedule(&name, false).await?), vec![])
        }
        ScheduleAct::Trigger(name) => {
            ScheduleOut::Slots(vec![engine.trigger_schedule(&name).await?])
        }
        ScheduleAct::Backfill(name, from, to) => {
            ScheduleOut::Slots(engine.backfill_schedule(&name, from, to).await?)
        }
        ScheduleAct::Delete(name) => {
            engine.delete_schedule(&name).await?;
            ScheduleOut::Deleted(name)
        }
    })
}

pub async fn local_create(
    engine: &Engine,
    crew: CrewRef,
    spec: ScheduleSpec,
) -> anyhow::Result<Schedule> {
    let CrewRef::File(crew, _) = crew else {
        return Err(usage("--crew: give a crew file"));
    };
    let new = NewSchedule {
        name: spec.name,
        crew: crew.def().clone(),
        input: spec.input,
        cadence: spec.cadence,
        overlap: spec.overlap,
        catch_up: spec.catch_up,
        thread: spec.thread,
        priority: spec.priority,
        tenant: spec.tenant,
        by: Some(cairn::local_actor(None, None).by),
    };
    Ok(engine.create_schedule(&new).await?)
}
