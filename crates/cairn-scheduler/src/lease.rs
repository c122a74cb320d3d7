//! One guard per held run: it heartbeats (`Store::heartbeat`, fenced by
//! the epoch) and publishes what each beat found, so the running step
//! stops on a cancel request or a lost lease. One small query per beat
//! both keeps the lease and watches for a cancel.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use cairn_checkpoint::{Lease, Store};
use cairn_core::{LeaseEpoch, RunId};

/// Holds a run's lease until dropped.
pub(crate) struct LeaseGuard {
    state: watch::Receiver<Lease>,
    beat: tokio::task::JoinHandle<()>,
}

impl LeaseGuard {
    /// Starts beating every `every`, each beat extending the lease by `lease`.
    pub fn hold(
        store: Arc<dyn Store>,
        id: RunId,
        epoch: LeaseEpoch,
        lease: Duration,
        every: Duration,
    ) -> LeaseGuard {
        let (tx, state) = watch::channel(Lease::Held);
        let beat = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match store.heartbeat(id, epoch, lease).await {
                    Ok(Lease::Lost) => {
                        tracing::warn!(run = %id, %epoch, "lease lost; the step will be stopped");
                        tx.send_replace(Lease::Lost);
                        return;
                    }
                    Ok(found) => {
                        tx.send_if_modified(|l| std::mem::replace(l, found) != found);
                    }
                    // A passing database fault: try again at the next beat.
                    Err(e) => tracing::warn!(run = %id, error = %e, "heartbeat failed"),
                }
            }
        });
        LeaseGuard { state, beat }
    }

    /// What the last beat found.
    pub fn now(&self) -> Lease {
        *self.state.borrow()
    }

    /// Resolves once a beat finds the lease lost or a cancel requested;
    /// never while the lease is held without one.
    pub async fn stopped(&self) -> Lease {
        let mut state = self.state.clone();
        let found = state.wait_for(|l| *l != Lease::Held).await.map(|l| *l);
        match found {
            Ok(l) => l,
            // The beat ended without a verdict (it cannot, short of a panic).
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.beat.abort();
    }
}
