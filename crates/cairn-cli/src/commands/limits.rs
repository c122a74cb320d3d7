//! `cairn limits …`: provider keys' shared pauses and limits.

use super::Connect;
use crate::api::Api;
use crate::args::LimitsCommand;
use crate::input::usage;
use crate::output;
use crate::output::limits::{Built, Listed};
use crate::report::exit;

pub async fn main(to: &impl Connect, command: LimitsCommand, json: bool) -> anyhow::Result<u8> {
    let key = match command {
        LimitsCommand::List => {
            let api = to.connect(false).await?;
            let keys = api.keys().await?;
            let built = stored_keys(&api).await?;
            let listed: Vec<Listed> = keys
                .into_iter()
                .map(|state| Listed::new(state, &built))
                .collect();
            output::limits::print_listed(&listed, !built.is_empty(), json)?;
            return Ok(exit::OK);
        }
        LimitsCommand::Keys { crew, version } => {
            let api = to.connect(false).await?;
            let def = api.crew_definition(&crew, version.as_deref()).await?;
            let keys = api.keys().await?;
            let agents: Vec<output::limits::AgentKeyState> = cairn::crew_keys::agent_keys(&def)
                .into_iter()
                .map(|agent| {
                    let state = keys.iter().find(|k| k.key == agent.key).cloned();
                    output::limits::AgentKeyState { agent, state }
                })
                .collect();
            output::limits::print_agent_keys(&def, &agents, json)?;
            return Ok(exit::OK);
        }
        LimitsCommand::Pause {
            key,
            wait,
            by,
            reason,
        } => pause(to, &key, &wait, by, reason).await?,
        LimitsCommand::Resume { key } => to.connect(false).await?.resume_key(&key).await?,
        LimitsCommand::Reset { key } => to.connect(false).await?.reset_limits(&key).await?,
        LimitsCommand::Set {
            key,
            in_flight,
            rpm,
            tpm,
            max_pause,
        } => {
            let max_pause_ms = max_pause
                .map(|age| {
                    let d =
                        cairn::parse_age(&age).map_err(|e| usage(format!("--max-pause: {e}")))?;
                    Ok::<_, anyhow::Error>(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                })
                .transpose()?;
            let limits = cairn::KeyLimits {
                in_flight,
                rpm,
                tpm,
                max_pause_ms,
            };
            cairn::check_key(&key).map_err(cairn::Error::from)?;
            limits.check().map_err(cairn::Error::from)?;
            // Limits may be set before anything ran: the database is
            // created, as a submit would.
            let api = to.connect(true).await?;
            let state = api.set_limits(&key, &limits).await?;
            let built = stored_keys(&api).await?;
            if !built.is_empty() && !built.iter().any(|b| b.agent.builds(&key)) {
                output::limits::print_unbuilt_note(&key);
            }
            state
        }
    };
    print_one(key, json)?;
    Ok(exit::OK)
}

/// `limits pause KEY --for AGE`: a key name or an age out of range is
/// refused before anything is opened; as `limits set`, a key may be paused
/// before anything ran, and the database is created for it.
async fn pause(
    to: &impl Connect,
    key: &str,
    wait: &str,
    by: Option<String>,
    reason: Option<String>,
) -> anyhow::Result<cairn::KeyState> {
    let wait = cairn::parse_age(wait).map_err(|e| usage(format!("--for: {e}")))?;
    cairn::check_key(key).map_err(cairn::Error::from)?;
    cairn::check_pause(wait).map_err(cairn::Error::from)?;
    let by = by
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_owned());
    let actor = match reason {
        Some(reason) => cairn::Actor::new(by).because(reason),
        None => cairn::Actor::new(by),
    };
    to.connect(true).await?.pause_key(key, wait, &actor).await
}

/// One key: a JSON object, or the table's header and row.
fn print_one(key: cairn::KeyState, json: bool) -> anyhow::Result<()> {
    match json {
        true => output::write_json(&mut std::io::stdout().lock(), &key),
        false => output::limits::print_keys(&[key], false),
    }
}

/// Every agent key of every stored crew version (empty: no crew stored).
async fn stored_keys(api: &impl Api) -> anyhow::Result<Vec<Built>> {
    let mut built = vec![];
    for v in api.crew_versions().await? {
        let def = api.crew_definition(&v.name, Some(&v.version)).await?;
        for agent in cairn::crew_keys::agent_keys(&def) {
            built.push(Built {
                crew: v.name.clone(),
                version: v.version.clone(),
                agent,
            });
        }
    }
    Ok(built)
}
