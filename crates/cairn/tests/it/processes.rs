//! The process registry through the engine, both backends: a run whose
//! Rust agents no live process offers is blocked (shown, evented once)
//! and finishes when a process offering them starts; two processes
//! offering different versions of a crew each claim only their own runs.
//! Each "process" is an engine with an owner of its own, working its loop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use cairn::{
    async_trait, Agent, Answer, Crew, Engine, EventKind, ExecutorConfig, OpenOptions, RunFilter,
    RunId, RunStatus, StepContext, StepOutput, Stop, SubmitOptions, WaitStatus, WorkOptions,
};
use cairn_testkit::{both, Kind, TestDb};

both!(
    a_run_only_a_stopped_process_could_execute_is_blocked_until_one_starts,
    two_processes_offering_different_versions_each_claim_only_their_own,
);

const POLL: Duration = Duration::from_millis(100);

/// Writes a draft signed by the process it runs in.
#[derive(Clone)]
struct Writer {
    by: &'static str,
    runs: Arc<AtomicU32>,
}

#[async_trait]
impl Agent for Writer {
    async fn run(&self, _cx: &StepContext) -> Result<StepOutput, Stop> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(StepOutput::new(json!({"draft": "d", "by": self.by})))
    }
}

fn reviewed(version: &str, writer: Writer) -> Crew {
    Crew::builder("essay", version)
        .agent_named("writer", "writer", writer)
        .review()
        .template("publisher", "{{ outputs.writer.by }}")
        .build()
        .unwrap()
}

fn plain(version: &str, writer: Writer) -> Crew {
    Crew::builder("essay", version)
        .agent_named("writer", "writer", writer)
        .template("publisher", "{{ outputs.writer.by }}")
        .build()
        .unwrap()
}

async fn process(db: &TestDb, owner: &str, crews: &[&Crew]) -> Engine {
    // Beats (and so blocked-run sweeps) at the poll's pace, not every 10 s.
    let config = ExecutorConfig {
        owner: owner.into(),
        heartbeat: POLL,
        ..ExecutorConfig::default()
    };
    let engine = Engine::open_with(&db.url, &OpenOptions::default(), config)
        .await
        .unwrap();
    for crew in crews {
        engine.register(crew);
    }
    engine
}

/// A worker loop in the background; the sender stops it, the handle ends
/// once it has left the registry.
fn working(
    engine: &Engine,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let engine = engine.clone();
    let opts = WorkOptions {
        poll: POLL,
        ..WorkOptions::default()
    };
    let task = tokio::spawn(async move {
        engine
            .work(opts, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (stop, task)
}

async fn stop(
    worker: (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ),
) {
    let _ = worker.0.send(());
    worker.1.await.unwrap();
}

async fn status_of(engine: &Engine, id: RunId, want: RunStatus) -> cairn::RunView {
    for _ in 0..200 {
        let view = engine.show(id).await.unwrap();
        if view.run.status == want {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} never became {want}");
}

impl Writer {
    /// A writer signing `by`, counting its runs in `runs`.
    fn counted(by: &'static str, runs: &Arc<AtomicU32>) -> Writer {
        Writer {
            by,
            runs: runs.clone(),
        }
    }
}

async fn blocked_events(engine: &Engine, id: RunId) -> usize {
    let events = engine.events(id).await.unwrap();
    crate::of_kind(&events, EventKind::RunBlocked).len()
}

async fn a_run_only_a_stopped_process_could_execute_is_blocked_until_one_starts(kind: Kind) {
    let db = TestDb::of(kind).await;
    let runs = Arc::new(AtomicU32::new(0));
    let writer = |by| Writer::counted(by, &runs);
    let crew_a = reviewed("1", writer("a"));
    let a = process(&db, "process-a", &[&crew_a]).await;
    let id = crate::submitted(&a, &crew_a, json!({})).await;
    let worker_a = working(&a);
    status_of(&a, id, RunStatus::Waiting).await;
    stop(worker_a).await;

    // A process that offers nothing works beside the run; the review is
    // answered (accepted and stored whatever the version state), and the
    // run, runnable now, is blocked at once and evented by its sweep.
    let b = process(&db, "process-b", &[]).await;
    let worker_b = working(&b);
    let wait = crate::open_waits(&b, id).await.remove(0);
    let answered = b.answer(wait.id, &Answer::Approve, "alice").await.unwrap();
    assert_eq!(answered.status, WaitStatus::Answered);
    let view = b.show(id).await.unwrap();
    assert_eq!(view.run.status, RunStatus::Queued, "nobody claimed it");
    let blocked = view.run.blocked.expect("blocked as soon as it is runnable");
    assert_eq!(
        (blocked.crew.as_str(), blocked.version.as_str()),
        ("essay", "1")
    );
    assert_eq!(blocked.handlers, vec!["writer".to_owned()]);
    assert_eq!(&blocked.fingerprint, crew_a.fingerprint());
    let listed = b.list(&RunFilter::default()).await.unwrap();
    assert!(listed.iter().any(|r| r.id == id && r.blocked.is_some()));
    // One poll interval (and a margin) later: evented once, and it stays
    // once however many polls pass.
    tokio::time::sleep(POLL * 3).await;
    assert_eq!(blocked_events(&b, id).await, 1);
    tokio::time::sleep(POLL * 3).await;
    assert_eq!(blocked_events(&b, id).await, 1);
    assert_eq!(b.show(id).await.unwrap().run.status, RunStatus::Queued);
    let workers = b.workers().await.unwrap();
    let ids: Vec<&str> = workers.iter().map(|w| w.id.as_str()).collect();
    assert!(
        ids.contains(&"process-b") && !ids.contains(&"process-a"),
        "{ids:?}"
    );

    // A process offering the version starts: the run finishes there.
    let crew_d = reviewed("1", writer("d"));
    let d = process(&db, "process-d", &[&crew_d]).await;
    let worker_d = working(&d);
    let done = status_of(&d, id, RunStatus::Succeeded).await;
    assert_eq!(done.run.blocked, None);
    assert_eq!(
        done.steps[1].output,
        Some(json!("a")),
        "the draft of process a"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the writer ran once");
    let events = d.events(id).await.unwrap();
    let claims: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::RunClaimed)
        .map(|e| e.data["owner"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(claims, vec!["process-a", "process-d"]);
    let listed = d.workers().await.unwrap();
    let seen = listed.iter().find(|w| w.id == "process-d").unwrap();
    assert!(seen.live);
    assert!(seen
        .offers
        .iter()
        .any(|o| &o.fingerprint == crew_d.fingerprint() && o.needs_code));
    stop(worker_b).await;
    stop(worker_d).await;
    assert!(d.workers().await.unwrap().is_empty(), "both left");
}

async fn two_processes_offering_different_versions_each_claim_only_their_own(kind: Kind) {
    let db = TestDb::of(kind).await;
    let runs = Arc::new(AtomicU32::new(0));
    let writer = |by| Writer::counted(by, &runs);
    let (v1, v2) = (plain("1", writer("v1")), plain("2", writer("v2")));
    let p1 = process(&db, "process-v1", &[&v1]).await;
    let p2 = process(&db, "process-v2", &[&v2]).await;
    let submit = |p: &Engine, crew: &Crew| {
        let (p, crew) = (p.clone(), crew.clone());
        async move {
            let opts = SubmitOptions::default();
            p.submit(&crew, json!({}), opts).await.unwrap().run.id
        }
    };
    let mut ids = vec![];
    for _ in 0..3 {
        ids.push((submit(&p1, &v1).await, "v1"));
        ids.push((submit(&p2, &v2).await, "v2"));
    }
    // The v1 process works alone: it finishes v1's runs and leaves v2's
    // queued, unclaimed and blocked.
    let w1 = working(&p1);
    for (id, by) in ids.iter().filter(|(_, by)| *by == "v1") {
        finished_by(&p1, *id, by).await;
    }
    for (id, _) in ids.iter().filter(|(_, by)| *by == "v2") {
        let view = p1.show(*id).await.unwrap();
        assert_eq!(view.run.status, RunStatus::Queued, "run {id}");
        assert_eq!(view.run.blocked.map(|b| b.version), Some("2".into()));
        let events = p1.events(*id).await.unwrap();
        assert!(!events.iter().any(|e| e.kind == EventKind::RunClaimed));
    }
    // Both work, side by side, and more runs of each arrive.
    let w2 = working(&p2);
    for _ in 0..3 {
        ids.push((submit(&p1, &v1).await, "v1"));
        ids.push((submit(&p2, &v2).await, "v2"));
    }
    for (id, by) in &ids {
        finished_by(&p1, *id, by).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 12, "each writer step once");
    stop(w1).await;
    stop(w2).await;
}

/// Waits for run `id` to succeed on version `by` (`v1`, `v2`), claimed and
/// executed only by the process offering it.
async fn finished_by(engine: &Engine, id: RunId, by: &str) {
    let done = status_of(engine, id, RunStatus::Succeeded).await;
    assert_eq!(done.run.crew_version, &by[1..], "no version changed");
    assert_eq!(done.steps[1].output, Some(json!(by)), "run {id}");
    let owner = format!("process-{by}");
    let events = engine.events(id).await.unwrap();
    assert!(events
        .iter()
        .filter(|e| e.kind == EventKind::RunClaimed)
        .all(|e| e.data["owner"] == owner.as_str()));
}
