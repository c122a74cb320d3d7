//! The loss of the database primary survived: three `cairn worker`s and a
//! `cairn serve` on a multi-host URL
//! (`postgres://h1,h2/test?target_session_attrs=read-write`) carry on
//! without a restart through a promotion of a synchronous standby (the
//! primary stopped immediately, the standby promoted) and through a
//! read-only flip of the primary. Every run succeeds, every step runs at
//! least once and at most once more (only steps in flight at the fault),
//! no worker exits, and the server answers submits after the fault.

use super::*;

/// What happens to the database under load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The primary stopped immediately (`pg_ctl -m immediate`), its
    /// synchronous standby promoted.
    Promotion,
    /// The primary made read-only (`default_transaction_read_only`, reloaded
    /// without closing connections) for a while, then writable again.
    ReadOnlyFlip,
}

#[test]
fn three_workers_and_a_server_carry_on_through_a_promotion_of_the_cluster() {
    carry_on(Fault::Promotion);
}

#[test]
fn three_workers_and_a_server_carry_on_through_a_read_only_flip_of_the_cluster() {
    carry_on(Fault::ReadOnlyFlip);
}

const RUNS: usize = 24;
const LATER_RUNS: usize = 6;

fn carry_on(fault: Fault) {
    let _load = crate::support::loads_the_machine();
    let mut primary = cairn_testkit::PgCluster::start().unwrap_or_else(failed);
    let mut standby = primary.standby().unwrap_or_else(failed);
    let name = standby.standby_name().expect("a standby's name").to_owned();
    primary.set_synchronous(Some(&name)).unwrap_or_else(failed);
    primary.wait_streaming(&name, true).unwrap_or_else(failed);
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/test?target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let case = Case::with_db(cairn_testkit::TestDb::postgres_at(url));
    let (log, crew) = logged_crew(&case, "failover");
    let crew = crew.to_str().unwrap();
    let input = |i: usize| format!("{{\"n\": {i}}}");
    let indices: Vec<usize> = (0..RUNS).collect();
    let mut ids = parallel(&indices, 4, |i| {
        let out = case.cairn(&["submit", crew, "--input", &input(*i)]);
        out.expect_code(0).stdout.trim().to_owned()
    });

    let dir = case.path("crew.toml");
    let dir = dir
        .parent()
        .expect("the case's directory")
        .to_str()
        .unwrap();
    let server = crate::support::serve(&case, &["--crews", dir], &[]);
    // Lease 6 s: a write is retried for half of it (3 s), longer than the
    // promotion takes here, and a worker whose beats failed meanwhile
    // loses its runs to a takeover only after the whole lease.
    let args = super::worker_flags(4, 6000, 1000, 50, 3000);
    let names = ["0", "1", "2"];
    let mut workers = Workers::spawn(&case, &names, &args);

    let total = (RUNS + LATER_RUNS) * RESTART_STEPS as usize;
    poll(
        "a fifth of the steps to start",
        Duration::from_secs(40),
        || count_executions(&log).values().sum::<usize>() >= total / 5,
    );
    match fault {
        Fault::Promotion => {
            primary.stop_immediate().unwrap_or_else(failed);
            standby.promote().unwrap_or_else(failed);
        }
        Fault::ReadOnlyFlip => {
            let flip = |on: &str| {
                primary
                    .sql(&format!(
                        "ALTER SYSTEM SET default_transaction_read_only = {on}"
                    ))
                    .and_then(|_| primary.sql("SELECT pg_reload_conf()"))
                    .unwrap_or_else(failed);
            };
            flip("on");
            std::thread::sleep(Duration::from_secs(2));
            flip("off");
        }
    }
    // The server took the fault without a restart: submits through it
    // land. One that meets the switch of hosts is refused as unavailable
    // (HTTP 503, "try again later": not retried by the store, since a
    // submit without a key could land twice), so the client sends it
    // again under its idempotency key, as a client should.
    let mut refused = 0;
    for i in 0..LATER_RUNS {
        let key = format!("later-{i}");
        let args = [
            "submit",
            crew,
            "--input",
            &input(RUNS + i),
            "--idempotency-key",
            &key,
        ];
        let deadline = Instant::now() + Duration::from_secs(20);
        let out = loop {
            let out = case.cairn_at(Some(&server.url), &args);
            if out.code() == Some(0) {
                break out;
            }
            let log = std::fs::read_to_string(case.path("serve.err")).unwrap_or_default();
            assert!(
                Instant::now() < deadline,
                "{}\nserver log:\n{log}",
                out.stderr
            );
            out.expect_stderr(&["the database is unavailable; try again later", "HTTP 503"]);
            refused += 1;
            std::thread::sleep(Duration::from_millis(200));
        };
        ids.push(out.stdout.trim().to_owned());
    }
    eprintln!("{fault:?}: {refused} submits through the server refused with 503 before one landed");

    all_succeed(
        &case,
        &mut workers,
        &names,
        ids.len(),
        Duration::from_secs(90),
    );
    let executed = count_executions(&log);
    for id in &ids {
        for idx in 0..RESTART_STEPS {
            let n = executed.get(&(id.clone(), idx)).copied().unwrap_or(0);
            assert!(
                (1..=2).contains(&n),
                "run {id} step {idx} executed {n} times"
            );
        }
    }
    assert_eq!(executed.len(), total, "the log names unknown steps");
    let again: usize = executed.values().map(|n| n - 1).sum();
    assert!(
        again <= names.len() * 4,
        "{again} steps ran again: more than the 12 worker slots in flight at the fault"
    );
    // Every committed step survived: each run's steps hold their outputs.
    let shown = parallel(&ids, 4, |id| case.show(id));
    for run in &shown {
        for idx in 0..RESTART_STEPS as usize {
            assert_eq!(step(run, idx)["output"]["step"], idx, "{run}");
        }
    }
    if fault == Fault::Promotion {
        let promoted = standby
            .sql("SELECT pg_is_in_recovery()")
            .unwrap_or_else(failed);
        assert_eq!(promoted, "f", "the runs finished on the promoted standby");
    }
    for i in 0..names.len() {
        workers.signal(i, Signal::SIGTERM);
    }
    for i in 0..names.len() {
        let status = workers.wait_exit(i, Duration::from_secs(10));
        assert_eq!(status.code(), Some(0), "worker {i}: {status}");
    }
}

/// A throwaway cluster that failed to do what it was asked.
#[track_caller]
fn failed<T>(e: cairn_testkit::ClusterError) -> T {
    panic!("throwaway cluster: {e}")
}
