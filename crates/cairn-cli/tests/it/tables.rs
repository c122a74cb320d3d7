//! Text tables stay tables: a column as wide as its longest value, so a
//! long process id does not push the columns after it out of line.

use std::time::Duration;

use crate::support::{wait_until, Case, Kind, Spawned};

#[test]
fn the_workers_table_keeps_its_columns_in_line() {
    let case = Case::new(Kind::Sqlite);
    case.cairn(&["run", case.counting_crew(1).to_str().unwrap()])
        .expect_code(0);
    let _worker = Spawned(case.spawn(&["worker", "--poll-ms", "50"], &[]));
    wait_until("the worker to register", Duration::from_secs(30), || {
        case.cairn(&["workers", "--json"])
            .json()
            .as_array()
            .is_some_and(|w| !w.is_empty())
    });
    let out = case.cairn(&["workers"]).expect_code(0).stdout;
    let lines: Vec<&str> = out.lines().collect();
    let host_at = lines[0].find("HOST").unwrap();
    for row in &lines[1..] {
        if row.starts_with('*') {
            continue;
        }
        // The host column starts where its header does, after a space.
        assert_eq!(&row[host_at - 1..host_at], " ", "{out}");
        assert_ne!(&row[host_at..host_at + 1], " ", "{out}");
    }
}
