//! Schedules between real processes: three `cairn worker`s share one
//! database and fire a schedule every second while two of them are
//! SIGKILLed and restarted, in turn: every slot from the first to the last
//! runs exactly once, none missing. Then every process is down for a few
//! seconds; when one comes back, the catch-up policy decides exactly
//! which missed slots run (`all:N`: every one; `latest`: the newest only,
//! the others recorded `missed`). `CAIRN_SCHEDULE_SOAK_SECS` (default 9)
//! sets how long the first part lasts; the issue's campaign is 60.

use std::time::Duration;

use cairn::{RunFilter, Schedule, SlotOutcome};

use crate::support::{crews_dir, env_u64, in_process, remote, serve_crews, Case, Kind, Spawned};

both_backends!(
    each_slot_runs_once_across_killed_workers_and_catch_up_decides_after_an_outage,
    a_schedule_made_through_a_server_is_fired_by_it,
);

const CREW: &str = "name = \"tick\"\nversion = \"1\"\n[[agents]]\nrole = \"say\"\n\
    kind = \"template\"\ntemplate = \"tick {{ input.slot }}\"\n";

fn worker(case: &Case) -> Spawned {
    Spawned(case.spawn(&["worker", "--poll-ms", "200", "--concurrency", "2"], &[]))
}

fn create(case: &Case, name: &str, catch_up: &str) {
    let crew = case.path("tick.toml");
    std::fs::write(&crew, CREW).unwrap();
    let args = [
        "schedules",
        "create",
        name,
        "--crew",
        crew.to_str().unwrap(),
        "--every",
        "1s",
        "--overlap",
        "allow",
        "--catch-up",
        catch_up,
        "--input",
        r#"{"slot": "{{ scheduled_for }}"}"#,
    ];
    case.cairn(&args).expect_code(0);
}

/// `name`'s slots, oldest first.
fn slots(case: &Case, name: &str) -> Vec<cairn::Slot> {
    let (rt, engine) = in_process(case);
    let (_, mut slots) = rt.block_on(engine.schedule(name, 100_000)).unwrap();
    slots.reverse();
    slots
}

fn each_slot_runs_once_across_killed_workers_and_catch_up_decides_after_an_outage(kind: Kind) {
    let case = Case::new(kind);
    create(&case, "every", "all:1000");
    create(&case, "latest", "latest");
    let secs = env_u64("CAIRN_SCHEDULE_SOAK_SECS").unwrap_or(9);
    let mut workers: Vec<Spawned> = (0..3).map(|_| worker(&case)).collect();
    for slot in workers.iter_mut().take(2) {
        std::thread::sleep(Duration::from_secs(secs / 3));
        drop(std::mem::replace(slot, worker(&case))); // SIGKILL, restart
    }
    std::thread::sleep(Duration::from_secs(secs / 3));
    drop(workers); // every process down: an outage
    let before = slots(&case, "every").len();

    let fired = slots(&case, "every");
    assert!(
        fired.len() as u64 >= secs - 2,
        "about a slot a second: {}",
        fired.len()
    );
    for pair in fired.windows(2) {
        let gap = pair[1].slot - pair[0].slot;
        assert_eq!(gap, chrono::Duration::seconds(1), "none missing: {pair:?}");
    }
    let (rt, engine) = in_process(&case);
    let runs = rt
        .block_on(engine.list(&RunFilter {
            limit: Some(100_000),
            ..RunFilter::default()
        }))
        .unwrap();
    for slot in &fired {
        assert_eq!(slot.outcome, SlotOutcome::Fired, "{slot:?}");
        let key = Schedule::key("every", slot.slot);
        let mine: Vec<_> = runs
            .iter()
            .filter(|r| r.idempotency_key.as_deref() == Some(&key))
            .collect();
        assert_eq!(mine.len(), 1, "exactly one run for {key}");
        assert_eq!(Some(mine[0].id), slot.run_id);
    }

    // The outage: nothing fires for over three seconds, then one worker.
    std::thread::sleep(Duration::from_millis(3_500));
    let back = worker(&case);
    std::thread::sleep(Duration::from_millis(1_500));
    drop(back);
    let every = slots(&case, "every");
    let after: Vec<_> = every[before..].iter().map(|s| s.outcome).collect();
    assert!(after.len() >= 3, "{after:?}");
    assert!(
        after.iter().all(|o| *o == SlotOutcome::Fired),
        "all:N runs every missed slot: {after:?}"
    );
    for pair in every.windows(2) {
        assert_eq!(
            pair[1].slot - pair[0].slot,
            chrono::Duration::seconds(1),
            "none missing"
        );
    }
    let latest = slots(&case, "latest");
    let missed: Vec<_> = latest
        .iter()
        .filter(|s| s.outcome == SlotOutcome::Missed)
        .collect();
    assert!(
        missed.len() >= 2,
        "latest: the older slots of the outage are missed: {latest:?}"
    );
    let last_missed = missed.last().unwrap().slot;
    let next = latest
        .iter()
        .find(|s| s.slot > last_missed)
        .expect("the newest due slot");
    assert_eq!(
        next.outcome,
        SlotOutcome::Fired,
        "latest: the newest due slot runs"
    );
}

/// `cairn schedules` through `--server`: the crew is one the server
/// loaded, by name; the server fires the schedule and runs its slots;
/// show, trigger, pause and delete answer as they do on the database.
fn a_schedule_made_through_a_server_is_fired_by_it(kind: Kind) {
    let case = Case::new(kind);
    let token = "schedules-token-0123456789";
    let served = serve_crews(&case, &crews_dir(&case, &[("tick.toml", CREW)]), token);
    let cairn = |args: &[&str]| remote(&case, &served, token, args);
    let create = [
        "schedules",
        "create",
        "every",
        "--crew",
        "tick",
        "--every",
        "1s",
        "--input",
        r#"{"slot": "{{ scheduled_for }}"}"#,
        "--json",
    ];
    let made = cairn(&create).expect_code(0).json();
    assert_eq!(
        (made["crew"].as_str(), made["next"].as_array().map(Vec::len)),
        (Some("tick"), Some(3))
    );
    cairn(&create)
        .expect_code(2)
        .expect_stderr(&["exists already"]);
    crate::support::wait_until("two slots fired and ran", Duration::from_secs(30), || {
        let shown = cairn(&["schedules", "show", "every", "--json"])
            .expect_code(0)
            .json();
        let ids: Vec<String> = shown["slots"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["run_id"].as_str().map(str::to_owned))
            .collect();
        ids.len() >= 2 && ids.iter().all(|id| case.show(id)["status"] == "succeeded")
    });
    // A run a schedule started says so, both ways.
    let listed = cairn(&["runs", "list", "--json"]).expect_code(0).json();
    let first = &listed.as_array().unwrap()[0];
    assert_eq!(first["schedule"], "every", "{first}");
    let id = first["id"].as_str().unwrap();
    let shown = case.show(id);
    assert_eq!(
        (&shown["schedule"], &shown["scheduled_for"]),
        (&first["schedule"], &first["scheduled_for"])
    );
    let slot = cairn(&["schedules", "trigger", "every", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(slot[0]["outcome"], "fired", "{slot}");
    let paused = cairn(&["schedules", "pause", "every", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(paused["paused"], true);
    let listed = cairn(&["schedules", "list", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    cairn(&["schedules", "delete", "every"]).expect_code(0);
    cairn(&["schedules", "show", "every"])
        .expect_code(2)
        .expect_stderr(&["not found"]);
}
