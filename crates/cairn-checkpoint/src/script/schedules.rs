//! Schedules (`ScheduleStore`): each schedule fires in a transaction of its
//! own that reads the database's clock, decides its due slots
//! (`cairn_core::schedule`: catch-up, then overlap), submits their runs
//! with the key `schedule:NAME:SLOT` (a slot fired twice finds its run)
//! and moves `next_at` forward, never back. On PostgreSQL the schedule's
//! row is taken `FOR UPDATE SKIP LOCKED`, so processes firing together
//! fire each schedule once; SQLite has one writer.

use async_trait::async_trait;
use cairn_core::schedule::{Schedule, SlotOutcome};
use cairn_core::{Actor, Cadence, CatchUp, Fingerprint, Overlap, RunId};
use chrono::{DateTime, Utc};

use crate::contract::{NewSchedule, ScheduleStore, Slot};
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Action, Error, NewRun, OnBusy, Result};

use super::boundary::{bounded, placed};
use super::storable::json_ok;
use super::{ScriptHost, TxKind};

macro_rules! cols {
    () => {
        "name, crew_name, fingerprint, input, cadence, overlap, catch_up, thread_id, priority, \
         tenant, CASE WHEN paused THEN 1 ELSE 0 END AS paused, next_at, created_at, created_by"
    };
}

fn corrupt(what: String) -> Error {
    Error::Corruption(cairn_core::Corruption::new(nil_run(), what))
}

fn decode(r: &Row) -> Result<Schedule> {
    let name = r.text("name")?;
    let bad = |what: &str, e: String| corrupt(format!("schedule `{name}`: {what}: {e}"));
    let cadence: Cadence = serde_json::from_value(r.json("cadence", nil_run(), "a cadence")?)
        .map_err(|e| bad("cadence", e.to_string()))?;
    let overlap = Overlap::parse(&r.text("overlap")?).map_err(|e| bad("overlap", e.0))?;
    let catch_up = CatchUp::parse(&r.text("catch_up")?).map_err(|e| bad("catch-up", e.0))?;
    Ok(Schedule {
        crew: r.text("crew_name")?,
        fingerprint: r.text("fingerprint")?,
        input: r.json("input", nil_run(), "a schedule's input")?,
        cadence,
        overlap,
        catch_up,
        thread: r.opt_text("thread_id")?,
        priority: i32::try_from(r.int("priority")?).unwrap_or(0),
        tenant: r.opt_text("tenant")?,
        paused: r.int("paused")? != 0,
        next_at: r.time("next_at", nil_run(), "a schedule's next slot")?,
        created_at: r.time("created_at", nil_run(), "a schedule's creation")?,
        created_by: r.opt_text("created_by")?,
        name,
    })
}

async fn db_now(c: &mut Conn<'_>) -> Result<DateTime<Utc>> {
    let row = c.fetch_optional(query("SELECT {now} AS now")).await?;
    let row = row.ok_or_else(|| corrupt("`SELECT now` returned no row".into()))?;
    row.time("now", nil_run(), "the database's clock")
}

async fn find_in(c: &mut Conn<'_>, name: &str, lock: bool) -> Result<Schedule> {
    let sql = match lock {
        true => concat!(
            "SELECT ",
            cols!(),
            " FROM schedules WHERE name = :name {for_update}"
        ),
        false => concat!("SELECT ", cols!(), " FROM schedules WHERE name = :name"),
    };
    let row = c.fetch_optional(query(sql).bind("name", name)).await?;
    decode(&row.ok_or_else(|| Error::ScheduleNotFound(name.to_owned()))?)
}

async fn create_in(
    c: &mut Conn<'_>,
    new: &NewSchedule,
    def: &serde_json::Value,
) -> Result<Schedule> {
    // Whole seconds: intervals count from here, and slot keys name seconds.
    let now = whole_seconds(db_now(c).await?);
    let next = new.cadence.next_after(now, now).map_err(bad_cadence)?;
    let next =
        next.ok_or_else(|| Error::BadSchedule("the cron expression never matches".into()))?;
    let fingerprint = new.crew.fingerprint();
    super::crews::remember_in(c, &new.crew, &fingerprint, def).await?;
    let cadence = serde_json::to_value(&new.cadence).unwrap_or_default();
    let inserted = c
        .execute(
            query(
                "INSERT INTO schedules (name, crew_name, fingerprint, input, cadence, overlap, \
                 catch_up, thread_id, priority, tenant, paused, next_at, created_at, created_by) \
                 VALUES (:name, :crew, :fingerprint, :input, :cadence, :overlap, :catch_up, \
                 :thread, :priority, :tenant, FALSE, {time:next}, {time:now}, :by) \
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind("name", new.name.as_str())
            .bind("crew", new.crew.name.as_str())
            .bind("fingerprint", fingerprint.as_str())
            .bind("input", &new.input)
            .bind("cadence", cadence)
            .bind("overlap", new.overlap.as_str())
            .bind("catch_up", new.catch_up.to_string())
            .bind("thread", &new.thread)
            .bind("priority", i64::from(new.priority.get()))
            .bind("tenant", new.tenant.as_ref().map(|t| t.as_str()))
            .bind("next", rfc3339_ms(next))
            .bind("now", rfc3339_ms(now))
            .bind("by", new.by.as_deref()),
        )
        .await?;
    if inserted == 0 {
        return Err(Error::ScheduleExists(new.name.clone()));
    }
    find_in(c, &new.name, false).await
}

fn rfc3339_ms(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn bad_cadence(e: cairn_core::BadSchedule) -> Error {
    Error::BadSchedule(e.0)
}

/// The schedule's newest fired run that has not ended, if any.
async fn unfinished_in(c: &mut Conn<'_>, name: &str) -> Result<Option<RunId>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT s.run_id FROM schedule_slots s JOIN runs r ON r.id = s.run_id \
                 WHERE s.schedule = :name AND s.outcome = 'fired' \
                 AND r.status IN ('queued', 'running', 'waiting', 'interrupted') \
                 ORDER BY s.slot DESC LIMIT 1",
            )
            .bind("name", name),
        )
        .await?;
    Ok(row
        .map(|r| r.opt_uuid("run_id", nil_run(), "a slot's run"))
        .transpose()?
        .flatten()
        .map(RunId::from_uuid))
}

/// Records `slot`'s outcome (a slot decided before keeps its first).
async fn record_in(
    c: &mut Conn<'_>,
    name: &str,
    slot: DateTime<Utc>,
    outcome: SlotOutcome,
    run: Option<RunId>,
) -> Result<Slot> {
    c.execute(
        query(
            "INSERT INTO schedule_slots (schedule, slot, outcome, run_id, at) \
             VALUES (:name, {time:slot}, :outcome, :run, {now}) \
             ON CONFLICT (schedule, slot) DO UPDATE SET outcome = excluded.outcome, \
             run_id = excluded.run_id, at = excluded.at \
             WHERE schedule_slots.outcome = 'buffered'",
        )
        .bind("name", name)
        .bind("slot", rfc3339_ms(slot))
        .bind("outcome", outcome.as_str())
        .bind("run", run),
    )
    .await?;
    Ok(Slot {
        schedule: name.to_owned(),
        slot,
        outcome,
        run_id: run,
        at: Utc::now(),
    })
}

/// Submits a schedule's slots within one transaction: its crew version is
/// read once, at the first slot that runs, and every run records the same
/// firing time (the transaction's clock).
struct Submitter<'s> {
    s: &'s Schedule,
    fired_at: DateTime<Utc>,
    crew: Option<cairn_core::CrewDef>,
}

impl<'s> Submitter<'s> {
    fn new(s: &'s Schedule, fired_at: DateTime<Utc>) -> Submitter<'s> {
        Submitter {
            s,
            fired_at,
            crew: None,
        }
    }

    /// Submits `slot`'s run (its key makes a second submit find the first).
    async fn submit(&mut self, c: &mut Conn<'_>, slot: DateTime<Utc>) -> Result<RunId> {
        let s = self.s;
        let crew = match self.crew.take() {
            Some(crew) => crew,
            None => {
                let fingerprint = Fingerprint::from_stored(s.fingerprint.clone());
                let found = super::crews::definition_in(c, &fingerprint).await?;
                found.ok_or_else(|| {
                    corrupt(format!(
                        "schedule `{}`: its crew version {fingerprint} is not stored",
                        s.name
                    ))
                })?
            }
        };
        self.crew = Some(crew.clone());
        let tenant = s.tenant.as_deref().map(cairn_core::Tenant::new).transpose();
        let new = NewRun {
            input: s.input_of(slot, self.fired_at),
            idempotency_key: Some(Schedule::key(&s.name, slot)),
            thread_id: s.thread.clone(),
            on_busy: OnBusy::Queue,
            priority: cairn_core::Priority::new(i64::from(s.priority)).unwrap_or_default(),
            tenant: tenant.map_err(|e| corrupt(e.to_string()))?,
            by: Some(Actor::new(format!("schedule:{}", s.name))),
            ..NewRun::new(crew, serde_json::Value::Null)
        };
        let def = super::storable::submit_ok(&new)?;
        Ok(super::runs::submit_in(c, new, def).await?.run.id)
    }
}

/// One slot under the overlap policy, given the schedule's unfinished run.
async fn place_slot(
    c: &mut Conn<'_>,
    runs: &mut Submitter<'_>,
    slot: DateTime<Utc>,
    busy: &mut Option<RunId>,
    buffered: &mut bool,
) -> Result<Slot> {
    let s = runs.s;
    let outcome = match (s.overlap, *busy) {
        (Overlap::Skip, Some(_)) => SlotOutcome::Skipped,
        (Overlap::Buffer, Some(_)) if *buffered => SlotOutcome::Skipped,
        (Overlap::Buffer, Some(_)) => {
            *buffered = true;
            SlotOutcome::Buffered
        }
        (Overlap::Cancel, Some(previous)) => {
            let by = Actor::new(format!("schedule:{}", s.name)).because("overlap = cancel");
            super::ends::act_in(c, previous, Action::Cancel, &by).await?;
            SlotOutcome::Fired
        }
        _ => SlotOutcome::Fired,
    };
    let run = match outcome {
        SlotOutcome::Fired => {
            let id = runs.submit(c, slot).await?;
            *busy = Some(id);
            Some(id)
        }
        _ => None,
    };
    record_in(c, &s.name, slot, outcome, run).await
}

/// The buffered slot, fired if the run it waited for ended; and whether
/// one still waits.
async fn release_buffered(
    c: &mut Conn<'_>,
    runs: &mut Submitter<'_>,
    busy: Option<RunId>,
) -> Result<(Option<Slot>, bool)> {
    let s = runs.s;
    let row = c
        .fetch_optional(
            query(
                "SELECT slot FROM schedule_slots WHERE schedule = :name AND outcome = 'buffered'",
            )
            .bind("name", s.name.as_str()),
        )
        .await?;
    match (row, busy) {
        (None, _) => Ok((None, false)),
        (Some(_), Some(_)) => Ok((None, true)),
        (Some(row), None) => {
            let slot = row.time("slot", nil_run(), "a buffered slot")?;
            let run = runs.submit(c, slot).await?;
            let fired = record_in(c, &s.name, slot, SlotOutcome::Fired, Some(run)).await?;
            Ok((Some(fired), false))
        }
    }
}

/// One schedule's pass, if it is (still) due or holds a buffered slot.
async fn fire_in(c: &mut Conn<'_>, name: &str) -> Result<Vec<Slot>> {
    let sql = concat!(
        "SELECT ",
        cols!(),
        " FROM schedules WHERE name = :name AND NOT paused {skip_locked}"
    );
    let Some(row) = c.fetch_optional(query(sql).bind("name", name)).await? else {
        return Ok(vec![]); // paused, deleted, or being fired elsewhere
    };
    let s = decode(&row)?;
    let now = db_now(c).await?;
    let mut runs = Submitter::new(&s, now);
    let mut busy = unfinished_in(c, name).await?;
    let (released, mut buffered) = release_buffered(c, &mut runs, busy).await?;
    let mut decided: Vec<Slot> = released.into_iter().collect();
    if let Some(slot) = decided.first() {
        busy = slot.run_id;
    }
    if s.next_at > now {
        return Ok(decided);
    }
    let (due, next) = s
        .cadence
        .due(s.created_at, s.next_at, now)
        .map_err(bad_cadence)?;
    let run = s.catch_up.pick(&due);
    for slot in due {
        let slot = match run.contains(&slot) {
            true => place_slot(c, &mut runs, slot, &mut busy, &mut buffered).await?,
            false => record_in(c, name, slot, SlotOutcome::Missed, None).await?,
        };
        decided.push(slot);
    }
    let next = next.unwrap_or(DateTime::<Utc>::MAX_UTC);
    c.execute(
        query("UPDATE schedules SET next_at = {time:next} WHERE name = :name AND next_at < {time:next}")
            .bind("next", rfc3339_ms(next))
            .bind("name", name),
    )
    .await?;
    Ok(decided)
}

async fn due_names(c: &mut Conn<'_>, limit: u32) -> Result<Vec<String>> {
    let rows = c
        .fetch_all(
            query(
                "SELECT name FROM schedules WHERE NOT paused AND (next_at <= {now} OR EXISTS \
                 (SELECT 1 FROM schedule_slots b WHERE b.schedule = schedules.name \
                 AND b.outcome = 'buffered')) ORDER BY next_at LIMIT :limit",
            )
            .bind("limit", limit),
        )
        .await?;
    rows.iter().map(|r| r.text("name")).collect()
}

async fn pause_in(c: &mut Conn<'_>, name: &str, paused: bool) -> Result<Schedule> {
    let s = find_in(c, name, true).await?;
    let now = db_now(c).await?;
    let next = match paused {
        true => s.next_at,
        false => s
            .cadence
            .next_after(s.created_at, now)
            .map_err(bad_cadence)?
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
            .max(s.next_at),
    };
    c.execute(
        query("UPDATE schedules SET paused = :paused, next_at = {time:next} WHERE name = :name")
            .bind("paused", paused)
            .bind("next", rfc3339_ms(next))
            .bind("name", name),
    )
    .await?;
    find_in(c, name, false).await
}

async fn backfill_in(
    c: &mut Conn<'_>,
    name: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<Slot>> {
    let s = find_in(c, name, true).await?;
    let first = match s
        .cadence
        .next_after(s.created_at, from - chrono::Duration::milliseconds(1))
    {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(vec![]),
        Err(e) => return Err(bad_cadence(e)),
    };
    let (slots, _) = s
        .cadence
        .due(s.created_at, first, to)
        .map_err(bad_cadence)?;
    let mut runs = Submitter::new(&s, db_now(c).await?);
    let mut done = Vec::with_capacity(slots.len());
    for slot in slots {
        let run = runs.submit(c, slot).await?;
        done.push(record_in(c, name, slot, SlotOutcome::Fired, Some(run)).await?);
    }
    Ok(done)
}

async fn trigger_in(c: &mut Conn<'_>, name: &str) -> Result<Slot> {
    let s = find_in(c, name, true).await?;
    let now = db_now(c).await?;
    let slot = whole_seconds(now);
    let run = Submitter::new(&s, now).submit(c, slot).await?;
    record_in(c, name, slot, SlotOutcome::Fired, Some(run)).await
}

/// Whole seconds: a slot's key names it to the second.
fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::Timelike;
    t.with_nanosecond(0).unwrap_or(t)
}

fn decode_slot(r: &Row) -> Result<Slot> {
    let outcome = r.text("outcome")?;
    Ok(Slot {
        schedule: r.text("schedule")?,
        slot: r.time("slot", nil_run(), "a slot")?,
        outcome: outcome.parse().map_err(corrupt)?,
        run_id: r
            .opt_uuid("run_id", nil_run(), "a slot's run")?
            .map(RunId::from_uuid),
        at: r.time("at", nil_run(), "a slot's decision")?,
    })
}

async fn slots_in(c: &mut Conn<'_>, name: &str, limit: u32) -> Result<Vec<Slot>> {
    find_in(c, name, false).await?;
    let rows = c
        .fetch_all(
            query(
                "SELECT schedule, slot, outcome, run_id, at FROM schedule_slots \
                 WHERE schedule = :name ORDER BY slot DESC LIMIT :limit",
            )
            .bind("name", name)
            .bind("limit", limit),
        )
        .await?;
    rows.iter().map(decode_slot).collect()
}

#[async_trait]
impl<H: ScriptHost> ScheduleStore for H {
    async fn create_schedule(&self, new: &NewSchedule) -> Result<Schedule> {
        Schedule::check_name(&new.name).map_err(bad_cadence)?;
        new.cadence.check().map_err(bad_cadence)?;
        json_ok("the schedule's input", Some(&new.input))?;
        let def = new.crew.to_json();
        let new = new.clone();
        let write = self.tx(TxKind::Write, script!(|c| create_in(c, &new, &def).await));
        bounded("create_schedule", self.target(), None, write).await
    }

    async fn schedules(&self) -> Result<Vec<Schedule>> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| {
                let sql = concat!("SELECT ", cols!(), " FROM schedules ORDER BY name");
                let rows = c.fetch_all(query(sql)).await?;
                rows.iter().map(decode).collect::<Result<Vec<_>>>()
            }),
        );
        placed(self.target(), None, read).await
    }

    async fn schedule(&self, name: &str) -> Result<Schedule> {
        let name = name.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| find_in(c, &name, false).await));
        placed(self.target(), None, read).await
    }

    async fn pause_schedule(&self, name: &str, paused: bool) -> Result<Schedule> {
        let name = name.to_owned();
        let write = self.tx(TxKind::Write, script!(|c| pause_in(c, &name, paused).await));
        bounded("pause_schedule", self.target(), None, write).await
    }

    async fn delete_schedule(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        let write = self.tx(
            TxKind::Write,
            script!(|c| {
                find_in(c, &name, true).await?;
                c.execute(
                    query("DELETE FROM schedules WHERE name = :name").bind("name", name.as_str()),
                )
                .await?;
                Ok(())
            }),
        );
        bounded("delete_schedule", self.target(), None, write).await
    }

    async fn fire_schedules(&self, limit: u32) -> Result<Vec<Slot>> {
        let read = self.tx(TxKind::Single, script!(|c| due_names(c, limit).await));
        let names = placed(self.target(), None, read).await?;
        let mut decided = vec![];
        for name in names {
            let write = self.tx(TxKind::Write, script!(|c| fire_in(c, &name).await));
            decided.extend(bounded("fire_schedules", self.target(), None, write).await?);
        }
        Ok(decided)
    }

    async fn trigger_schedule(&self, name: &str) -> Result<Slot> {
        let name = name.to_owned();
        let write = self.tx(TxKind::Write, script!(|c| trigger_in(c, &name).await));
        bounded("trigger_schedule", self.target(), None, write).await
    }

    async fn backfill_schedule(
        &self,
        name: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Slot>> {
        let name = name.to_owned();
        let write = self.tx(
            TxKind::Write,
            script!(|c| backfill_in(c, &name, from, to).await),
        );
        bounded("backfill_schedule", self.target(), None, write).await
    }

    async fn schedule_slots(&self, name: &str, limit: u32) -> Result<Vec<Slot>> {
        let name = name.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| slots_in(c, &name, limit).await));
        placed(self.target(), None, read).await
    }

    async fn missed_slots(&self) -> Result<u64> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| {
                let sql = "SELECT COUNT(*) AS n FROM schedule_slots WHERE outcome = 'missed'";
                let row = c.fetch_optional(query(sql)).await?;
                Ok(row.map_or(Ok(0), |r| r.int("n"))?.max(0) as u64)
            }),
        );
        placed(self.target(), None, read).await
    }
}
