//! `cairn schedules …`: runs started by the clock, on the database or
//! through `--server` alike (`api/schedules.rs`).

use cairn::schedule::{BadSchedule, CatchUp, Overlap};
use cairn::Cadence;

use super::Connect;
use crate::api::schedules::{ScheduleAct, ScheduleOut, ScheduleSpec};
use crate::api::Api;
use crate::args::SchedulesCommand;
use crate::input::{parse_input, usage};
use crate::output::schedules::{print_deleted, print_schedule, print_schedules, print_slots};
use crate::report::exit;

pub async fn main(to: &impl Connect, command: SchedulesCommand, json: bool) -> anyhow::Result<u8> {
    let act = match command {
        SchedulesCommand::Create { .. } => {
            let (crew, spec) = spec(to, command)?;
            let api = to.connect(true).await?;
            let made = api.create_schedule(crew, spec).await?;
            print_schedule(&made, &[], json)?;
            return Ok(exit::OK);
        }
        SchedulesCommand::List => ScheduleAct::List,
        SchedulesCommand::Show { name } => ScheduleAct::Show(name),
        SchedulesCommand::Pause { name } => ScheduleAct::Pause(name),
        SchedulesCommand::Resume { name } => ScheduleAct::Resume(name),
        SchedulesCommand::Trigger { name } => ScheduleAct::Trigger(name),
        SchedulesCommand::Backfill { name, from, to } => {
            ScheduleAct::Backfill(name, time("--from", &from)?, time("--to", &to)?)
        }
        SchedulesCommand::Delete { name } => ScheduleAct::Delete(name),
    };
    match to.connect(false).await?.schedules(act).await? {
        ScheduleOut::List(list) => print_schedules(&list, json)?,
        ScheduleOut::One(schedule, slots) => print_schedule(&schedule, &slots, json)?,
        ScheduleOut::Slots(slots) => print_slots(&slots, json)?,
        ScheduleOut::Deleted(name) => print_deleted(&name, json)?,
    }
    Ok(exit::OK)
}

fn time(flag: &str, text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| usage(format!("{flag}: `{text}` is not an RFC 3339 time ({e})")))
}

/// The crew and schedule `create`'s flags describe; a flag that does not
/// read is a usage error naming it, and nothing is stored.
fn spec(
    to: &impl Connect,
    command: SchedulesCommand,
) -> anyhow::Result<(crate::api::CrewRef, ScheduleSpec)> {
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
        return Err(anyhow::anyhow!("`schedules create` only"));
    };
    let bad = |e: BadSchedule| usage(e.to_string());
    let cadence = match (every, cron) {
        (Some(every), _) => {
            let age = cairn::parse_age(&every).map_err(|e| usage(format!("--every: {e}")))?;
            Cadence::every(age).map_err(bad)?
        }
        (None, Some(cron)) => Cadence::cron(&cron, tz.as_deref()).map_err(bad)?,
        (None, None) => return Err(usage("give --every AGE or --cron EXPR")),
    };
    let priority = cairn::Priority::new(priority).map_err(|e| usage(format!("--priority: {e}")))?;
    let tenant = tenant.map(cairn::Tenant::new).transpose();
    let spec = ScheduleSpec {
        name,
        input: parse_input(&input)?,
        cadence,
        overlap: Overlap::parse(&overlap).map_err(bad)?,
        catch_up: CatchUp::parse(&catch_up).map_err(bad)?,
        thread,
        priority,
        tenant: tenant.map_err(|e| usage(format!("--tenant: {e}")))?,
    };
    Ok((to.read_crew(&crew)?, spec))
}
