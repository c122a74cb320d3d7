//! A fan-out followed from a client (`cairn run --server`): waiting for its
//! own children is not a stop, so the command follows the parent until
//! the children end, a line for each, and exits with the tree's outcome.

use crate::support::{self, agent_children, agent_sh, crew_toml, Case, Kind};

const TOKEN: &str = "s3cret-token-0123456789";

/// A fan-out over `input.items` of the crew `child`.
fn fan(child: &str) -> String {
    crew_toml(
        "fan",
        &[agent_children("fan", child, "over = \"input.items\"\n")],
    )
}

/// A child that takes a while: the parent waits for it.
fn slow() -> String {
    let sleeper = agent_sh("sleeper", "cat > /dev/null; sleep 1; echo done");
    crew_toml("slow", &[sleeper])
}

#[test]
fn a_client_run_of_a_fan_out_follows_its_children_to_the_end() {
    let case = Case::new(Kind::Sqlite);
    let crews = support::crews_dir(&case, &[("fan.toml", &fan("slow")), ("slow.toml", &slow())]);
    let served = support::serve_crews(&case, &crews, TOKEN);
    let args = [
        "run",
        "fan",
        "--input",
        r#"{"items": ["a", "b"]}"#,
        "--server",
        &served.url,
        "--token",
        TOKEN,
    ];
    let out = case.raw(&args, &[]).expect_code(0);
    assert!(out.stdout.contains("status succeeded"), "{}", out.stdout);
    for key in ["child 0 (", "child 1 ("] {
        let line = out.stderr.lines().find(|l| l.starts_with(key));
        let line = line.unwrap_or_else(|| panic!("no line for {key}: {}", out.stderr));
        assert!(line.ends_with("succeeded"), "{line}");
    }
    // `runs show`, here and through the server, counts the children's
    // second as the `children` step's own (as the console draws it), not
    // the few milliseconds of its stored row.
    let parent = out.stdout.split_whitespace().nth(1).unwrap_or_default();
    let remote = [
        "runs",
        "show",
        parent,
        "--server",
        &served.url,
        "--token",
        TOKEN,
    ];
    for shown in [
        case.cairn(&["runs", "show", parent]).expect_code(0).stdout,
        case.raw(&remote, &[]).expect_code(0).stdout,
    ] {
        let row = shown
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("fan"));
        let row = row.unwrap_or_else(|| panic!("no row of the fan step: {shown}"));
        let seconds = row
            .trim_end()
            .strip_suffix(" s")
            .and_then(|r| r.split_whitespace().last()?.parse::<f64>().ok());
        assert!(
            seconds.is_some_and(|s| s >= 1.0),
            "the children's second: {row}"
        );
        assert!(shown.contains(" of it waiting for children"), "{shown}");
    }
}

/// Followed here (`--progress lines`), a fan-out prints a line for each
/// child as it ends (its parent's `child_ended` events), not nothing
/// until the join.
#[test]
fn a_local_run_of_a_fan_out_prints_a_line_per_child() {
    let case = Case::new(Kind::Sqlite);
    case.write("slow.toml", &slow());
    let fan = case.write("fan.toml", &fan("slow.toml"));
    let args = [
        "run",
        fan.to_str().unwrap(),
        "--input",
        r#"{"items": ["a", "b"]}"#,
        "--progress",
        "lines",
    ];
    let out = case.cairn(&args).expect_code(0);
    for key in ["child 0 (", "child 1 ("] {
        let line = out.stdout.lines().find(|l| l.trim_start().starts_with(key));
        let line = line.unwrap_or_else(|| panic!("no line for {key}: {}", out.stdout));
        assert!(line.ends_with("succeeded"), "{line}");
    }
}
