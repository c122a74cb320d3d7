//! Provider keys as `cairn limits` prints them: the keys table (`list`,
//! and the one key a pause, resume, set or reset left), each key marked
//! when no stored crew builds it, and `limits keys CREW`: the key each
//! agent of a crew calls under.

use std::io::Write;

use serde::Serialize;

use super::{chrono_secs, text_out, write_json};
use cairn::crew_keys::AgentKey;

/// An agent key of a stored crew version.
pub struct Built {
    pub crew: String,
    pub version: String,
    pub agent: AgentKey,
}

/// Who builds a listed key (`limits list --json`'s `built_by`).
#[derive(Debug, Serialize)]
pub struct Builder {
    pub crew: String,
    pub version: String,
    pub role: String,
}

/// A key as `limits list` shows it: its state as stored, and the stored
/// crews' agents that call under it (none: a key no stored crew builds,
/// such as one set with a trailing `/` in its URL).
#[derive(Debug, Serialize)]
pub struct Listed {
    #[serde(flatten)]
    pub state: cairn::KeyState,
    pub built_by: Vec<Builder>,
}

impl Listed {
    pub fn new(state: cairn::KeyState, built: &[Built]) -> Listed {
        let built_by = built
            .iter()
            .filter(|b| b.agent.builds(&state.key))
            .map(|b| Builder {
                crew: b.crew.clone(),
                version: b.version.clone(),
                role: b.agent.role.clone(),
            })
            .collect();
        Listed { state, built_by }
    }
}

/// `limits list`: the keys table, a key no stored crew builds marked `*`
/// with a note under the table (only once some crew is stored: before,
/// every key would be).
pub fn print_listed(listed: &[Listed], any_crew: bool, json: bool) -> anyhow::Result<()> {
    if json {
        return write_json(&mut std::io::stdout().lock(), listed);
    }
    let states: Vec<cairn::KeyState> = listed.iter().map(|l| l.state.clone()).collect();
    let unbuilt: Vec<bool> = listed
        .iter()
        .map(|l| any_crew && l.built_by.is_empty())
        .collect();
    print_table(&states, &unbuilt)?;
    if unbuilt.contains(&true) {
        writeln!(
            text_out(),
            "* no stored crew builds this key: `cairn limits keys CREW` prints the keys a crew's agents call under"
        )?;
    }
    Ok(())
}

/// After `limits set KEY`, on stderr: the key was stored, but no stored
/// crew builds it.
pub fn print_unbuilt_note(key: &str) {
    eprintln!(
        "cairn: note: no stored crew builds the key {}; its limits apply only to a crew that does. \
         `cairn limits keys CREW` prints the keys a crew's agents call under",
        cairn::text::printable_line(key)
    );
}

/// An agent's key and, if the key is stored, its state.
#[derive(Debug, Serialize)]
pub struct AgentKeyState {
    #[serde(flatten)]
    pub agent: AgentKey,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<cairn::KeyState>,
}

/// `limits keys CREW`: one line an agent (role, kind, its key's limits,
/// the key), or JSON.
pub fn print_agent_keys(
    def: &cairn::CrewDef,
    agents: &[AgentKeyState],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        return write_json(&mut std::io::stdout().lock(), agents);
    }
    let mut out = text_out();
    if agents.is_empty() {
        writeln!(
            out,
            "crew {} {} has no llm agent and no command agent with a limit_key",
            cairn::text::printable_line(&def.name),
            cairn::text::printable_line(&def.version)
        )?;
        return Ok(());
    }
    let role_w = agents
        .iter()
        .map(|a| a.agent.role.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    writeln!(
        out,
        "{:<role_w$}  {:<7}  {:<22}  key",
        "ROLE", "KIND", "LIMITS"
    )?;
    for a in agents {
        let limits = match &a.state {
            Some(s) => limits_text(&s.limits),
            None if a.agent.per_run.is_empty() => "-".to_owned(),
            None => "(per run)".to_owned(),
        };
        writeln!(
            out,
            "{:<role_w$}  {:<7}  {limits:<22}  {}",
            cairn::text::printable_line(&a.agent.role),
            a.agent.kind,
            cairn::text::printable_line(&a.agent.key)
        )?;
    }
    if agents.iter().any(|a| !a.agent.per_run.is_empty()) {
        writeln!(
            out,
            "a part <tenant> or <thread> is the run's own (left out for a run without one): \
             `limits set` takes the key with it filled in"
        )?;
    }
    Ok(())
}

/// Provider keys (`limits list`, or the one key a pause or resume left):
/// JSON as stored, or a table with the pause's end, the queue, the count
/// and the last reason.
pub fn print_keys(keys: &[cairn::KeyState], json: bool) -> anyhow::Result<()> {
    if json {
        return write_json(&mut std::io::stdout().lock(), keys);
    }
    print_table(keys, &[])
}

/// The keys table; a key whose `unbuilt` is true is marked `*`.
fn print_table(keys: &[cairn::KeyState], unbuilt: &[bool]) -> anyhow::Result<()> {
    let mut out = text_out();
    writeln!(
        out,
        "{:<24}  {:>8}  {:>6}  {:>7}  {:<22}  {:<48}  reason",
        "paused until", "deferred", "pauses", "permits", "limits", "key"
    )?;
    for (i, k) in keys.iter().enumerate() {
        let mark = match unbuilt.get(i) {
            Some(true) => "*",
            _ => "",
        };
        let until = k
            .paused_until
            .map_or("-".to_owned(), |t| t.to_rfc3339_opts(chrono_secs(), true));
        let permits = match k.limits.in_flight {
            Some(cap) => format!("{}/{cap}", k.permits_in_use),
            None => k.permits_in_use.to_string(),
        };
        writeln!(
            out,
            "{until:<24}  {:>8}  {:>6}  {permits:>7}  {:<22}  {:<48}  {}",
            k.deferred_runs,
            k.pauses,
            match k.limits_from.filter(|_| k.limits.any()) {
                Some(from) => format!("{} [{}]", limits_text(&k.limits), from.as_str()),
                None => limits_text(&k.limits),
            },
            format!("{}{mark}", cairn::text::printable_line(&k.key)),
            cairn::text::printable_line(k.reason.as_deref().unwrap_or("-"))
        )?;
    }
    Ok(())
}

/// A key's limits as `rpm=60 tpm=20000 max_pause=30m` (`-`: none).
fn limits_text(l: &cairn::KeyLimits) -> String {
    let named = [("in_flight", l.in_flight), ("rpm", l.rpm), ("tpm", l.tpm)];
    let mut set: Vec<String> = named
        .iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n}={v}")))
        .collect();
    set.extend(
        l.max_pause_ms
            .map(|_| format!("max_pause={}", cairn::format_age(l.max_pause()))),
    );
    match set.is_empty() {
        true => "-".to_owned(),
        false => set.join(" "),
    }
}
