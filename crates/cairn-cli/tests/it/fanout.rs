//! A fan-out followed from a client (`cairn run --server`): waiting for its
//! own children is not a stop, so the command follows the parent until
//! the children end, a line for each, and exits with the tree's outcome.

use crate::support::{self, Case, Kind};

const FAN: &str = r#"
name = "fan"
version = "1"
[[agents]]
role = "fan"
kind = "children"
crew = "slow"
over = "input.items"
"#;

/// A child that takes a while: the parent waits for it.
const SLOW: &str = r#"
name = "slow"
version = "1"
[[agents]]
role = "sleeper"
kind = "command"
command = ["sh", "-c", "cat > /dev/null; sleep 1; echo done"]
"#;

const TOKEN: &str = "s3cret-token-0123456789";

#[test]
fn a_client_run_of_a_fan_out_follows_its_children_to_the_end() {
    let case = Case::new(Kind::Sqlite);
    let crews = case.path("crews");
    std::fs::create_dir_all(&crews).unwrap();
    std::fs::write(crews.join("fan.toml"), FAN).unwrap();
    std::fs::write(crews.join("slow.toml"), SLOW).unwrap();
    let served = support::serve(
        &case,
        &["--crews", crews.to_str().unwrap()],
        &[("CAIRN_API_TOKENS", TOKEN)],
    );
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
    case.write("slow.toml", SLOW);
    let fan = FAN.replace("crew = \"slow\"", "crew = \"slow.toml\"");
    let fan = case.write("fan.toml", &fan);
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
