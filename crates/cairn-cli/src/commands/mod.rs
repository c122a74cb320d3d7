//! Each command, written once against [`Api`]: what it reads from the
//! command line, what it asks, what it prints and its exit code. Whether
//! it talks to the database or a server is the [`Connect`] it is given;
//! what needs the database itself is refused with a server, saying why.

mod crews;
mod hooks;
mod limits;
mod people;
mod run;
mod runs;
mod schedules;
mod serve;
mod signals;
mod threads;
mod waits;

use crate::api::local::Db;
use crate::api::remote::Server;
use crate::api::{Api, Connect};
use crate::args::{Cli, Command};
use crate::input::usage;
use crate::output;
use crate::report::{action_exit, exit};

use cairn::RunId;

/// Runs the command `cli` names. `db_given`: `--db` was typed (not the
/// default or CAIRN_DATABASE_URL), which `demo` refuses rather than ignores.
pub async fn main(cli: Cli, db_given: bool) -> anyhow::Result<u8> {
    let json = cli.json;
    match (cli.command, cli.server) {
        (
            command @ (Command::Serve { .. } | Command::Worker { .. } | Command::Demo { .. }),
            None,
        ) => serve::main(command, &cli.db, db_given).await,
        (command, Some(base)) => {
            let token = cli.token;
            dispatch(&Server { base, token }, command, json).await
        }
        (command, None) => {
            let done = dispatch(&Db(cli.db), command, json).await;
            crate::traces::finish().await;
            done
        }
    }
}

/// The commands both modes have.
async fn dispatch(to: &impl Connect, command: Command, json: bool) -> anyhow::Result<u8> {
    match command {
        Command::Run { submit, progress } => run::run(to, submit, progress, json).await,
        Command::Submit { submit } => run::submit(to, submit, json).await,
        Command::Resume(args) => run::resume(to, args, json).await,
        Command::Doctor => run::doctor(to, json).await,
        Command::Runs { command } => runs::main(to, command, json).await,
        Command::Waits { command } => waits::main(to, command, json).await,
        Command::Compact {
            policy,
            thread,
            vacuum,
        } => threads::compact(to, policy, thread, vacuum, json).await,
        Command::Threads { command } => threads::main(to, command, json).await,
        Command::Limits { command } => limits::main(to, command, json).await,
        Command::Principals { command } => people::principals(to, command, json).await,
        Command::Schedules { command } => schedules::main(to, command, json).await,
        Command::Signal { command } => signals::main(to, command, json).await,
        Command::Hooks { command } => hooks::main(to, command, json).await,
        Command::Audit(args) => people::audit(to, args, json).await,
        Command::Crews { command } => crews::main(to, command, json).await,
        Command::Workers => crews::workers(to, json).await,
        Command::Serve { .. } | Command::Worker { .. } | Command::Demo { .. } => Err(local_only(
            "serve, worker and demo",
            "they run next to the database (--db)",
        )),
    }
}

/// The engine of `api`, or the refusal of `what` with a server.
fn engine<'a>(api: &'a impl Api, what: &str, why: &str) -> anyhow::Result<&'a cairn::Engine> {
    api.engine().ok_or_else(|| local_only(what, why))
}

/// The refusal of `what` with `--server` (exit 2).
fn local_only(what: &str, why: &str) -> anyhow::Error {
    usage(format!("`{what}` does not work with --server: {why}"))
}

/// Prints run `id` as `runs show` does (its waits with it; without the
/// step table when progress lines printed one: a table twice, with the
/// durations counted two ways, reads as two different runs); its status.
async fn print_run(
    api: &impl Api,
    id: RunId,
    json: bool,
    outputs: bool,
    no_table: bool,
) -> anyhow::Result<cairn::RunView> {
    let view = api.show(id).await?;
    // `--json` of a waiting run carries its open waits (`waits`), so a
    // script needs no second call to answer them.
    let waits = match (json, view.run.status) {
        (true, cairn::RunStatus::Waiting) | (false, _) => crate::api::run_waits(api, id).await?,
        (true, _) => vec![],
    };
    let events = match json {
        true => vec![],
        false => crate::api::children_events(api, &view).await?,
    };
    let text = output::RunText {
        waits: &waits,
        events: &events,
        outputs,
        extra: None,
        no_table,
    };
    output::print_run(&view, json, &text)?;
    Ok(view)
}

/// After an operator action or an answer: takes the run to its next stop
/// (unless `enqueue`), prints it, and picks the exit code from its status.
async fn finish_action(api: &impl Api, id: RunId, enqueue: bool, json: bool) -> anyhow::Result<u8> {
    if let (false, Some(engine)) = (enqueue, api.engine()) {
        // This process executes the run: it exports its spans too.
        crate::traces::export(engine)?;
    }
    if !enqueue && api.advance(id).await?.is_none() {
        return Ok(exit::INTERRUPTED);
    }
    let view = print_run(api, id, json, false, false).await?;
    Ok(action_exit(crate::report::stop_status(&view), enqueue))
}

/// Records read per page by a list that prints every one (`runs list`
/// without `--limit`, `threads list`): 500, or `CAIRN_LIST_PAGE` (tests of
/// the paging use a smaller page).
fn page_size() -> u32 {
    std::env::var("CAIRN_LIST_PAGE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(500)
}
