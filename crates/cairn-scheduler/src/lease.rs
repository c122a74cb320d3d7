//! The leases an executor holds, kept by one beat for all of them: every
//! `every`, one `LeaseStore::heartbeat_many` (fenced per run by its epoch)
//! extends each held run's lease and reports a cancel request or a lost
//! lease, so a process's upkeep costs one statement per beat however many
//! runs it holds. Each held run has a guard that publishes what the beats
//! found, so its running step stops on a cancel request or a lost lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::watch;

use cairn_checkpoint::{Lease, Store};
use cairn_core::{Fence, RunId};

/// One held run: the lease it is fenced by, where its guard learns what
/// the beats found, and which hold of this keeper it is.
struct Entry {
    fence: Fence,
    tx: watch::Sender<Lease>,
    hold: u64,
}

/// The runs one executor holds, and the task that beats for them.
pub(crate) struct Keeper {
    store: Arc<dyn Store>,
    lease: Duration,
    every: Duration,
    held: Mutex<HashMap<RunId, Entry>>,
    /// Numbers the holds, so a guard removes only its own entry.
    holds: std::sync::atomic::AtomicU64,
    /// Started by the first hold (a runtime exists by then).
    task: OnceLock<tokio::task::JoinHandle<()>>,
}

impl Keeper {
    /// Beats every `every`, each beat extending the held leases by `lease`.
    pub fn new(store: Arc<dyn Store>, lease: Duration, every: Duration) -> Arc<Keeper> {
        Arc::new(Keeper {
            store,
            lease,
            every,
            held: Mutex::default(),
            holds: Default::default(),
            task: OnceLock::new(),
        })
    }

    /// Keeps `id`'s lease under `fence` until the guard is dropped. An
    /// earlier hold of the same run by this process is told its lease is
    /// lost: whatever it still runs must stop, even when the claim granted
    /// the same epoch again (a claim lost with a database failover, then
    /// taken again by this process), which no fence can tell apart.
    pub fn hold(self: &Arc<Self>, id: RunId, fence: Fence) -> LeaseGuard {
        let (tx, state) = watch::channel(Lease::Held);
        let hold = self
            .holds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = Entry { fence, tx, hold };
        if let Some(old) = self.entries().insert(id, entry) {
            old.tx.send_replace(Lease::Lost);
        }
        self.task
            .get_or_init(|| tokio::spawn(beat(Arc::downgrade(self))));
        LeaseGuard {
            state,
            keeper: self.clone(),
            id,
            hold,
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Entry>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One beat for every held run; each guard learns what its run's found.
    async fn beat_once(&self) {
        let held: Vec<(RunId, Fence)> = self
            .entries()
            .iter()
            .map(|(id, e)| (*id, e.fence.clone()))
            .collect();
        if held.is_empty() {
            return;
        }
        let found = match self.store.heartbeat_many(&held, self.lease).await {
            Ok(found) => found,
            // A passing database fault: try again at the next beat.
            Err(e) => {
                tracing::warn!(runs = held.len(), error = %e, "heartbeat failed");
                return;
            }
        };
        let entries = self.entries();
        for ((id, fence), lease) in held.iter().zip(found) {
            let Some(Entry { fence: now, tx, .. }) = entries.get(id) else {
                continue;
            };
            if now != fence {
                continue;
            }
            if lease == Lease::Lost && *tx.borrow() != Lease::Lost {
                tracing::warn!(run = %id, %fence, "lease lost; the step will be stopped");
            }
            tx.send_if_modified(|l| {
                // Lost is final for this hold.
                let next = if *l == Lease::Lost {
                    Lease::Lost
                } else {
                    lease
                };
                std::mem::replace(l, next) != next
            });
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

/// The beat task: ends once its executor is gone.
async fn beat(keeper: Weak<Keeper>) {
    loop {
        let Some(every) = keeper.upgrade().map(|k| k.every) else {
            return;
        };
        tokio::time::sleep(every).await;
        let Some(k) = keeper.upgrade() else {
            return;
        };
        k.beat_once().await;
    }
}

/// Holds a run's lease until dropped.
pub(crate) struct LeaseGuard {
    state: watch::Receiver<Lease>,
    keeper: Arc<Keeper>,
    id: RunId,
    hold: u64,
}

impl LeaseGuard {
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
            // The keeper went away without a verdict (its executor did).
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let mut entries = self.keeper.entries();
        // A later hold of the same run is not this guard's.
        if entries.get(&self.id).is_some_and(|e| e.hold == self.hold) {
            entries.remove(&self.id);
        }
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

    /// A run of `db` claimed at its first step: (store, run, its fence).
    async fn held(db: &TestDb) -> (Arc<dyn Store>, RunId, Fence) {
        let store = open(&db.url, &OpenOptions::default()).await.unwrap();
        held_in(&store).await
    }

    /// A new run of `store` claimed at its first step.
    async fn held_in(store: &Arc<dyn Store>) -> (Arc<dyn Store>, RunId, Fence) {
        let store = store.clone();
        let toml = "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\ntemplate = \"x\"\n";
        let run = NewRun::new(
            CrewDef::from_toml(toml).unwrap(),
            serde_json::json!({"topic": "lease"}),
        );
        let id = store.submit(run).await.unwrap().run.id;
        let claimed = store.claim(id, &claim(false)).await.unwrap();
        (store, id, claimed.fence)
    }

    fn claim(takeover: bool) -> ClaimRequest {
        ClaimRequest::new("lease-test", Duration::from_secs(30), 3).forced(takeover)
    }

    async fn stops_within(guard: &LeaseGuard, max: Duration) -> Lease {
        tokio::time::timeout(max, guard.stopped())
            .await
            .expect("the guard never saw it")
    }

    async fn a_held_lease_is_extended_and_reports_nothing(kind: Kind) {
        let db = TestDb::of(kind).await;
        let (store, id, fence) = held(&db).await;
        // Beats keep a 300 ms lease alive well past 300 ms …
        let lease = Duration::from_millis(300);
        let guard = Keeper::new(store.clone(), lease, EVERY).hold(id, fence);
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
        let (store, id, fence) = held(&db).await;
        let guard = Keeper::new(store.clone(), Duration::from_secs(30), EVERY).hold(id, fence);
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
        let (store, id, fence) = held(&db).await;
        let guard = Keeper::new(store.clone(), Duration::from_secs(30), EVERY).hold(id, fence);
        store.claim(id, &claim(true)).await.unwrap();
        assert_eq!(stops_within(&guard, EVERY * 10).await, Lease::Lost);
        // The new holder's lease was not extended by the zombie's guard.
        assert_eq!(guard.now(), Lease::Lost);
    }

    /// The same process granted the same fence twice (its claim lost with a
    /// database failover, then taken again by it): no fence tells the two
    /// holds apart, so the new hold stops the old one at once, and the old
    /// guard's drop leaves the new hold in place.
    async fn a_second_hold_of_a_run_stops_the_first(kind: Kind) {
        let db = TestDb::of(kind).await;
        let (store, id, fence) = held(&db).await;
        let keeper = Keeper::new(store.clone(), Duration::from_secs(30), EVERY);
        let first = keeper.hold(id, fence.clone());
        let second = keeper.hold(id, fence);
        assert_eq!(first.now(), Lease::Lost);
        assert_eq!(stops_within(&first, EVERY).await, Lease::Lost);
        drop(first);
        tokio::time::sleep(EVERY * 3).await;
        assert_eq!(
            second.now(),
            Lease::Held,
            "the beats still keep the new hold"
        );
        assert_eq!(keeper.entries().len(), 1);
    }

    /// One keeper holding 30 runs: one beat keeps every lease alive, and
    /// a cancel or a takeover reaches only the run it is about.
    async fn one_beat_keeps_many_runs_each_fenced_alone(kind: Kind) {
        let db = TestDb::of(kind).await;
        let store = open(&db.url, &OpenOptions::default()).await.unwrap();
        // Long against the 50 ms beat, so a beat slowed by a loaded machine
        // (the whole suite at once) does not let a lease run out.
        let lease = Duration::from_millis(1200);
        let keeper = Keeper::new(store.clone(), lease, EVERY);
        let (mut guards, mut fences) = (vec![], vec![]);
        let mut ids = vec![];
        for _ in 0..30 {
            let (_, id, fence) = held_in(&store).await;
            guards.push(keeper.hold(id, fence.clone()));
            fences.push(fence);
            ids.push(id);
        }
        let direct = store
            .heartbeat_many(&[(ids[1], fences[1].clone())], lease)
            .await
            .unwrap();
        assert_eq!(direct, [Lease::Held]);
        tokio::time::sleep(lease * 2).await;
        assert!(guards.iter().all(|g| g.now() == Lease::Held));
        assert!(
            store.claim_next(&claim(false)).await.unwrap().is_none(),
            "every lease was extended"
        );
        store
            .act(ids[3], Action::Cancel, &Actor::new("op"))
            .await
            .unwrap();
        assert_eq!(
            stops_within(&guards[3], EVERY * 10).await,
            Lease::CancelRequested
        );
        // A dropped guard's run is no longer kept: its lease runs out.
        drop(guards.remove(0));
        tokio::time::sleep(lease * 2).await;
        let next = store.claim_next(&claim(false)).await.unwrap();
        assert_eq!(next.map(|c| c.run.id), Some(ids[0]));
        assert!(
            store.claim_next(&claim(false)).await.unwrap().is_none(),
            "the 29 other leases, beaten to {lease:?} each time, are alive"
        );
        // A takeover of one run is a lost lease for that run alone.
        store.claim(ids[7], &claim(true)).await.unwrap();
        assert_eq!(stops_within(&guards[6], EVERY * 10).await, Lease::Lost);
        tokio::time::sleep(EVERY * 3).await;
        for (i, g) in guards.iter().enumerate() {
            if i != 2 && i != 6 {
                assert_eq!(g.now(), Lease::Held, "run {} was not touched", i + 1);
            }
        }
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
        a_second_hold_of_a_run_stops_the_first,
        one_beat_keeps_many_runs_each_fenced_alone,
    );

    /// What watching a running step costs: a heartbeat (the guard's one
    /// query) against a `get_run` (the old cancel poll), timed one after
    /// another. `cargo test -p cairn-scheduler --release lease_cost -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a measurement, not a check"]
    async fn lease_cost() {
        for kind in [Kind::Sqlite, Kind::Postgres] {
            let db = TestDb::of(kind).await;
            let (store, id, fence) = held(&db).await;
            let n = 2000u32;
            let lease = Duration::from_secs(30);
            for _ in 0..50 {
                store.heartbeat(id, &fence, lease).await.unwrap();
                store.get_run(id).await.unwrap();
            }
            let t = Instant::now();
            for _ in 0..n {
                store.heartbeat(id, &fence, lease).await.unwrap();
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
                let (_, id, fence) = held(&db).await;
                runs.push((store.clone(), id, fence));
            }
            for write in [true, false] {
                let t = Instant::now();
                let tasks: Vec<_> = runs
                    .iter()
                    .cloned()
                    .map(|(store, id, fence)| {
                        tokio::spawn(async move {
                            for _ in 0..200 {
                                if write {
                                    store.heartbeat(id, &fence, lease).await.unwrap();
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
