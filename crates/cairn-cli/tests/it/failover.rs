//! `cairn doctor` on a throwaway cluster with a streaming standby
//! (`cairn_testkit::PgCluster`, never the shared server): it reports the
//! replication setup, warns that a failover can lose acknowledged work
//! while the standby is asynchronous (or Cairn's own commits do not wait
//! for it), and stops warning once it is synchronous; a warning, so the
//! exit code stays 0.

use cairn_testkit::{PgCluster, TestDb};

use crate::support::Case;

const WARNING: &str = "warning: replication is asynchronous";

#[test]
fn doctor_warns_on_a_cluster_with_an_asynchronous_standby_and_not_with_a_synchronous_one() {
    let primary = PgCluster::start()
        .unwrap_or_else(|e| panic!("cannot start a throwaway PostgreSQL cluster: {e}"));
    let case = Case::with_db(TestDb::postgres_at(primary.url()));
    // Alone: nothing streams, so nothing is synchronous.
    case.submit(&case.counting_crew(1));
    let alone = case.cairn(&["doctor"]).expect_code(0).stdout;
    assert!(alone.contains(WARNING), "{alone}");
    assert!(alone.contains("no standby streams"), "{alone}");

    let standby = primary
        .standby()
        .unwrap_or_else(|e| panic!("cannot make a standby: {e}"));
    let name = standby.standby_name().unwrap();
    primary.wait_streaming(name, false).unwrap();
    let asynchronous = case.cairn(&["doctor"]).expect_code(0).stdout;
    for needle in [
        WARNING,
        "acknowledged submits, answers and step commits",
        &format!("standbys: {name} (streaming, async)"),
        &format!("synchronous_standby_names = 'FIRST 1 ({name})'"),
        "synchronous_commit = on (or remote_apply)",
        "pg_autoctl set node replication-quorum true",
        "with two or more standbys also pg_autoctl set formation number-sync-standbys 1",
        "synchronous_mode: true and synchronous_mode_strict: true",
    ] {
        assert!(asynchronous.contains(needle), "{needle}:\n{asynchronous}");
    }
    let json = case.cairn(&["doctor", "--json"]).expect_code(0).json();
    assert_eq!(json["runs"], 1, "{json}");
    assert_eq!(json["replication"]["standbys"][0]["application_name"], name);
    assert_eq!(json["replication"]["standbys"][0]["sync_state"], "async");
    assert_eq!(json["replication"]["in_recovery"], false);

    primary.set_synchronous(Some(name)).unwrap();
    primary.wait_streaming(name, true).unwrap();
    let synchronous = case.cairn(&["doctor"]).expect_code(0).stdout;
    assert!(!synchronous.contains("warning"), "{synchronous}");
    assert!(
        synchronous.contains(&format!("standbys: {name} (streaming, sync)"))
            && synchronous.contains("replication: synchronous"),
        "{synchronous}"
    );
    // `?durability=process` turns synchronous_commit off on Cairn's
    // connections, which gives the synchronous standby up.
    let process_url = format!("{}?durability=process", primary.url());
    let process = case
        .raw(&["doctor", "--db", &process_url], &[])
        .expect_code(0)
        .stdout;
    assert!(
        process.contains(WARNING) && process.contains("synchronous_commit = off"),
        "{process}"
    );
}
