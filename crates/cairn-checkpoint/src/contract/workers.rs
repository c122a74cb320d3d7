//! The process registry: which live process can execute which crew
//! versions. A version with Rust agents (`needs_code`) runs only in a
//! process that registered it, so a claim takes such a run only for a
//! process that offers its version, and a runnable run no live process
//! offers is *blocked* (`run_blocked`, once per stall). Every other
//! version runs anywhere from its stored definition.
//!
//! A process's row lives while it beats (`expires_at`, one lease ahead)
//! and is deleted when it stops; one killed expires with its lease.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::upgrade::Blocked;
use cairn_core::{CrewDef, Fingerprint, RunId};
use chrono::{DateTime, Utc};

use crate::Result;

/// One beat of a process ([`WorkerStore::beat_process`]).
#[derive(Debug, Clone)]
pub struct ProcessBeat {
    /// The process's lease owner (`ExecutorConfig::owner`).
    pub id: String,
    pub host: String,
    pub pid: u32,
    /// Alive until this long from now (database clock) unless it beats again.
    pub ttl: Duration,
    /// Crew versions to add to what it offers (each stored if new); `None`
    /// when nothing changed since its last beat.
    pub offers: Option<Vec<CrewDef>>,
}

/// A crew version a process offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Offered {
    pub name: String,
    pub version: String,
    pub fingerprint: Fingerprint,
    /// It has Rust agents: only processes offering it execute its runs.
    pub needs_code: bool,
}

/// A registered process: the JSON of an entry of `cairn workers --json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRecord {
    pub id: String,
    pub host: String,
    pub pid: u32,
    pub started_at: DateTime<Utc>,
    pub beat_at: DateTime<Utc>,
    /// It stopped beating before this; past it the process is not live.
    pub expires_at: DateTime<Utc>,
    pub live: bool,
    pub offers: Vec<Offered>,
    /// Runs it holds (running under its lease).
    pub held: u64,
}

/// A runnable run no live process can execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedRun {
    pub run: RunId,
    pub blocked: Blocked,
    /// `run_blocked` was written for this stall (since its last claim).
    pub evented: bool,
}

/// The registry's operations (a part of every [`crate::Store`]).
#[async_trait]
pub trait WorkerStore: Send + Sync {
    /// Keeps process `beat.id` live for `beat.ttl` and adds `beat.offers`
    /// to what it can execute: the first beat registers it. Offers only
    /// grow while it lives (two engines sharing an owner offer the union).
    async fn beat_process(&self, beat: &ProcessBeat) -> Result<()>;

    /// Removes a stopping process and its offers; `false` if it was not
    /// registered.
    async fn leave(&self, id: &str) -> Result<bool>;

    /// Every registered process, live or expired within the last hour
    /// (older ones are forgotten at the next beat of any process).
    async fn processes(&self) -> Result<Vec<ProcessRecord>>;

    /// Every runnable run (queued, or running under an expired lease)
    /// whose crew version needs code no live process offers, oldest first.
    async fn blocked(&self) -> Result<Vec<BlockedRun>>;

    /// Writes `run_blocked` for each blocked run not evented since its last
    /// claim: the runs newly evented.
    async fn sweep_blocked(&self) -> Result<Vec<BlockedRun>>;
}
