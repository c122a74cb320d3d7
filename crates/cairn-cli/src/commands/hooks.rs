//! `cairn hooks …`: inbound webhooks, on the database only (creating one
//! prints its secret, which never crosses the API).

use cairn::{HookSpec, Scheme};

use super::{engine, Connect};
use crate::args::HooksCommand;
use crate::input::usage;
use crate::output::hooks::{print_deleted, print_hooks, print_issued};
use crate::report::exit;

pub async fn main(to: &impl Connect, command: HooksCommand, json: bool) -> anyhow::Result<u8> {
    // Creating the first hook may create the database, as a submit does.
    let api = to
        .connect(matches!(command, HooksCommand::Create { .. }))
        .await?;
    let why = "a hook's secret is shown only on the database's side";
    let engine = engine(&api, "hooks", why)?;
    match command {
        HooksCommand::Create {
            name,
            signal,
            target,
            payload,
            id,
            scheme,
            start,
        } => {
            let scheme: Scheme = scheme
                .parse()
                .map_err(|e: cairn::BadHook| usage(format!("--scheme: {e}")))?;
            let spec = HookSpec {
                name,
                scheme,
                signal,
                target,
                payload,
                id,
                start,
            };
            let by = cairn::local_actor(None, None);
            print_issued(&engine.create_hook(&spec, &by).await?, json)?;
        }
        HooksCommand::List => print_hooks(&engine.hooks().await?, json)?,
        HooksCommand::Delete { name } => {
            engine.delete_hook(&name).await?;
            print_deleted(&name, json)?;
        }
    }
    Ok(exit::OK)
}
