//! `cairn schedules …`: runs started by the clock. They act on the
//! database (`--db`); through `--server` they are not built yet (the
//! server fires the schedules of its database all the same).

use cairn::schedule::{BadSchedule, CatchUp, Overlap};
use cairn::{Cadence, Engine, NewSchedule};

use super::{engine, Connect};
use crate::api::CrewRef;
use crate::args::SchedulesCommand;
use crate::input::{parse_input, usage};
use crate::output::schedules::{print_deleted, print_schedule, print_schedules, print_slots};
use crate::report::exit;

/// Slots `schedules show` lists.
const SHOWN_SLOTS: u32 = 20;

pub async fn main(to: &impl Connect, command: SchedulesCommand, json: bool) -> anyhow::Result<u8> {
    let why = "schedules are managed on the database (--db) for now; any server or worker of it fires them";
    if let SchedulesCommand::Create { .. } = &command {
        let new = new_schedule(to, &command)?;
        let api = to.connect(true).await?;
        let made = engine(&api, "schedules create", why)?
            .create_schedule(&new)
            .await?;
        print_schedule(&made, &[], json)?;
        return Ok(exit::OK);
    }
    let api = to.connect(false).await?;
    let engine = engine(&api, "schedules", why)?;
    act(engine, command, json).await?;
    Ok(exit::OK)
}

async fn act(engine: &Engine, command: SchedulesCommand, json: bool) -> anyhow::Result<()> {
    match command {
        SchedulesCommand::Create { .. } => unreachable_create(),
        SchedulesCommand::List => print_schedules(&engine.schedules().await?, json),
        SchedulesCommand::Show { name } => {
            let (schedule, slots) = engine.schedule(&name, SHOWN_SLOTS).await?;
            print_schedule(&schedule, &slots, json)
        }
        SchedulesCommand::Pause { name } => {
            print_schedule(&engine.pause_schedule(&name, true).await?, &[], json)
        }
        SchedulesCommand::Resume { name } => {
            print_schedule(&engine.pause_schedule(&name, false).await?, &[], json)
        }
        SchedulesCommand::Trigger { name } => {
            print_slots(&[engine.trigger_schedule(&name).await?], json)
        }
        SchedulesCommand::Backfill { name, from, to } => {
            let (from, to) = (time("--from", &from)?, time("--to", &to)?);
            print_slots(&engine.backfill_schedule(&name, from, to).await?, json)
        }
        SchedulesCommand::Delete { name } => {
            engine.delete_schedule(&name).await?;
            print_deleted(&name, json)
        }
    }
}

/// `create` is handled before `act`; reaching here is a bug, not input.
fn unreachable_create() -> anyhow::Result<()> {
    Err(anyhow::anyhow!(
        "schedules create is handled before the others"
    ))
}

fn time(flag: &str, text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| usage(format!("{flag}: `{text}` is not an RFC 3339 time ({e})")))
}

/// The schedule `create`'s flags describe; a flag that does not read is a
/// usage error naming it, and nothing is stored.
fn new_schedule(to: &impl Connect, command: &SchedulesCommand) -> anyhow::Result<NewSchedule> {
    let SchedulesCommand::Create {
        name,
        crew,
        input,
        every,
        cron,
        tz,
        overlap,
        catch_up,
        thread,
        priority,
        tenant,
    } = command
    else {
        return Err(anyhow::anyhow!("not a create"));
    };
    let bad = |e: BadSchedule| usage(e.to_string());
    let cadence = match (every, cron) {
        (Some(every), _) => {
            let age = cairn::parse_age(every).map_err(|e| usage(format!("--every: {e}")))?;
            Cadence::every(age).map_err(bad)?
        }
        (None, Some(cron)) => Cadence::cron(cron, tz.as_deref()).map_err(bad)?,
        (None, None) => return Err(usage("give --every AGE or --cron EXPR")),
    };
    let CrewRef::File(crew, _) = to.read_crew(crew)? else {
        return Err(usage("--crew: give a crew file"));
    };
    let priority =
        cairn::Priority::new(*priority).map_err(|e| usage(format!("--priority: {e}")))?;
    let tenant = tenant
        .clone()
        .map(cairn::Tenant::new)
        .transpose()
        .map_err(|e| usage(format!("--tenant: {e}")))?;
    Ok(NewSchedule {
        name: name.clone(),
        crew: crew.def().clone(),
        input: parse_input(input)?,
        cadence,
        overlap: Overlap::parse(overlap).map_err(bad)?,
        catch_up: CatchUp::parse(catch_up).map_err(bad)?,
        thread: thread.clone(),
        priority,
        tenant,
        by: Some(cairn::local_actor(None, None).by),
    })
}
