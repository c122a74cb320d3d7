//! Schedules: each slot is decided once however many processes fire
//! together, its run submitted under `schedule:NAME:SLOT`; the catch-up
//! policy picks which slots due at once run (the others recorded
//! `missed`), the overlap policy what a slot does while the previous run
//! is unfinished; pause, resume, trigger, backfill and delete; a bad
//! definition or a taken name stores nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use cairn_checkpoint::{Action, Error, NewSchedule, Slot};
use cairn_core::{Cadence, CatchUp, Overlap, Priority, RunStatus, Schedule, SlotOutcome};
use cairn_testkit::{both, Kind, TestDb};
use serde_json::json;

use super::{crew_of, operator, Db};
use crate::{fresh, store};

both!(
    each_slot_is_decided_once_however_many_fire,
    catch_up_decides_which_missed_slots_run,
    overlap_skips_or_buffers_while_the_previous_run_is_unfinished,
    pause_trigger_backfill_and_delete,
    a_bad_definition_or_a_taken_name_stores_nothing,
);

fn every_second(name: &str, overlap: Overlap, catch_up: CatchUp) -> NewSchedule {
    NewSchedule {
        name: name.to_owned(),
        crew: crew_of("tick", "1", &[("a", "template")]),
        input: json!({"slot": "{{ scheduled_for }}"}),
        cadence: Cadence::Every { secs: 1 },
        overlap,
        catch_up,
        thread: None,
        priority: Priority::default(),
        tenant: None,
        by: Some("ops".into()),
    }
}

fn of(slots: &[Slot], outcome: SlotOutcome) -> Vec<&Slot> {
    slots.iter().filter(|s| s.outcome == outcome).collect()
}

async fn each_slot_is_decided_once_however_many_fire(kind: Kind) {
    let db = TestDb::of(kind).await;
    let (a, b) = (store(&db).await, store(&db).await);
    let created = a
        .create_schedule(&every_second("tick", Overlap::Allow, CatchUp::All(100)))
        .await
        .unwrap();
    assert!(created.next_at > created.created_at, "{created:?}");
    let mut decided = vec![];
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (x, y) = tokio::join!(a.fire_schedules(10), b.fire_schedules(10));
        decided.extend(x.unwrap());
        decided.extend(y.unwrap());
    }
    let slots: BTreeSet<_> = decided.iter().map(|s| s.slot).collect();
    assert_eq!(
        slots.len(),
        decided.len(),
        "a slot decided twice: {decided:?}"
    );
    assert!(decided.len() >= 2, "{decided:?}");
    for slot in &decided {
        assert_eq!(slot.outcome, SlotOutcome::Fired);
        let run = slot.run_id.expect("a fired slot names its run");
        let (record, _) = a.load(run).await.unwrap();
        assert_eq!(
            record.idempotency_key,
            Some(Schedule::key("tick", slot.slot))
        );
        let want = cairn_core::schedule::rfc3339(slot.slot);
        assert_eq!(
            record.input,
            json!({"slot": want}),
            "the template saw its slot"
        );
    }
    let stored = a.schedule_slots("tick", 100).await.unwrap();
    assert_eq!(stored.len(), decided.len(), "{stored:?}");
    let now = a.schedule("tick").await.unwrap();
    assert!(now.next_at > decided.iter().map(|s| s.slot).max().unwrap());
}

async fn catch_up_decides_which_missed_slots_run(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    for (name, policy) in [
        ("latest", CatchUp::Latest),
        ("one", CatchUp::One),
        ("two", CatchUp::All(2)),
    ] {
        store
            .create_schedule(&every_second(name, Overlap::Allow, policy))
            .await
            .unwrap();
    }
    // Nothing fires for over three seconds: an outage of every process.
    tokio::time::sleep(Duration::from_millis(3_400)).await;
    assert_eq!(store.missed_slots().await.unwrap(), 0);
    let decided = store.fire_schedules(10).await.unwrap();
    let missed = of(&decided, SlotOutcome::Missed).len() as u64;
    assert!(missed >= 5, "{decided:?}");
    assert_eq!(
        store.missed_slots().await.unwrap(),
        missed,
        "every missed slot counted"
    );
    for (name, runs) in [("latest", 1), ("one", 1), ("two", 2)] {
        let mine: Vec<Slot> = decided
            .iter()
            .filter(|s| s.schedule == name)
            .cloned()
            .collect();
        assert!(
            mine.len() >= 3,
            "{name}: three slots or more were due: {mine:?}"
        );
        let fired = of(&mine, SlotOutcome::Fired);
        assert_eq!(fired.len(), runs, "{name}: {mine:?}");
        assert_eq!(
            of(&mine, SlotOutcome::Missed).len(),
            mine.len() - runs,
            "{name}"
        );
        let newest = mine.iter().map(|s| s.slot).max().unwrap();
        let oldest = mine.iter().map(|s| s.slot).min().unwrap();
        match name {
            "one" => assert_eq!(fired[0].slot, oldest, "one: the oldest slot runs"),
            _ => assert_eq!(
                fired.last().unwrap().slot,
                newest,
                "{name}: the newest runs"
            ),
        }
    }
}

async fn overlap_skips_or_buffers_while_the_previous_run_is_unfinished(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (skip, buffer) = (
        every_second("skip", Overlap::Skip, CatchUp::All(10)),
        every_second("buffer", Overlap::Buffer, CatchUp::All(10)),
    );
    store.create_schedule(&skip).await.unwrap();
    store.create_schedule(&buffer).await.unwrap();
    // Slots one by one: the first runs (and stays queued: nothing runs it).
    let mut all = vec![];
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_050)).await;
        all.extend(store.fire_schedules(10).await.unwrap());
    }
    let outcomes = |name: &str| -> Vec<SlotOutcome> {
        let mut mine: Vec<&Slot> = all.iter().filter(|s| s.schedule == name).collect();
        mine.sort_by_key(|s| s.slot);
        mine.iter().map(|s| s.outcome).collect()
    };
    let skipped = outcomes("skip");
    assert_eq!(skipped[0], SlotOutcome::Fired, "{skipped:?}");
    assert!(
        skipped[1..].iter().all(|o| *o == SlotOutcome::Skipped),
        "{skipped:?}"
    );
    let buffered = outcomes("buffer");
    assert_eq!(
        &buffered[..2],
        [SlotOutcome::Fired, SlotOutcome::Buffered],
        "{buffered:?}"
    );
    assert!(
        buffered[2..].iter().all(|o| *o == SlotOutcome::Skipped),
        "one buffered at most"
    );

    // The previous run ends: the buffered slot runs at the next pass.
    let first = all.iter().find(|s| s.schedule == "buffer").unwrap();
    let run = first.run_id.unwrap();
    store
        .act(run, Action::Cancel, &operator("ops"))
        .await
        .unwrap();
    let released = store.fire_schedules(10).await.unwrap();
    let slot = released
        .iter()
        .find(|s| s.schedule == "buffer" && s.outcome == SlotOutcome::Fired)
        .expect("the buffered slot fired");
    let second = all
        .iter()
        .filter(|s| s.schedule == "buffer")
        .nth(1)
        .unwrap()
        .slot;
    let mut sorted: Vec<_> = all
        .iter()
        .filter(|s| s.schedule == "buffer")
        .map(|s| s.slot)
        .collect();
    sorted.sort();
    assert_eq!(slot.slot, sorted[1], "the slot that waited ({second})");
    let (record, _) = store.load(slot.run_id.unwrap()).await.unwrap();
    assert_eq!(record.status, RunStatus::Queued);
}

async fn pause_trigger_backfill_and_delete(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let made = store
        .create_schedule(&every_second("ops", Overlap::Allow, CatchUp::Latest))
        .await
        .unwrap();
    let paused = store.pause_schedule("ops", true).await.unwrap();
    assert!(paused.paused);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        store.fire_schedules(10).await.unwrap().is_empty(),
        "paused: nothing fires"
    );
    let resumed = store.pause_schedule("ops", false).await.unwrap();
    assert!(
        !resumed.paused && resumed.next_at > made.next_at,
        "{resumed:?}"
    );

    let triggered = store.trigger_schedule("ops").await.unwrap();
    assert_eq!(triggered.outcome, SlotOutcome::Fired);
    let from = made.created_at - chrono::Duration::seconds(10);
    let to = made.created_at - chrono::Duration::seconds(6);
    let filled = store.backfill_schedule("ops", from, to).await.unwrap();
    assert_eq!(
        filled.len(),
        5,
        "a slot a second, both ends included: {filled:?}"
    );
    let again = store.backfill_schedule("ops", from, to).await.unwrap();
    let runs = |s: &[Slot]| s.iter().map(|s| s.run_id).collect::<Vec<_>>();
    assert_eq!(runs(&again), runs(&filled), "a slot that ran keeps its run");
    let listed = store.schedule_slots("ops", 100).await.unwrap();
    assert_eq!(listed.len(), 6, "{listed:?}");
    assert!(
        listed.windows(2).all(|w| w[0].slot > w[1].slot),
        "newest first"
    );
    assert_eq!(store.schedules().await.unwrap().len(), 1);

    store.delete_schedule("ops").await.unwrap();
    assert_gone!(
        Error::ScheduleNotFound(_),
        store.schedule("ops"),
        store.delete_schedule("ops"),
    );
    let run = triggered.run_id.unwrap();
    assert!(store.load(run).await.is_ok(), "its runs stay");
}

async fn a_bad_definition_or_a_taken_name_stores_nothing(kind: Kind) {
    let db = TestDb::of(kind).await;
    let store: Db = store(&db).await;
    let first = store
        .create_schedule(&every_second("taken", Overlap::Skip, CatchUp::Latest))
        .await
        .unwrap();
    let again = NewSchedule {
        cadence: Cadence::Every { secs: 60 },
        ..every_second("taken", Overlap::Allow, CatchUp::One)
    };
    assert!(matches!(
        store.create_schedule(&again).await,
        Err(Error::ScheduleExists(_))
    ));
    assert_eq!(store.schedule("taken").await.unwrap(), first, "unchanged");
    let bad_cron = NewSchedule {
        cadence: Cadence::Cron {
            expr: "99 * * * *".into(),
            tz: "UTC".into(),
        },
        ..every_second("bad", Overlap::Skip, CatchUp::Latest)
    };
    for bad in [
        bad_cron,
        every_second("a:b", Overlap::Skip, CatchUp::Latest),
    ] {
        let e = store.create_schedule(&bad).await.unwrap_err();
        assert!(matches!(e, Error::BadSchedule(_)), "{e}");
    }
    assert_eq!(store.schedules().await.unwrap().len(), 1);
}
