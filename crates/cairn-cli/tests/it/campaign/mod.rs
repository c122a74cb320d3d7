//! A Jepsen-style campaign (issue 51), small enough for every CI run:
//! clients submit runs under idempotency keys, read their events, answer
//! the waits they find open and send signals, all through a `cairn
//! serve`, three `cairn worker`s execute them, and nemeses hit the
//! processes and the database meanwhile (a worker SIGKILLed and started
//! again, a worker SIGSTOPped for longer than its lease then continued, the
//! server SIGKILLed and started again, PostgreSQL restarted fast and
//! immediately, the database made read-only for a while, a worker whose
//! wall clock runs an hour ahead all along, and a failover:
//! the primary stopped immediately and a standby promoted, the fleet on a
//! multi-host URL). A third of the keys run a crew that asks: its first
//! step's output waits for a review (approve, edit, or reject: the step
//! runs again), an `llm` step asks a person a question, then a `signal`
//! step waits for `go`; clients race for the oldest open wait, answer
//! waits another client answered with another decision, and resend
//! signals under their ids (`answers.rs`). Every
//! client operation is recorded as invoked, then
//! `ok`, `fail` (a typed refusal) or `info` (unknown: a timeout, a reset, a
//! 5xx); after healing, the runs still waiting are answered and signalled
//! (recorded the same way) until every run ended, the final state is read
//! and `cairn_history::check`
//! proves the properties from the two together (`history.rs`, `state.rs`).
//! With a synchronous standby every property must hold; with an
//! asynchronous one cut off before the failover, the checker must report
//! the lost acknowledgements.
//!
//! Each process reaches PostgreSQL through a proxy of its own, which
//! delays its traffic, loses its acknowledgements, partitions it off for
//! longer than its lease, resets its connections or redirects it to a hot
//! standby; PostgreSQL is also paused (every server process SIGSTOPped),
//! and its WAL or the SQLite file fills a small disk; the synchronous
//! standby that is promoted runs an hour ahead (`fleet.rs`, `nemesis.rs`).
//!
//! The single-holder checks read each committed step and journal item
//! with the lease its fenced commit stored with it (`state.rs`).
//!
//! What the campaign does not do yet: approvals before a step (a rejected
//! one fails its run, which the campaign would have to tell from a lost
//! run).

mod answers;
mod fleet;
mod history;
mod nemesis;
mod state;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{agent_scripted, agent_sh, crew_toml, Case};
use answers::Finisher;
use cairn_testkit::{PgCluster, SmallDisk, TestDb};
use fleet::{Fleet, Setup, Standby};
use history::{Clients, Recorder};
use nemesis::Nemesis;

/// How big a campaign is: CI's size (each test's own, long enough for each
/// of its faults once) unless `CAIRN_CAMPAIGN_SECS` and
/// `CAIRN_CAMPAIGN_SEED` say otherwise (`just jepsen`).
struct Size {
    seed: u64,
    clients: usize,
    workload: Duration,
}

impl Size {
    fn from_env(secs: u64) -> Size {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        Size {
            seed: var("CAIRN_CAMPAIGN_SEED").unwrap_or_else(seed_now),
            clients: 6,
            workload: Duration::from_secs(var("CAIRN_CAMPAIGN_SECS").unwrap_or(secs)),
        }
    }
}

fn seed_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Three workers, a server and clients on a throwaway PostgreSQL cluster
/// whose WAL is on a small disk, each process behind a proxy, every
/// nemesis in turn; the history checker must find nothing.
#[test]
fn a_campaign_of_clients_workers_and_nemeses_on_a_cluster_keeps_every_promise() {
    let disk = small_disk(64);
    let cluster = match &disk {
        Some(disk) => PgCluster::start_with_wal_on(disk),
        None => PgCluster::start(),
    }
    .unwrap_or_else(failed);
    let case = Case::with_db(TestDb::postgres_at(cluster.url()));
    let setup = Setup {
        cluster: Some(cluster),
        proxied: true,
        disk,
        ..Setup::default()
    };
    campaign(&case, |case, crew| Fleet::start(case, setup, crew), 45).assert_kept();
}

/// The same on one SQLite file on a small disk, with the faults that hit
/// processes (the other database faults are PostgreSQL's): workers killed
/// and paused, the server killed, the disk full.
#[test]
fn a_campaign_of_clients_workers_and_kills_on_sqlite_keeps_every_promise() {
    // Room for a long campaign's database: the disk is full only when the
    // nemesis fills it (tmpfs takes memory only as it is written).
    let long = Size::from_env(0).workload > Duration::from_secs(60);
    let disk = small_disk(if long { 4096 } else { 256 });
    let db = match &disk {
        Some(disk) => TestDb::sqlite_in(disk.path()),
        None => TestDb::sqlite(),
    };
    let case = Case::with_db(db);
    let setup = Setup {
        disk,
        ..Setup::default()
    };
    campaign(&case, |case, crew| Fleet::start(case, setup, crew), 18).assert_kept();
}

/// A failover to a synchronous standby whose clock runs an hour ahead,
/// amid the processes' faults: every process reaches the promoted standby
/// through its multi-host URL, every lease looks expired there at once,
/// and nothing acknowledged is lost, so every property holds.
#[test]
fn a_campaign_through_the_promotion_of_a_synchronous_standby_of_the_cluster_keeps_every_promise() {
    let primary = cluster();
    let standby = match primary.skewed_standby("+1h") {
        Some(standby) => standby,
        None => {
            cairn_testkit::skip(
                "campaign (a skewed standby)",
                "libfaketime is not installed (apt-get install faketime): the standby runs on the true clock",
            );
            primary.standby()
        }
    }
    .unwrap_or_else(failed);
    let name = standby.standby_name().expect("a standby's name").to_owned();
    primary.set_synchronous(Some(&name)).unwrap_or_else(failed);
    primary.wait_streaming(&name, true).unwrap_or_else(failed);
    let case = Case::with_db(TestDb::postgres_at(two_hosts(&primary, &standby)));
    let setup = Setup {
        cluster: Some(primary),
        standby: Some(Standby {
            cluster: standby,
            link: None,
        }),
        ..Setup::default()
    };
    campaign(&case, |case, crew| Fleet::start(case, setup, crew), 12).assert_kept();
}

/// A failover to an asynchronous standby that was cut off from the
/// primary for two seconds first (the primary acknowledging submits
/// meanwhile): the checker must see the loss (acknowledged submits gone,
/// a key acknowledged as two runs), which shows it can, while the single
/// holder still holds.
#[test]
fn a_campaign_through_the_promotion_of_an_asynchronous_standby_of_the_cluster_reports_the_lost_acknowledgements(
) {
    let primary = cluster();
    let upstream = format!("127.0.0.1:{}", primary.port());
    let link = cairn_testkit::CutProxy::start(upstream.parse().expect("an address"))
        .expect("a proxy for the replication link");
    let standby = primary
        .standby_through(link.addr().port())
        .unwrap_or_else(failed);
    let name = standby.standby_name().expect("a standby's name").to_owned();
    primary.wait_streaming(&name, false).unwrap_or_else(failed);
    let case = Case::with_db(TestDb::postgres_at(two_hosts(&primary, &standby)));
    let setup = Setup {
        cluster: Some(primary),
        standby: Some(Standby {
            cluster: standby,
            link: Some(link),
        }),
        ..Setup::default()
    };
    let outcome = campaign(&case, |case, crew| Fleet::start(case, setup, crew), 12);
    let report = &outcome.report;
    assert!(!report.is_valid(), "the loss went unseen:\n{report}");
    let lost = report.of(cairn_history::Property::Submits).count();
    assert!(lost > 0, "no lost submit reported:\n{report}");
    let holders = report.of(cairn_history::Property::SingleHolder).count();
    assert_eq!(
        holders, 0,
        "the single holder must hold through the loss:\n{report}"
    );
}

fn cluster() -> PgCluster {
    PgCluster::start().unwrap_or_else(failed)
}

/// A tmpfs of `megabytes` to fill, or `None` (and a skip logged) where
/// this machine refuses to mount one (it needs root).
fn small_disk(megabytes: u64) -> Option<SmallDisk> {
    SmallDisk::mount(megabytes)
        .map_err(|e| cairn_testkit::skip("campaign (a full disk)", &e.to_string()))
        .ok()
}

/// A throwaway cluster that failed to do what it was asked.
#[track_caller]
fn failed<T>(e: cairn_testkit::ClusterError) -> T {
    panic!("throwaway cluster: {e}")
}

/// The multi-host URL of `primary` then `standby`, for a server that takes
/// writes.
fn two_hosts(primary: &PgCluster, standby: &PgCluster) -> String {
    format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/test?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    )
}

/// What a campaign ended with.
struct Outcome {
    report: cairn_history::Report,
    runs: Vec<serde_json::Value>,
    state: cairn_history::FinalState,
    clients: usize,
}

impl Outcome {
    /// Every property held, every run succeeded (those that asked once
    /// answered and signalled), every step had its effect, and waits were
    /// answered and signals stored.
    #[track_caller]
    fn assert_kept(&self) {
        let (report, runs) = (&self.report, &self.runs);
        assert!(report.is_valid(), "{report}\nseed {}", report.seed);
        let failed: Vec<&serde_json::Value> =
            runs.iter().filter(|r| r["status"] != "succeeded").collect();
        assert!(failed.is_empty(), "runs that did not succeed: {failed:#?}");
        let effects = self.state.effects.len();
        assert!(
            effects >= 2 * runs.len(),
            "{effects} effects for {} runs of two effect steps each",
            runs.len()
        );
        let steps = self.state.rows.iter();
        let steps = steps.filter(|r| r.kind == cairn_history::RowKind::Step);
        assert!(
            steps.count() >= 2 * runs.len(),
            "the committed steps (with their leases) were not all read"
        );
        let answered = self.state.waits.iter().filter(|w| !w.decisions.is_empty());
        assert!(answered.count() > 0, "no wait was answered");
        assert!(!self.state.signals.is_empty(), "no signal was stored");
        assert!(
            runs.len() >= self.clients * 3,
            "too few runs to prove anything: {}",
            runs.len()
        );
    }
}

/// The campaign on `case`'s database with the fleet `start` makes, its
/// workload `secs` long unless `CAIRN_CAMPAIGN_SECS` says otherwise.
fn campaign(case: &Case, start: impl FnOnce(&Case, &Path) -> Fleet, secs: u64) -> Outcome {
    let _load = crate::support::loads_the_machine();
    let size = Size::from_env(secs);
    eprintln!(
        "campaign seed {} ({} s, {} clients); to reproduce: \
         CAIRN_CAMPAIGN_SEED={} CAIRN_CAMPAIGN_SECS={}",
        size.seed,
        size.workload.as_secs(),
        size.clients,
        size.seed,
        size.workload.as_secs()
    );
    let (crew, effects) = effect_crew(case);
    let mut fleet = start(case, &crew);
    let recorder = Recorder::new();
    let clients = Clients::start(
        case,
        &fleet.server_url(),
        &recorder,
        size.clients,
        size.seed,
    );

    let deadline = Instant::now() + size.workload;
    let mut nemesis = Nemesis::new(size.seed);
    std::thread::sleep(Duration::from_secs(2));
    // Each fault's window ends with its aftermath: the next follows it.
    while Instant::now() < deadline {
        nemesis.strike(&mut fleet, &recorder);
    }
    clients.stop();
    fleet.heal();
    let mut finisher = Finisher::new(case, &fleet.server_url(), &recorder, size.clients as u32);
    let runs = state::wait_until_settled(case, Duration::from_secs(90), |waiting| {
        finisher.finish(waiting)
    });
    let history = recorder.take();
    let windows = nemesis.windows();
    let state = state::read(case, &runs, &effects, &windows);
    let report = cairn_history::check(&history, &state, &windows, size.seed);
    eprintln!("{report}");
    let answered = state.waits.iter().filter(|w| !w.decisions.is_empty());
    eprintln!(
        "{} operations, {} runs, {} effects, {} waits ({} answered), {} signals, faults: {}",
        history.len() / 2,
        state.runs.len(),
        state.effects.len(),
        state.waits.len(),
        answered.count(),
        state.signals.len(),
        nemesis.summary()
    );
    let items = state.rows.iter();
    let items = items.filter(|r| r.kind != cairn_history::RowKind::Step);
    eprintln!(
        "{} committed rows with their lease, {} of them journal items",
        state.rows.len(),
        items.count()
    );
    eprintln!("{}", finisher.summary());
    for window in &windows {
        eprintln!("  {}", oks_inside(&history, window));
    }
    for (n, error) in recorder.errors() {
        eprintln!("  {n:>5} × {error}");
    }
    fleet.stop();
    Outcome {
        report,
        runs,
        state,
        clients: size.clients,
    }
}

/// The operations acknowledged inside `window`, by type: what the rule
/// "not vacuous" asks for, in numbers.
fn oks_inside(history: &[cairn_history::Event], window: &cairn_history::FaultWindow) -> String {
    let mut oks: std::collections::BTreeMap<cairn_history::OpType, usize> = Default::default();
    let inside = history.iter().filter(|e| {
        e.kind == cairn_history::EventKind::Ok
            && (window.start_ns..=window.end_ns).contains(&e.time_ns)
    });
    for e in inside {
        *oks.entry(e.op.op_type()).or_default() += 1;
    }
    let oks: Vec<String> = oks.iter().map(|(op, n)| format!("{op} {n}")).collect();
    let secs = (window.end_ns - window.start_ns) as f64 / 1e9;
    format!(
        "ok inside {} ({secs:.1} s): {}",
        window.nemesis,
        oks.join(", ")
    )
}

/// The crews the campaign runs, side by side in one directory (the
/// server's `--crews`): `campaign` (`crew.toml`), two steps, each
/// appending one line to the effects log (`RUN STEP ATTEMPT WORKER
/// NANOS`) before it sleeps a little, as an outside effect would; and
/// `asking` (`asking.toml`, [`ASKING`]): the same first step under review
/// (a person approves, edits or rejects its output: a rejection runs it
/// again, attempt + 1), an `llm` step (a scripted model) that asks a
/// person a question, a `signal` step that waits for [`answers::SIGNAL`],
/// then the same second step. `CAMPAIGN_WORKER` names the process that
/// ran a step (each worker and the server set their own).
fn effect_crew(case: &Case) -> (PathBuf, PathBuf) {
    let log = case.path("effects.log");
    let script = effect_script(&log);
    let agent = |role| format!("{}env = [\"CAMPAIGN_WORKER\"]\n", agent_sh(role, &script));
    let agents = [agent("first"), agent("second")];
    let crew = case.write("crew.toml", &crew_toml("campaign", &agents));
    let model = case.write("question.script", QUESTION);
    let asking = [
        format!("{}review = true\n", agent("review")),
        format!(
            "{}ask_human = true\n",
            agent_scripted("question", &model, "Ask before going on.")
        ),
        format!(
            "[[agents]]\nrole = \"hear\"\nkind = \"signal\"\nsignal = \"{}\"\n",
            answers::SIGNAL
        ),
        agent("after"),
    ];
    case.write(&format!("{ASKING}.toml"), &crew_toml(ASKING, &asking));
    (crew, log)
}

/// The crew whose runs wait for a person and a signal; its file is
/// `asking.toml` beside `crew.toml`.
const ASKING: &str = "asking";

/// The scripted model of `asking`'s question step: it asks a person
/// (`ask_human`: a wait of kind `question`), then answers with what it
/// heard.
const QUESTION: &str = r#"
[[responses]]
tool_calls = [{ id = "q1", name = "ask_human", arguments = { question = "Go on?" } }]

[[responses]]
text = "Heard."
"#;

fn effect_script(log: &Path) -> String {
    format!(
        "cat > /dev/null; echo \"$CAIRN_RUN_ID $CAIRN_STEP_IDX $CAIRN_ATTEMPT \
         $CAMPAIGN_WORKER $(date +%s%N)\" >> '{}'; sleep 0.2; \
         printf '{{\"step\": %s}}\\n' \"$CAIRN_STEP_IDX\"",
        log.display()
    )
}
