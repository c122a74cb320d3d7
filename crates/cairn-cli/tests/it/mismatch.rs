//! Crew match, both backends: `cairn resume --crew OTHER` with another
//! fingerprint is refused (exit 2, both fingerprints named, nothing executed
//! or written); with `--force` it proceeds and records a `crew_forced` event.

use crate::support::{crew_toml, Case, Kind};

both_backends!(resume_with_another_crew_is_refused_unless_forced);

/// The `sha256:…` fingerprints a message names, in order.
fn fingerprints(text: &str) -> Vec<String> {
    text.match_indices("sha256:")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == ':')
                .collect()
        })
        .collect()
}

fn resume_with_another_crew_is_refused_unless_forced(kind: Kind) {
    let case = Case::new(kind);
    let crew = case.counting_crew(3);
    // Leave the run unfinished: killed right after step 0's commit.
    case.killed_at(&["run", crew.to_str().unwrap()], "after_commit:0");
    let id = case.only_run_id();
    let before = case.show(&id);
    assert_eq!(before["status"], "running");
    assert_eq!(before["cursor"], 1);
    let events_before = case.events(&id);

    // Same roles, one more setting: another fingerprint.
    let agents = [
        case.counting_agent("step-00"),
        case.counting_agent("step-01"),
        format!("{}timeout_ms = 60000\n", case.counting_agent("step-02")),
    ];
    let other = case.write("other.toml", &crew_toml("counting", &agents));
    let other = other.to_str().unwrap();

    let out = case.cairn(&["resume", &id, "--crew", other]).expect_code(2);
    let named = fingerprints(&out.stderr);
    assert_eq!(named.len(), 2, "both fingerprints named: {}", out.stderr);
    let stored = before["crew_fingerprint"].as_str().unwrap();
    assert_eq!(named[0], stored, "{}", out.stderr);
    assert_ne!(named[1], stored, "{}", out.stderr);
    let offered = named[1].clone();
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(case.executions(), vec![0], "nothing executed");
    assert_eq!(case.show(&id), before, "the run is unchanged");
    assert_eq!(case.events(&id), events_before, "no event written");

    // Forced: the run carries on with the new crew, recorded as an event.
    let out = case
        .cairn(&[
            "resume",
            &id,
            "--crew",
            other,
            "--force",
            "--takeover",
            "--json",
        ])
        .expect_code(0);
    let run = out.json();
    assert_eq!(run["status"], "succeeded", "{run:#}");
    assert_eq!(run["crew_fingerprint"], offered.as_str(), "{run:#}");
    assert_eq!(case.executions(), vec![0, 1, 2]);
    let events = case.events(&id);
    let forced = case.events_of(&id, "crew_forced");
    assert_eq!(forced.len(), 1, "one crew_forced event: {events:#}");
    assert_eq!(forced[0]["data"]["stored"], stored, "{events:#}");
    assert_eq!(forced[0]["data"]["offered"], offered.as_str(), "{events:#}");
}
