//! A Jepsen-style campaign (issue 51), small enough for every CI run:
//! clients submit runs under idempotency keys and read their events through
//! a `cairn serve`, three `cairn worker`s and the server's own runner
//! execute them, and nemeses hit the processes and the database meanwhile
//! (a worker SIGKILLed and started again, a worker SIGSTOPped for longer
//! than its lease then continued, the server SIGKILLed and started again,
//! PostgreSQL restarted fast and immediately, the database made read-only
//! for a while). Every client operation is recorded as invoked, then `ok`,
//! `fail` (a typed refusal) or `info` (unknown: a timeout, a reset, a 5xx);
//! after healing the final state is read and `cairn_history::check`
//! proves the properties from the two together (`history.rs`, `state.rs`).
//!
//! What this first campaign does not do yet: answers and signals, the
//! proxy nemeses (delays, blackholes, lost acknowledgements), a full disk,
//! clock skew, and a failover; and committed rows carry the lease in force
//! by event order (the last `run_claimed` before each `step_succeeded`),
//! not a lease stored with the row.

mod history;
mod nemesis;
mod state;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{agent_sh, crew_toml, Case};
use history::{Clients, Recorder};
use nemesis::{Fleet, Nemesis};

/// How big a campaign is: CI's size unless `CAIRN_CAMPAIGN_SECS` and
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

/// Three workers, a server and clients on a throwaway PostgreSQL cluster,
/// every nemesis in turn; the history checker must find nothing.
#[test]
fn a_campaign_of_clients_workers_and_nemeses_on_a_cluster_keeps_every_promise() {
    let cluster = cairn_testkit::PgCluster::start()
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    let case = Case::with_db(cairn_testkit::TestDb::postgres_at(cluster.url()));
    campaign(&case, Some(cluster), 30);
}

/// The same on one SQLite file, with the faults that hit processes (the
/// database faults are PostgreSQL's): workers killed and paused, the
/// server killed.
#[test]
fn a_campaign_of_clients_workers_and_kills_on_sqlite_keeps_every_promise() {
    campaign(&Case::with_db(cairn_testkit::TestDb::sqlite()), None, 20);
}

/// The campaign on `case`'s database, its workload `secs` long unless
/// `CAIRN_CAMPAIGN_SECS` says otherwise.
fn campaign(case: &Case, cluster: Option<cairn_testkit::PgCluster>, secs: u64) {
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
    let mut fleet = Fleet::start(case, cluster, &crew);
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
    while Instant::now() < deadline {
        nemesis.strike(&mut fleet);
        std::thread::sleep(Duration::from_secs(1));
    }
    let history = clients.stop();
    fleet.heal();
    let runs = state::wait_until_settled(case, Duration::from_secs(90));
    let windows = nemesis.windows();
    let final_state = state::read(case, &runs, &effects, &windows);
    let report = cairn_history::check(&history, &final_state, &windows, size.seed);
    eprintln!("{report}");
    eprintln!(
        "{} operations, {} runs, {} effects, faults: {}",
        history.len() / 2,
        final_state.runs.len(),
        final_state.effects.len(),
        nemesis.summary()
    );
    for (n, error) in recorder.errors() {
        eprintln!("  {n:>5} × {error}");
    }
    assert!(report.is_valid(), "{report}\nseed {}", size.seed);
    let failed: Vec<&serde_json::Value> =
        runs.iter().filter(|r| r["status"] != "succeeded").collect();
    assert!(failed.is_empty(), "runs that did not succeed: {failed:#?}");
    assert!(
        final_state.effects.len() >= 2 * runs.len(),
        "{} effects for {} runs of two steps",
        final_state.effects.len(),
        runs.len()
    );
    assert!(
        final_state.runs.len() >= size.clients * 3,
        "too few runs to prove anything: {}",
        final_state.runs.len()
    );
    fleet.stop();
}

/// The crew the campaign runs: two steps, each appending one line to the
/// effects log (`RUN STEP ATTEMPT WORKER NANOS`) before it sleeps a
/// little, as an outside effect would. `CAMPAIGN_WORKER` names the process
/// that ran it (each worker and the server set their own).
fn effect_crew(case: &Case) -> (PathBuf, PathBuf) {
    let log = case.path("effects.log");
    let script = effect_script(&log);
    let agent = |role| format!("{}env = [\"CAMPAIGN_WORKER\"]\n", agent_sh(role, &script));
    let agents = [agent("first"), agent("second")];
    let crew = case.write("crew.toml", &crew_toml("campaign", &agents));
    (crew, log)
}

fn effect_script(log: &Path) -> String {
    format!(
        "cat > /dev/null; echo \"$CAIRN_RUN_ID $CAIRN_STEP_IDX $CAIRN_ATTEMPT \
         $CAMPAIGN_WORKER $(date +%s%N)\" >> '{}'; sleep 0.2; \
         printf '{{\"step\": %s}}\\n' \"$CAIRN_STEP_IDX\"",
        log.display()
    )
}
