//! The contract's methods no other module of the suite calls, one concern
//! a file, each asserting what the method returns and what is stored
//! after it, on both databases (`crates/cairn/tests/it/contract.rs` checks
//! that the suite calls every method). A `dyn Store` reaches every concern
//! trait's methods without importing them.

use std::time::Duration;

use cairn_checkpoint::{ClaimRequest, Store};
use cairn_core::{Actor, AgentDef, AgentKind, CrewDef, EventKind};

mod budgets;
mod children;
mod claims;
mod crews;
mod hooks;
mod keys;
mod maintenance;
mod notices;
mod operator;
mod people;
mod registry;
mod schedules;
mod signals;
mod traces;
mod votes;
mod waits;

/// An operator with a reason, as the CLI records one.
fn operator(by: &str) -> Actor {
    Actor::new(by).because("contract test")
}

/// What is stored of run `id`: its row and steps, then its events (the
/// same before and after a call shows that the call wrote nothing).
async fn stored(
    store: &std::sync::Arc<dyn Store>,
    id: cairn_core::RunId,
) -> (
    (cairn_core::RunRecord, Vec<cairn_core::StepRecord>),
    Vec<cairn_core::EventRecord>,
) {
    (
        store.load(id).await.unwrap(),
        store.events(id).await.unwrap(),
    )
}

/// A claim by `owner` for `lease` of a run no one holds.
fn claim_by(owner: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest::new(owner, lease, 3)
}

/// A crew of one agent per `(role, kind)`: `template` or a Rust agent
/// (`rust`, handler `h-ROLE`), the only ones these tests need.
fn crew_of(name: &str, version: &str, agents: &[(&str, &str)]) -> CrewDef {
    let agents = agents
        .iter()
        .map(|(role, kind)| {
            let kind = match *kind {
                "rust" => AgentKind::Rust {
                    handler: format!("h-{role}"),
                },
                _ => AgentKind::Template {
                    template: (*role).to_owned(),
                },
            };
            AgentDef::new(*role, kind)
        })
        .collect();
    CrewDef {
        name: name.to_owned(),
        version: version.to_owned(),
        agents,
        dir: None,
        budget: None,
        upgrade: None,
    }
}

/// A store as `crate::store` opens it.
type Db = std::sync::Arc<dyn Store>;

/// How many of a run's events are of `kind`.
async fn count_of(store: &Db, run: cairn_core::RunId, kind: EventKind) -> usize {
    kinds(store, run)
        .await
        .iter()
        .filter(|k| **k == kind)
        .count()
}

/// The kinds of a run's events, in order.
async fn kinds(store: &Db, run: cairn_core::RunId) -> Vec<EventKind> {
    let events = store.events(run).await.unwrap();
    events.into_iter().map(|e| e.kind).collect()
}
