//! Crew versions: the stored definitions and a run's move to another.

use async_trait::async_trait;
use cairn_core::{CrewDef, RunId};

use crate::{CrewMove, CrewUpgrade, CrewVersion, Result};

/// Crew versions: the stored definitions and a run's move to another.
#[async_trait]
pub trait CrewStore: Send + Sync + 'static {
    /// Moves an unfinished run to another version of its crew, recorded as
    /// a `crew_upgraded` event with both versions and fingerprints and who
    /// and why, at a step boundary: a run that is not running, or one the
    /// caller holds at `held` and has claimed at a boundary. Refused with
    /// [`Error::Incompatible`] when the version does not keep the steps the
    /// run has started (`cairn_core::upgrade::check`; with `force`, only
    /// what `check_forced` refuses: a move that would leave the run
    /// unreadable), and with [`Error::WrongState`] for a running run held
    /// by another. A run already on the version is left as it is, and
    /// [`CrewMove::moved`] says which happened.
    async fn upgrade_crew(&self, id: RunId, req: &CrewUpgrade) -> Result<CrewMove>;

    /// Every crew version a run was stored with, by name then first seen,
    /// with its unfinished runs.
    async fn crews(&self) -> Result<Vec<CrewVersion>>;

    /// The stored crew version with `fingerprint`.
    async fn crew_version(&self, fingerprint: &cairn_core::Fingerprint) -> Result<Option<CrewDef>>;
}
