//! The contract's [`LeaseStore`] over the script: claims, heartbeats, a
//! step's commit under its lease, and setting a corrupt run aside. What a
//! claim decides and writes is in `claim.rs`.

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::{Corruption, Fence, RunId};

use crate::contract::LeaseStore;
use crate::{
    ClaimRequest, Claimed, Error, Lease, NewRun, Result, Started, StepCommit, StepTransition,
};

use super::boundary::{bounded, placed, retried};
use super::storable::{claim_ok, commit_ok, submit_ok};
use super::{ScriptHost, TxKind};

// ------------------------------------------------------------- the contract

#[async_trait]
impl<H: ScriptHost> LeaseStore for H {
    async fn start(&self, new: NewRun, req: &ClaimRequest) -> Result<Started> {
        bounded("start", self.target(), None, async {
            let def = submit_ok(&new)?;
            claim_ok(req)?;
            if let Some(started) = self.start_fresh(&new, &def, Some(req)).await? {
                return Ok(started);
            }
            let req = req.clone();
            self.tx(
                TxKind::HotWrite,
                script!(|c| super::claim::start_in(c, new, def, req).await),
            )
            .await
        })
        .await
    }

    async fn claim(&self, id: RunId, req: &ClaimRequest) -> Result<Claimed> {
        bounded("claim", self.target(), Some(id), async {
            claim_ok(req)?;
            let req = req.clone();
            self.tx(
                TxKind::HotWrite,
                script!(|c| super::claim::claim_in(c, id, &req).await),
            )
            .await
        })
        .await
    }

    async fn claim_next(&self, req: &ClaimRequest) -> Result<Option<Claimed>> {
        // Not `bounded`: only a claim that took a run is a write boundary.
        crate::failpoint::store("before", "claim_next");
        placed(self.target(), None, async {
            claim_ok(req)?;
            let req = super::claim::as_claimer(req);
            // A run that does not decode or judge is set aside (failed
            // `corruption`) and the next one tried, so one corrupt run never
            // stalls the queue behind it. Bounded, so a database full of them
            // still answers.
            for _ in 0..super::SET_ASIDE_PER_CLAIM {
                let req = req.clone();
                let look = self.expiry().must_look();
                let claimed = self
                    .tx(
                        TxKind::Write,
                        script!(|c| super::claim::claim_next_in(c, &req, look).await),
                    )
                    .await;
                if let Ok((_, Some(expired))) = &claimed {
                    self.expiry().found(*expired);
                }
                match claimed.map(|(claimed, _)| claimed) {
                    Ok(Some(claimed)) => {
                        crate::failpoint::store("after", "claim_next");
                        return Ok(Some(claimed));
                    }
                    Ok(None) => return Ok(None),
                    // Rolled back; the run the corruption names is set aside.
                    Err(Error::Corruption(corrupt)) => {
                        self.set_aside(&corrupt, None).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(None)
        })
        .await
    }

    async fn claim_batch(&self, req: &ClaimRequest, max: usize) -> Result<Vec<Claimed>> {
        super::claim::claim_batch(self, req, max).await
    }

    async fn wait_for_work(&self, max: Duration) {
        ScriptHost::wait_for_work(self, max).await
    }

    async fn heartbeat(&self, id: RunId, held: &Fence, lease: Duration) -> Result<Lease> {
        let held = held.clone();
        let beat = self.tx(
            TxKind::Single,
            script!(|c| super::runs::heartbeat_in(c, id, &held, lease).await),
        );
        bounded("heartbeat", self.target(), Some(id), beat).await
    }

    async fn heartbeat_many(&self, held: &[(RunId, Fence)], lease: Duration) -> Result<Vec<Lease>> {
        if held.is_empty() {
            return Ok(vec![]);
        }
        let held = held.to_vec();
        // On SQLite, on the writer's thread: through the pool, the beat
        // queued behind every journal append of 10,000 steps in flight and
        // timed out (a lease lost, measured with `--in-flight`).
        let beat = self.tx(
            TxKind::HotWrite,
            script!(|c| super::runs::heartbeat_many_in(c, &held, lease).await),
        );
        bounded("heartbeat", self.target(), None, beat).await
    }

    async fn set_aside(&self, corruption: &Corruption, held: Option<&Fence>) -> Result<bool> {
        let run = corruption.run;
        let held = held.cloned();
        bounded("set_aside", self.target(), Some(run), async {
            let corrupt = corruption.clone();
            let set = self
                .tx(
                    TxKind::Write,
                    script!(|c| super::runs::set_aside_in(c, &corrupt, held.as_ref()).await),
                )
                .await?;
            if set {
                tracing::error!(run = %corruption.run, detail = %corruption.detail,
                    "set aside a corrupt run: failed with kind `corruption`");
            }
            Ok(set)
        })
        .await
    }

    async fn commit_step(&self, commit: &StepCommit) -> Result<()> {
        commit_ok(commit).map_err(|e| e.placed(self.target(), Some(commit.run_id)))?;
        // A commit that opens a wait (of a person, or for a signal) is its
        // own crash point.
        let op = match &commit.transition {
            StepTransition::Waiting { .. } => "open_wait",
            StepTransition::Listening { .. } => "listen",
            _ => "commit_step",
        };
        retried(
            op,
            self,
            Some(commit.run_id),
            || ScriptHost::commit_step(self, commit),
            || super::boundary::commit_landed(self, commit),
        )
        .await
    }
}
