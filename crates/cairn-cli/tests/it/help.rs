//! `cairn`'s help and docs/cli.md agree: every command and subcommand the
//! binary has is in the guide's command list and the other way round, and
//! a help text says "local only" only of a command the guide's client-mode
//! section says is refused with `--server`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::support::CAIRN;

fn help(args: &[&str]) -> String {
    let out = Command::new(CAIRN)
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under `Commands:` (not `help`).
fn subcommands(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command path of the binary (`runs list`, `workers`), each with its
/// help text.
fn commands() -> Vec<(String, String)> {
    let mut all = vec![];
    for top in subcommands(&help(&[])) {
        let text = help(&[&top]);
        let subs = subcommands(&text);
        if subs.is_empty() {
            all.push((top.clone(), text));
        }
        for sub in subs {
            let text = help(&[&top, &sub]);
            all.push((format!("{top} {sub}"), text));
        }
    }
    all
}

fn guide() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join("docs/cli.md")).unwrap()
}

/// The command paths of the guide's command list (its first `text` block).
fn listed(guide: &str) -> BTreeSet<String> {
    let block = guide.split("```text\n").nth(1).unwrap();
    let block = block.split("```").next().unwrap();
    block
        .lines()
        .filter_map(|l| l.strip_prefix("cairn "))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().take(2).collect();
            match words.as_slice() {
                [cmd, sub, ..] if sub.chars().all(|c| c.is_ascii_lowercase()) => {
                    format!("{cmd} {sub}")
                }
                [cmd, ..] => (*cmd).to_owned(),
                [] => String::new(),
            }
        })
        .collect()
}

#[test]
fn every_command_is_in_the_guide_and_every_listed_one_exists() {
    let have: BTreeSet<String> = commands().into_iter().map(|(c, _)| c).collect();
    let listed = listed(&guide());
    let unlisted: Vec<_> = have.difference(&listed).collect();
    let unknown: Vec<_> = listed.difference(&have).collect();
    assert!(
        unlisted.is_empty(),
        "not in docs/cli.md's list: {unlisted:?}"
    );
    assert!(unknown.is_empty(), "listed but not a command: {unknown:?}");
}

#[test]
fn only_commands_refused_with_a_server_say_local_only() {
    let guide = guide();
    let at = guide
        .find("run next to the database and are")
        .expect("the client-mode section names the local commands");
    let sentence = &guide[guide[..at].rfind(". ").unwrap_or(0)..at];
    let local: Vec<&str> = sentence.split('`').skip(1).step_by(2).collect();
    assert!(local.contains(&"resume"), "{local:?}");
    for (command, text) in commands() {
        if text.contains("local only") {
            assert!(
                local
                    .iter()
                    .any(|l| command == *l || command.starts_with(&format!("{l} "))),
                "`cairn {command} --help` says local only, but docs/cli.md says it works with \
                 --server (local: {local:?})"
            );
        }
    }
}
