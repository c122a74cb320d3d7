//! Commits that survive a lost acknowledgement, on a real connection: a
//! TCP proxy (`cairn_testkit::CutProxy`) between `cairn` and PostgreSQL
//! cuts the connection of one step commit. When the commit reached the
//! server and only its answer was lost, the retry finds the step committed
//! and the run goes on, nothing written twice. When the commit itself was
//! lost and another process took the run over meanwhile, the retry is
//! refused by fencing and the other process's work stands. (SQLite has no
//! connection to cut: `boundaries.rs` injects the same loss there with
//! the `lose_ack:OP` failpoint.)

use std::net::SocketAddr;
use std::time::Duration;

use cairn_testkit::{Cut, CutProxy};
use serde_json::Value;

use crate::support::{agent_sh, crew_toml, step, wait_until, Case, Kind, Spawned};

/// The marker step 1's output carries, which the proxy watches for. The
/// step computes it, so the crew definition (stored at submit) does not
/// carry it.
const MARKER: &str = "cut-this-commit-42";

fn proxy_for(case: &Case) -> (CutProxy, String) {
    let url = case.url();
    let host_port = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('/'))
        .map(|(auth_host, _)| auth_host.rsplit_once('@').map_or(auth_host, |(_, h)| h))
        .expect("a postgres://USER@HOST:PORT/DB URL");
    let upstream: SocketAddr = host_port.parse().expect("HOST:PORT of the test server");
    let proxy = CutProxy::start(upstream).expect("start the proxy");
    // In clear text, so the proxy can see the marker (what Cairn does on
    // loopback anyway; said here so the test never depends on it).
    let sep = if url.contains('?') { '&' } else { '?' };
    let via = format!("{}{sep}sslmode=disable", proxy.url(url));
    (proxy, via)
}

/// Three steps; step 1 outputs the marker.
fn crew(case: &Case) -> String {
    let log = case.path("executions.log").display().to_string();
    let marked = agent_sh(
        "marked",
        &format!(
            "echo 1 >> {log}; cat > /dev/null; printf '{{\"note\": \"cut-this-commit-%s\"}}' $((6*7))"
        ),
    );
    let agents = [
        case.counting_agent("first"),
        marked,
        case.counting_agent("last"),
    ];
    case.write("crew.toml", &crew_toml("cut", &agents))
        .to_str()
        .unwrap()
        .to_owned()
}

fn kinds_at(case: &Case, id: &str, kind: &str, idx: u64) -> Vec<Value> {
    case.events(id)
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind && e["data"]["idx"] == idx)
        .cloned()
        .collect()
}

#[test]
fn a_commit_whose_answer_was_lost_is_recognised_not_repeated() {
    let case = Case::new(Kind::Postgres);
    let crew = crew(&case);
    let (proxy, via) = proxy_for(&case);
    proxy.arm(MARKER.as_bytes(), Cut::Answer);
    let out = case
        .raw(&["run", &crew, "--db", &via], &[("CAIRN_LOG", "info")])
        .expect_code(0);
    assert_eq!(proxy.cuts(), 1, "the proxy never cut: {}", out.stderr);
    out.expect_stderr(&["trying again", "had landed"]);
    let id = case.only_run_id();
    let run = case.show(&id);
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(step(&run, 1)["output"]["note"], MARKER, "{run:#}");
    assert_eq!(step(&run, 1)["attempt"], 1, "{run:#}");
    assert_eq!(case.executions(), vec![0, 1, 2], "a step ran again");
    assert_eq!(kinds_at(&case, &id, "step_succeeded", 1).len(), 1);
    let seqs: Vec<u64> = case
        .events(&id)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "event numbers"
    );
}

#[test]
fn a_lost_commit_is_refused_once_another_process_took_the_run_over() {
    let case = Case::new(Kind::Postgres);
    let crew = crew(&case);
    let (proxy, via) = proxy_for(&case);
    // The commit of step 1 is lost, and then nothing gets through: the
    // first process keeps retrying while the run is taken over directly.
    proxy.arm(MARKER.as_bytes(), Cut::Request);
    let mut first = case.command();
    first
        .args(["run", &crew, "--db", &via])
        .env("CAIRN_LOG", "info")
        .stdout(std::fs::File::create(case.path("first.stdout")).unwrap())
        .stderr(std::fs::File::create(case.path("first.stderr")).unwrap());
    let mut first = Spawned(first.spawn().expect("spawn cairn run"));
    wait_until("the cut", Duration::from_secs(30), || proxy.cuts() == 1);
    proxy.hold(true);
    let id = case.only_run_id();
    case.cairn(&["resume", &id, "--takeover"]).expect_code(0);
    proxy.hold(false);
    let status = first.wait("the fenced cairn run");
    let stderr = std::fs::read_to_string(case.path("first.stderr")).unwrap();
    assert!(stderr.contains("trying again"), "no retry: {stderr}");
    assert!(
        !stderr.contains("had landed"),
        "a lost commit was taken for landed: {stderr}"
    );

    // The takeover's work stands; the first process's retry changed nothing.
    let run = case.show(&id);
    assert_eq!(
        run["status"], "succeeded",
        "{run:#}\nfirst ({status}): {stderr}"
    );
    assert_eq!(run["lease_epoch"], 2, "{run:#}");
    assert_eq!(case.executions(), vec![0, 1, 1, 2], "{stderr}");
    let committed = kinds_at(&case, &id, "step_succeeded", 1);
    assert_eq!(committed.len(), 1, "{committed:#?}");
    let claims: Vec<Value> = case
        .events(&id)
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "run_claimed")
        .cloned()
        .collect();
    assert_eq!(claims.len(), 2, "{claims:#?}");
    assert!(
        committed[0]["seq"].as_u64() > claims[1]["seq"].as_u64(),
        "step 1 was committed before the takeover: {committed:#?} {claims:#?}"
    );
    assert_ne!(
        status.code(),
        Some(0),
        "the fenced process claimed success: {stderr}"
    );
}
