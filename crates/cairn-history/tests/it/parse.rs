//! Histories as JSON lines (the wire format, a round trip, a bad line named
//! by number), a malformed history, and how a report prints.

use cairn_history::{parse_jsonl, to_jsonl, Error, EventKind, Op, Property, ViolationKind as K};

use crate::build::*;

#[test]
fn the_wire_format_reads_as_documented() {
    let text = r#"
{"process":3,"type":"invoke","op":{"f":"submit","key":"k1"},"time_ns":100}
{"process":3,"type":"ok","op":{"f":"submit","key":"k1","run":"r1"},"time_ns":250}

{"process":4,"type":"ok","op":{"f":"read_events","run":"r1","seqs":[1,2]},"time_ns":300}
{"process":5,"type":"info","op":{"f":"commit","run":"r1","step":0,"epoch":2,"owner":"w1"},"time_ns":400}
"#;
    let events = parse_jsonl(text).unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[1], ok(3, 250, submit("k1", Some("r1"))));
    assert_eq!(events[2].op, read("r1", &[1, 2]));
    assert_eq!(events[3].kind, EventKind::Info);
}

#[test]
fn a_history_survives_a_round_trip() {
    let history = vec![
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
        invoke(2, 30, answer("w1", "approve")),
        fail(2, 40, answer("w1", "approve")),
        invoke(3, 50, signal("r1", "go", "s1")),
        info(3, 60, signal("r1", "go", "s1")),
        ok(4, 70, claim("r1", 1, "w1")),
        invoke(4, 80, commit("r1", 0, 1, "w1")),
        ok(4, 90, commit("r1", 0, 1, "w1")),
        invoke(5, 100, read("r1", &[])),
        ok(5, 110, read("r1", &[1, 2, 3])),
    ];
    assert_eq!(parse_jsonl(&to_jsonl(&history)).unwrap(), history);
}

#[test]
fn a_bad_line_is_named_by_its_number() {
    let text = to_jsonl(&[invoke(1, 10, submit("k1", None))]);
    let text = format!("{text}\n{{\"process\":1,\"type\":\"maybe\"}}\n");
    let Err(err) = parse_jsonl(&text) else {
        panic!("a bad line parsed");
    };
    assert!(matches!(err, Error::Line { line: 3, .. }), "{err:?}");
    assert!(err.to_string().starts_with("history line 3:"), "{err}");
}

#[test]
fn an_invoke_while_the_process_has_one_open_is_malformed() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        invoke(1, 20, submit("k2", None)),
        ok(1, 30, claim("r1", 1, "w1")),
    ];
    let report = verdict(&history, &runs(vec![]));
    assert_only(&report, Property::WellFormed, &[K::Malformed, K::Malformed]);
    assert_eq!(report.violations[0].events, history[..2]);
}

#[test]
fn a_report_prints_the_property_the_events_and_the_seed() {
    let history = [
        invoke(1, 10, submit("k1", None)),
        ok(1, 20, submit("k1", Some("r1"))),
    ];
    let report = cairn_history::check(&history, &runs(vec![]), &[], 424242);
    let text = report.to_string();
    assert!(text.contains("seed 424242: INVALID"), "{text}");
    assert!(text.contains("[submits] LostSubmit"), "{text}");
    assert!(text.contains("p1    invoke submit key=k1"), "{text}");
    assert!(text.contains("p1    ok     submit key=k1 run=r1"), "{text}");
    assert!(text.contains("reproduce with seed 424242"), "{text}");
    let counts = report.operations[&Op::Submit {
        key: String::new(),
        run: None,
    }
    .op_type()];
    assert_eq!((counts.ok, counts.fail, counts.info), (1, 0, 0));
}
