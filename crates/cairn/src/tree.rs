//! Runs with children in one process (`cairn run`, `cairn resume`, an
//! answer or action followed here, a library's `Engine::run`): when a run
//! stops waiting for its children, this process drives them (a few at
//! once, each to its own stop, its own children first; one a worker holds
//! is followed), and the run again once their join woke it. With workers
//! beside it nothing changes: whichever process claims a child first runs
//! it, and the join wakes the parent for whoever claims it next.

use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};

use cairn_core::{RunId, RunStatus};
use cairn_scheduler::Driven;

use super::{Engine, ResumeOptions};
use crate::Result;

/// Children one process drives at once for one parent.
const CHILDREN_AT_ONCE: usize = 8;

impl Engine {
    /// While `driven`'s run waits for children this process can run
    /// (queued, or running under a lease it may take over), drives them,
    /// then the run once woken. Returns when the run stops for another
    /// reason, or its children stop for a person.
    pub(super) fn drive_tree(&self, driven: Driven) -> BoxFuture<'static, Result<Driven>> {
        let engine = self.clone();
        Box::pin(async move {
            let mut driven = driven;
            loop {
                // A run waiting for a person, with no `children` step,
                // has no children to look up.
                if driven.run.status != RunStatus::Waiting
                    || !driven.run.crew_definition.starts_children()
                {
                    return Ok(driven);
                }
                let id = driven.run.id;
                let pending: Vec<(RunId, RunStatus)> = engine
                    .store()
                    .children(id)
                    .await?
                    .into_iter()
                    .filter(|c| !c.held)
                    .filter(|c| matches!(c.status, RunStatus::Queued | RunStatus::Running))
                    .map(|c| (c.run_id, c.status))
                    .collect();
                if pending.is_empty() {
                    return Ok(driven);
                }
                let results: Vec<Result<Driven>> = stream::iter(pending)
                    .map(|(child, status)| engine.drive_child(child, status))
                    .buffer_unordered(CHILDREN_AT_ONCE)
                    .collect()
                    .await;
                for result in results {
                    result?;
                }
                let run = engine.get_run(id).await?;
                // Woken by its join: driven here, or, if a worker claimed
                // it first, followed to its next stop (never reported as
                // `running`).
                if matches!(run.status, RunStatus::Queued | RunStatus::Running) {
                    let crew = engine.stored_crew(id).await?;
                    let again = engine.drive_or_follow(id, &crew, None).await?;
                    driven.executed.extend(again.executed);
                    driven.run = again.run;
                } else {
                    driven.run = run;
                }
            }
        })
    }

    /// One child to its stop: a queued one driven, a running one resumed
    /// (taken over if its holder is gone, followed if it lives), then its
    /// own children.
    fn drive_child(&self, id: RunId, status: RunStatus) -> BoxFuture<'static, Result<Driven>> {
        let engine = self.clone();
        Box::pin(async move {
            let driven = match status {
                // Held elsewhere, or finished by its holder between this
                // read and the resume's claim: followed, not an error.
                RunStatus::Running => match engine.resume(id, ResumeOptions::default()).await {
                    Err(e) if super::held_elsewhere(&e) || super::moved_on(&e) => {
                        let crew = engine.stored_crew(id).await?;
                        engine.drive_or_follow(id, &crew, None).await?
                    }
                    other => other?,
                },
                _ => {
                    let crew = engine.stored_crew(id).await?;
                    engine.drive_or_follow(id, &crew, None).await?
                }
            };
            engine.drive_tree(driven).await
        })
    }

    /// After a child ended: its parent, if the child's end woke it, is
    /// driven here too, and so on up the tree.
    pub(super) async fn climb(&self, mut run: cairn_core::RunRecord) -> Result<()> {
        while let Some(child) = run.child.clone() {
            let parent = self.get_run(child.parent_run_id).await?;
            if parent.status != RunStatus::Queued {
                return Ok(());
            }
            let crew = self.stored_crew(parent.id).await?;
            let driven = self.drive_or_follow(parent.id, &crew, None).await?;
            run = self.drive_tree(driven).await?.run;
        }
        Ok(())
    }

    /// Whether a waiting run has children this process could drive.
    pub(super) async fn has_pending_children(&self, run: &cairn_core::RunRecord) -> Result<bool> {
        if !run.crew_definition.starts_children() {
            return Ok(false);
        }
        Ok(self
            .store()
            .children(run.id)
            .await?
            .iter()
            .any(|c| matches!(c.status, RunStatus::Queued | RunStatus::Running)))
    }
}
