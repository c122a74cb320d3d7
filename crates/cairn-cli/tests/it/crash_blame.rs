//! `crash_loop` blames a run only with evidence: a worker killed with
//! several runs in flight counts the death against none of them; after a
//! second such death each runs alone, where a death is evidence. A run whose step kills its worker
//! process every time (`kill -9 $PPID`) still fails `crash_loop`, and the
//! healthy runs that were in flight with it all succeed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_testkit::Kind;

use crate::support::{agent_sh, crew_toml, Case, Spawned};

both_backends!(a_run_that_kills_its_worker_fails_alone_and_spares_the_others);

/// One worker process, as an operator's supervisor restarts it.
fn worker(case: &Case, round: usize) -> Spawned {
    let mut cmd = case.command();
    cmd.args(["worker", "--concurrency", "4", "--lease-ms", "1500"])
        .args([
            "--heartbeat-ms",
            "500",
            "--poll-ms",
            "100",
            "--db",
            case.url(),
        ])
        .env("CAIRN_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(case.path(&format!("worker-{round}.err"))).unwrap());
    Spawned(cmd.spawn().unwrap())
}

fn a_run_that_kills_its_worker_fails_alone_and_spares_the_others(kind: Kind) {
    let case = Case::new(kind);
    let killer = case.write(
        "killer.toml",
        &crew_toml(
            "killer",
            &[agent_sh(
                "kill",
                "cat > /dev/null; sleep 1; kill -9 $PPID; sleep 5",
            )],
        ),
    );
    let healthy = case.write(
        "healthy.toml",
        &crew_toml(
            "healthy",
            &[agent_sh("work", "cat > /dev/null; sleep 2; echo done")],
        ),
    );
    let submit = |crew: &std::path::Path| {
        let out = case
            .cairn(&["submit", crew.to_str().unwrap()])
            .expect_code(0);
        out.stdout.trim().to_owned()
    };
    let bad = submit(&killer);
    let good: Vec<String> = (0..3).map(|_| submit(&healthy)).collect();
    let status = |id: &str| case.show(id)["status"].as_str().unwrap().to_owned();
    let settled = || {
        std::iter::once(&bad)
            .chain(&good)
            .all(|id| !matches!(status(id).as_str(), "queued" | "running"))
    };

    // Restart the worker whenever it dies, as a supervisor would.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut deaths = 0;
    while !settled() {
        assert!(
            Instant::now() < deadline,
            "not settled after {deaths} worker deaths"
        );
        let mut w = worker(&case, deaths);
        while !settled() {
            if w.0.try_wait().unwrap().is_some() {
                deaths += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    let failed = case.show(&bad);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["kind"], "crash_loop", "{failed}");
    for id in &good {
        let run = case.show(id);
        assert_eq!(
            run["status"], "succeeded",
            "a healthy run was blamed: {run}"
        );
        assert_eq!(run["steps"][0]["output"], "done");
    }
    // The first death was shared (four runs in flight), the rest were the
    // killer's alone: three counted takeovers, then the fourth claim failed it.
    assert!(deaths >= 4, "{deaths} worker deaths");
    let shared = |id: &str| {
        let events = case.events(id);
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "run_claimed" && e["data"]["shared_death"] == true)
            .count()
    };
    assert!(
        shared(&bad) >= 1,
        "no takeover of the killer was a shared death"
    );
    // Each healthy run was taken over as a shared death, the last one too
    // (its companions were taken over before it: it was marked).
    for id in &good {
        assert!(
            shared(id) >= 1,
            "run {id} was taken over as if it died alone"
        );
    }
}
