//! The schedule rule: the daylight-saving table, intervals, due slots,
//! catch-up, bad input, slot keys and the input template.

use chrono::TimeZone;

use super::*;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

/// "MM-DD HH:MM" in 2026, UTC.
fn in_2026(t: &str) -> DateTime<Utc> {
    let (day, time) = t.split_once(' ').unwrap();
    let (mo, d) = day.split_once('-').unwrap();
    let (h, mi) = time.split_once(':').unwrap();
    let n = |s: &str| s.parse::<u32>().unwrap();
    utc(2026, n(mo), n(d), n(h), n(mi))
}

fn next(cadence: &Cadence, after: DateTime<Utc>) -> DateTime<Utc> {
    cadence.next_after(after, after).unwrap().unwrap()
}

/// The daylight-saving rule, for a fixed time and for a repeating pattern,
/// in both directions, in Europe/Paris and America/New_York (2026: Paris
/// springs forward at 02:00 on 29 March and falls back at 03:00 on 25
/// October; New York on 8 March and 1 November).
#[test]
fn daylight_saving_table() {
    // (zone, expression, after, the next three slots, what it shows); times
    // are UTC in 2026, "MM-DD HH:MM".
    #[rustfmt::skip]
    let table = [
        ("Europe/Paris", "30 2 * * *", "03-28 12:00", ["03-29 01:00", "03-30 00:30", "03-31 00:30"], "02:30 does not exist on 29 March: the first instant after the gap (03:00 CEST)"),
        ("Europe/Paris", "30 2 * * *", "10-24 12:00", ["10-25 00:30", "10-26 01:30", "10-27 01:30"], "02:30 happens twice on 25 October: once, at the first (CEST)"),
        ("Europe/Paris", "*/30 * * * *", "10-24 23:40", ["10-25 00:00", "10-25 00:30", "10-25 01:00"], "every half hour runs through both 02:00-03:00 hours, in real time"),
        ("America/New_York", "30 2 * * *", "03-07 17:00", ["03-08 07:00", "03-09 06:30", "03-10 06:30"], "02:30 does not exist on 8 March: 03:00 EDT"),
        ("America/New_York", "30 1 * * *", "10-31 17:00", ["11-01 05:30", "11-02 06:30", "11-03 06:30"], "01:30 happens twice on 1 November: once, at the first (EDT)"),
        ("America/New_York", "0 9 * * MON", "10-31 17:00", ["11-02 14:00", "11-09 14:00", "11-16 14:00"], "Monday 09:00 after the change is 14:00 UTC (EST)"),
    ];
    for (tz, expr, after, want, what) in table {
        let cadence = Cadence::cron(expr, Some(tz)).unwrap();
        let want = want.map(in_2026);
        let mut at = in_2026(after);
        let mut got = vec![];
        for _ in 0..3 {
            at = next(&cadence, at);
            got.push(at);
        }
        assert_eq!(got, want, "{tz} `{expr}`: {what}");
    }
}

#[test]
fn intervals_count_from_their_anchor_and_never_go_back() {
    let anchor = utc(2026, 11, 29, 9, 0);
    let every = Cadence::every(Duration::from_secs(90)).unwrap();
    let at = |a| every.next_after(anchor, a).unwrap().unwrap();
    assert_eq!(at(anchor), anchor + chrono::Duration::seconds(90));
    let a_day_before = anchor - chrono::Duration::days(1);
    assert_eq!(
        at(a_day_before),
        a_day_before + chrono::Duration::seconds(90)
    );
    assert_eq!(at(anchor - chrono::Duration::seconds(1)), anchor);
    assert_eq!(
        at(anchor + chrono::Duration::seconds(100)),
        anchor + chrono::Duration::seconds(180)
    );
    assert!(Cadence::every(Duration::from_millis(500)).is_err());
}

#[test]
fn due_lists_every_slot_up_to_now_and_the_next_one() {
    let anchor = utc(2026, 11, 29, 9, 0);
    let every = Cadence::every(Duration::from_secs(60)).unwrap();
    let now = anchor + chrono::Duration::seconds(150);
    let (due, next) = every.due(anchor, anchor, now).unwrap();
    assert_eq!(
        due,
        [
            anchor,
            anchor + chrono::Duration::seconds(60),
            anchor + chrono::Duration::seconds(120)
        ]
    );
    assert_eq!(next, Some(anchor + chrono::Duration::seconds(180)));
    let (none, next) = every.due(anchor, next.unwrap(), now).unwrap();
    assert!(none.is_empty());
    assert_eq!(next, Some(anchor + chrono::Duration::seconds(180)));
}

#[test]
fn catch_up_picks_which_due_slots_run() {
    let slots: Vec<_> = (0..5).map(|m| utc(2026, 11, 29, 9, m)).collect();
    assert_eq!(CatchUp::Latest.pick(&slots), [slots[4]]);
    assert_eq!(CatchUp::One.pick(&slots), [slots[0]]);
    assert_eq!(CatchUp::All(2).pick(&slots), [slots[3], slots[4]]);
    assert_eq!(CatchUp::All(9).pick(&slots), slots);
    assert!(CatchUp::Latest.pick(&[]).is_empty());
    assert_eq!(CatchUp::parse("all:3").unwrap(), CatchUp::All(3));
    for bad in ["all:0", "all", "some", "all:-1"] {
        assert!(CatchUp::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn bad_cadences_and_names_are_refused_with_what_is_wrong() {
    let e = Cadence::cron("61 * * * *", None).unwrap_err();
    assert!(e.to_string().contains("61 * * * *"), "{e}");
    let e = Cadence::cron("0 9 * * *", Some("Mars/Olympus")).unwrap_err();
    assert!(e.to_string().contains("Mars/Olympus"), "{e}");
    assert!(Overlap::parse("sometimes").is_err());
    for bad in ["", "a:b", "with space", &"x".repeat(65)] {
        assert!(Schedule::check_name(bad).is_err(), "{bad:?}");
    }
    Schedule::check_name("daily-triage.v2").unwrap();
}

#[test]
fn a_slot_key_names_its_schedule_and_slot() {
    let slot = utc(2026, 11, 29, 9, 0);
    let key = Schedule::key("daily", slot);
    assert_eq!(key, "schedule:daily:2026-11-29T09:00:00Z");
    assert_eq!(Schedule::of_key(&key), Some(("daily", slot)));
    assert_eq!(Schedule::of_key("my-own-key"), None);
}

#[test]
fn the_input_template_sees_its_slot_and_firing_time() {
    let schedule = Schedule {
        name: "daily".into(),
        crew: "triage".into(),
        fingerprint: "f".into(),
        input: serde_json::json!({"day": "{{ scheduled_for }}", "at": ["{{fired_at}}"], "n": 1}),
        cadence: Cadence::Every { secs: 60 },
        overlap: Overlap::Skip,
        catch_up: CatchUp::Latest,
        thread: None,
        priority: 0,
        tenant: None,
        paused: false,
        next_at: utc(2026, 11, 29, 9, 0),
        created_at: utc(2026, 11, 29, 8, 0),
        created_by: None,
    };
    let input = schedule.input_of(utc(2026, 11, 29, 9, 0), utc(2026, 11, 29, 9, 1));
    assert_eq!(
        input,
        serde_json::json!({"day": "2026-11-29T09:00:00Z", "at": ["2026-11-29T09:01:00Z"], "n": 1})
    );
}
