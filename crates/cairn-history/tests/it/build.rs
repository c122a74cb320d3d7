//! Builders for hand-written histories and final states, and the assertion
//! every test ends with: exactly these violations, of this property.

use cairn_history::{
    check, CommittedRow, Event, EventKind, FaultWindow, FinalState, Op, Property, Report, RowKind,
    Run, RunStatus, ViolationKind,
};

fn event(process: u32, kind: EventKind, time_ns: u64, op: Op) -> Event {
    Event {
        process,
        kind,
        op,
        time_ns,
    }
}

pub fn invoke(process: u32, time_ns: u64, op: Op) -> Event {
    event(process, EventKind::Invoke, time_ns, op)
}

pub fn ok(process: u32, time_ns: u64, op: Op) -> Event {
    event(process, EventKind::Ok, time_ns, op)
}

pub fn fail(process: u32, time_ns: u64, op: Op) -> Event {
    event(process, EventKind::Fail, time_ns, op)
}

pub fn info(process: u32, time_ns: u64, op: Op) -> Event {
    event(process, EventKind::Info, time_ns, op)
}

/// Run `r1` submitted with key `k1` by `process`: invoked at `invoked`,
/// acknowledged at `acked`.
pub fn submitted_by(process: u32, invoked: u64, acked: u64) -> Vec<Event> {
    vec![
        invoke(process, invoked, submit("k1", None)),
        ok(process, acked, submit("k1", Some("r1"))),
    ]
}

/// [`submitted_by`] process 9 at 1 and 2 ns: where most histories start.
pub fn submitted() -> Vec<Event> {
    submitted_by(9, 1, 2)
}

pub fn submit(key: &str, run: Option<&str>) -> Op {
    Op::Submit {
        key: key.into(),
        run: run.map(Into::into),
    }
}

pub fn answer(wait: &str, decision: &str) -> Op {
    Op::Answer {
        wait: wait.into(),
        decision: decision.into(),
    }
}

pub fn signal(run: &str, name: &str, id: &str) -> Op {
    Op::Signal {
        run: run.into(),
        name: name.into(),
        id: id.into(),
    }
}

pub fn read(run: &str, seqs: &[u64]) -> Op {
    Op::ReadEvents {
        run: run.into(),
        seqs: seqs.to_vec(),
    }
}

pub fn claim(run: &str, epoch: u64, owner: &str) -> Op {
    Op::Claim {
        run: run.into(),
        epoch,
        owner: owner.into(),
    }
}

pub fn commit(run: &str, step: u32, epoch: u64, owner: &str) -> Op {
    Op::Commit {
        run: run.into(),
        step,
        epoch,
        owner: owner.into(),
    }
}

/// A run under `key`, in `status`.
/// A committed row of run `r1`, under its lease.
pub fn row(step: u32, kind: RowKind, epoch: u64, owner: &str, order: u64) -> CommittedRow {
    CommittedRow {
        run: "r1".into(),
        step,
        kind,
        epoch: Some(epoch),
        owner: Some(owner.into()),
        order,
    }
}

pub fn run(id: &str, key: &str, status: RunStatus) -> Run {
    Run {
        id: id.into(),
        key: Some(key.into()),
        parent: None,
        status,
    }
}

/// A finished run under `key`.
pub fn finished(id: &str, key: &str) -> Run {
    run(id, key, RunStatus::Finished)
}

/// A final state holding only `runs`.
pub fn runs(runs: Vec<Run>) -> FinalState {
    FinalState {
        runs,
        ..FinalState::default()
    }
}

pub fn window(nemesis: &str, start_ns: u64, end_ns: u64) -> FaultWindow {
    FaultWindow {
        nemesis: nemesis.into(),
        start_ns,
        end_ns,
    }
}

/// Checks with no fault windows, seed 7.
pub fn verdict(history: &[Event], state: &FinalState) -> Report {
    check(history, state, &[], 7)
}

/// The report holds exactly `kinds` (in order), all of `property`.
pub fn assert_only(report: &Report, property: Property, kinds: &[ViolationKind]) {
    assert_eq!(report.kinds(), kinds, "{report}");
    assert!(!report.is_valid(), "{report}");
    assert!(
        report.violations.iter().all(|v| v.property() == property),
        "{report}"
    );
    assert_eq!(report.of(property).count(), kinds.len(), "{report}");
}

/// The report is valid.
pub fn assert_valid(report: &Report) {
    assert!(report.is_valid(), "{report}");
    assert!(report.violations.is_empty(), "{report}");
}
