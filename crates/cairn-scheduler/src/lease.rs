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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Instant;

    use cairn_checkpoint::{open, Action, ClaimRequest, NewRun, OpenOptions};
    use cairn_core::{Actor, CrewDef};
    use cairn_testkit::{Kind, TestDb};

    use super::*;

    const EVERY: Duration = Duration::from_millis(50);

    /// A run of `db` claimed at its first step: (store, run, epoch).
    async fn held(db: &TestDb) -> (Arc<dyn Store>, RunId, LeaseEpoch) {
        let store = open(&db.url, &OpenOptions::default()).await.unwrap();
        let toml = "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\ntemplate = \"x\"\n";
        let run = NewRun {
            crew: CrewDef::from_toml(toml).unwrap(),
            input: serde_json::json!({"topic": "lease"}),
            idempotency_key: None,
            thread_id: None,
            on_busy: Default::default(),
        };
        let id = store.submit(run).await.unwrap().run.id;
        let claimed = store.claim(id, &claim(false)).await.unwrap();
        (store, id, claimed.run.lease_epoch)
    }

    fn claim(takeover: bool) -> ClaimRequest {
        ClaimRequest {
            owner: "lease-test".into(),
            takeover: match takeover {
                true => cairn_checkpoint::Takeover::Force,
                false => cairn_checkpoint::Takeover::Never,
            },
            lease: Duration::from_secs(30),
            crash_loop_cap: 3,
            events: vec![],
            replace_crew: None,
            context: None,
        }
    }

    async fn stops_within(guard: &LeaseGuard, max: Duration) -> Lease {
        tokio::time::timeout(max, guard.stopped())
            .await
            .expect("the guard never saw it")
    }

    async fn a_held_lease_is_extended_and_reports_nothing(kind: Kind) {
        let db = TestDb::of(kind).await;
        let (store, id, epoch) = held(&db).await;
        // Beats keep a 300 ms lease alive well past 300 ms …
        let lease = Duration::from_millis(300);
        let guard = LeaseGuard::hold(store.clone(), id, epoch, lease, EVERY);
        let quiet = tokio::time::timeout(lease * 3, guard.stopped()).await;
        assert!(quiet.is_err(), "a held lease stops nothing: {quiet:?}");
        assert_eq!(guard.now(), Lease::Held);
        let next = store.claim_next(&claim(false)).await.unwrap();
        assert!(
            next.is_none(),
            "the lease was extended: nobody may claim it"
        );
        // … and without them it expires.
        drop(guard);
        tokio::time::sleep(lease * 2).await;
        let next = store.claim_next(&claim(false)).await.unwrap();
        assert_eq!(next.map(|c| c.run.id), Some(id));
    }

    async fn a_cancel_request_reaches_the_step_within_a_beat(kind: Kind) {
        let db = TestDb::of(kind).await;
        let (store, id, epoch) = held(&db).await;
        let guard = LeaseGuard::hold(store.clone(), id, epoch, Duration::from_secs(30), EVERY);
        store
            .act(id, Action::Cancel, &Actor::new("op"))
            .await
            .unwrap();
        let asked = Instant::now();
        assert_eq!(
            stops_within(&guard, EVERY * 10).await,
            Lease::CancelRequested
        );
        assert!(asked.elapsed() < EVERY * 10);
        assert_eq!(guard.now(), Lease::CancelRequested);
    }

    async fn a_takeover_is_a_lost_lease(kind: Kind) {
        let db = TestDb::of(kind).await;
        let (store, id, epoch) = held(&db).await;
        let guard = LeaseGuard::hold(store.clone(), id, epoch, Duration::from_secs(30), EVERY);
        store.claim(id, &claim(true)).await.unwrap();
        assert_eq!(stops_within(&guard, EVERY * 10).await, Lease::Lost);
        // The new holder's lease was not extended by the zombie's guard.
        assert_eq!(guard.now(), Lease::Lost);
    }

    macro_rules! on_both {
        ($($name:ident),* $(,)?) => {$(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name(cairn_testkit::Kind::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(cairn_testkit::Kind::Postgres).await
                }
            }
        )*};
    }

    on_both!(
        a_held_lease_is_extended_and_reports_nothing,
        a_cancel_request_reaches_the_step_within_a_beat,
        a_takeover_is_a_lost_lease,
    );

    /// What watching a running step costs: a heartbeat (the guard's one
    /// query) against a `get_run` (the old cancel poll), timed one after
    /// another. `cargo test -p cairn-scheduler --release lease_cost -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement, not a check"]
    async fn lease_cost() {
        for kind in [Kind::Sqlite, Kind::Postgres] {
            let db = TestDb::of(kind).await;
            let (store, id, epoch) = held(&db).await;
            let n = 2000u32;
            let lease = Duration::from_secs(30);
            for _ in 0..50 {
                store.heartbeat(id, epoch, lease).await.unwrap();
                store.get_run(id).await.unwrap();
            }
            let t = Instant::now();
            for _ in 0..n {
                store.heartbeat(id, epoch, lease).await.unwrap();
            }
            let beat = t.elapsed() / n;
            let t = Instant::now();
            for _ in 0..n {
                store.get_run(id).await.unwrap();
            }
            let read = t.elapsed() / n;
            println!("{kind:?}: heartbeat {beat:?}/query, get_run {read:?}/query, one at a time");
            // Sixteen running steps at once, each watched by its own queries.
            let mut runs = vec![];
            for _ in 0..16 {
                let (_, id, epoch) = held(&db).await;
                runs.push((store.clone(), id, epoch));
            }
            for write in [true, false] {
                let t = Instant::now();
                let tasks: Vec<_> = runs
                    .iter()
                    .cloned()
                    .map(|(store, id, epoch)| {
                        tokio::spawn(async move {
                            for _ in 0..200 {
                                if write {
                                    store.heartbeat(id, epoch, lease).await.unwrap();
                                } else {
                                    store.get_run(id).await.unwrap();
                                }
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
                let what = if write { "heartbeat" } else { "get_run" };
                let per_s = f64::from(16 * 200) / t.elapsed().as_secs_f64();
                println!("{kind:?}: 16 at once, {what}: {per_s:.0} queries/s");
            }
        }
    }
}
