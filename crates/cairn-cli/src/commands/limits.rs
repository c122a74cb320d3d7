//! `cairn limits …`: provider keys' shared pauses and limits.

use super::Connect;
use crate::api::Api;
use crate::args::LimitsCommand;
use crate::input::usage;
use crate::output;
use crate::report::exit;

pub async fn main(to: &impl Connect, command: LimitsCommand, json: bool) -> anyhow::Result<u8> {
    match command {
        LimitsCommand::List => {
            let keys = to.connect(false).await?.keys().await?;
            output::print_keys(&keys, json)?;
        }
        LimitsCommand::Pause {
            key,
            wait,
            by,
            reason,
        } => {
            let wait = cairn::parse_age(&wait).map_err(|e| usage(format!("--for: {e}")))?;
            let by = by
                .or_else(|| std::env::var("USER").ok())
                .unwrap_or_else(|| "cli".to_owned());
            let actor = cairn::Actor { by, reason };
            let key = to
                .connect(false)
                .await?
                .pause_key(&key, wait, &actor)
                .await?;
            print_one(key, json)?;
        }
        LimitsCommand::Resume { key } => {
            let key = to.connect(false).await?.resume_key(&key).await?;
            print_one(key, json)?;
        }
        LimitsCommand::Reset { key } => {
            let key = to.connect(false).await?.reset_limits(&key).await?;
            print_one(key, json)?;
        }
        LimitsCommand::Set {
            key,
            in_flight,
            rpm,
            tpm,
        } => {
            let limits = cairn::KeyLimits {
                in_flight,
                rpm,
                tpm,
            };
            // Limits may be set before anything ran: the database is
            // created, as a submit would.
            let key = to.connect(true).await?.set_limits(&key, &limits).await?;
            print_one(key, json)?;
        }
    }
    Ok(exit::OK)
}

/// One key: a JSON object, or the table's header and row.
fn print_one(key: cairn::KeyState, json: bool) -> anyhow::Result<()> {
    match json {
        true => output::write_json(&mut std::io::stdout().lock(), &key),
        false => output::print_keys(&[key], false),
    }
}
