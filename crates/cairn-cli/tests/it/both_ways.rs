//! Every command both ways: against the database (`--db`) and against a
//! real `cairn serve` on the same database (`--server`), comparing stdout
//! and exit codes. Each command is written once (`src/commands/`) over one
//! trait; this is what keeps the two modes from drifting apart again.

use crate::support::{self, Case, Kind, Out, Served};

const TOKEN: &str = "both-ways-token-0123456789";

/// `greet` (a template step, then a command step) and `fail`.
fn greet() -> String {
    support::crew_toml(
        "greet",
        &[
            support::agent_template("greeter", "Hello {{ input.name }}"),
            support::agent_sh("echo", "cat > /dev/null; echo said-hello"),
        ],
    )
}

fn serve(case: &Case) -> Served {
    let crews = support::crews_dir(
        case,
        &[
            ("greet.toml", &greet()),
            ("fail.toml", &support::fail_crew()),
        ],
    );
    std::fs::copy(support::example("review.toml"), crews.join("review.toml")).unwrap();
    let fanout = support::example("fanout");
    for name in ["fanout.toml", "review.toml"] {
        let to = crews.join("fanout");
        std::fs::create_dir_all(&to).unwrap();
        std::fs::copy(fanout.join(name), to.join(name)).unwrap();
    }
    support::serve_crews(case, &crews, TOKEN)
}

fn remote(case: &Case, served: &Served, args: &[&str]) -> Out {
    support::remote(case, served, TOKEN, args)
}

/// `text` with run and wait ids, times and durations masked, and runs of
/// spaces made one (a masked column is narrower): two runs that did the
/// same read the same.
fn masked(text: &str) -> String {
    let mask = |word: &str| -> String {
        let hex_dashes = word.len() >= 36
            && word.chars().filter(|c| *c == '-').count() >= 4
            && word
                .trim_matches(|c: char| !c.is_ascii_hexdigit())
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == '-');
        let bare = word.trim_matches(['"', ',']);
        let time = bare.len() >= 20 && bare.as_bytes()[4] == b'-' && bare.contains('T');
        let duration = word
            .trim_end_matches(['m', 's'])
            .parse::<f64>()
            .is_ok_and(|_| word.ends_with('s'));
        match () {
            _ if hex_dashes => "<id>".to_owned(),
            _ if time => "<time>".to_owned(),
            _ if duration => "<dur>".to_owned(),
            _ => word.to_owned(),
        }
    };
    // `16 ms`: a number whose next word is a unit.
    let line = |l: &str| {
        let words: Vec<&str> = l.split_whitespace().collect();
        let mut out = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let unit = words.get(i + 1).is_some_and(|u| ["ms", "s"].contains(u));
            if unit && w.parse::<f64>().is_ok() {
                out.push("<dur>".to_owned());
            } else if !["ms", "s"].contains(w) || i == 0 || out.last().is_none_or(|l| l != "<dur>")
            {
                out.push(mask(w));
            }
        }
        out.join(" ")
    };
    text.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// Runs `args` both ways; asserts the same exit code and stdout (exact,
/// or `masked` when the two sides act on different but alike runs).
fn same(case: &Case, served: &Served, args: &[&str], remote_args: &[&str], mask: bool) -> Out {
    // Locally the operating system's user acts; the server's token holder
    // is `api`: the same name, so the two print the same.
    let here = case.cairn_env(args, &[("USER", "api")]);
    let there = remote(case, served, remote_args);
    assert_eq!(
        here.code(),
        there.code(),
        "exit codes of {args:?} / {remote_args:?}: local stderr {}\nremote stderr {}",
        here.stderr,
        there.stderr
    );
    // The commands suggested name the database, or the server, used.
    let a = here
        .stdout
        .replace(&format!("cairn --db {}", case.url()), "cairn <target>");
    let b = there
        .stdout
        .replace(&format!("cairn --server {}", served.url), "cairn <target>");
    let (a, b) = match mask {
        true => (masked(&a), masked(&b)),
        false => (a, b),
    };
    assert_eq!(a, b, "stdout of {args:?} / {remote_args:?}");
    assert!(
        !here.stdout.is_empty() || here.code() != Some(0),
        "{args:?} printed nothing"
    );
    here
}

fn id_of(out: &Out) -> String {
    out.json()["id"].as_str().unwrap().to_owned()
}

#[test]
fn every_command_prints_the_same_locally_and_against_a_server() {
    let case = Case::new(Kind::Sqlite);
    let served = serve(&case);
    let crews = case.path("crews");
    let file = |name: &str| crews.join(name).to_str().unwrap().to_owned();
    let (greet, fail, review) = (file("greet.toml"), file("fail.toml"), file("review.toml"));

    // Runs made here, read both ways.
    let run = |crew: &str, extra: &[&str]| {
        let mut args = vec!["run", crew, "--json"];
        args.extend(extra);
        case.cairn(&args)
    };
    let ok =
        id_of(&run(&greet, &["--input", r#"{"name": "Ada"}"#, "--thread", "t1"]).expect_code(0));
    run(&greet, &["--input", r#"{"name": "Bo"}"#, "--thread", "t1"]).expect_code(0);
    run(&greet, &["--input", r#"{"name": "Di"}"#, "--thread", "t2"]).expect_code(0);
    let failed = id_of(&run(&fail, &[]).expect_code(3));
    let waiting = id_of(&run(&review, &["--input", r#"{"topic": "t"}"#]).expect_code(4));
    let fanout = file("fanout/fanout.toml");
    let parent = id_of(&run(&fanout, &["--input", "{}"]).expect_code(0));

    let pause = [
        "limits",
        "pause",
        "provider=bw",
        "--for",
        "1h",
        "--by",
        "ops",
    ];
    case.cairn(&pause).expect_code(0);

    let reads: Vec<Vec<&str>> = vec![
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "list", "--limit", "2"],
        vec!["runs", "list", "--limit", "2", "--json"],
        vec!["runs", "list", "--oldest"],
        vec!["runs", "list", "--status", "failed"],
        vec!["runs", "list", "--parent", &parent],
        vec!["runs", "list", "--parent", &parent, "--json"],
        vec!["runs", "show", &parent],
        vec!["runs", "show", &parent, "--json"],
        vec!["runs", "show", &ok],
        vec!["runs", "show", &ok, "--json"],
        vec!["runs", "show", &ok, "--outputs"],
        vec!["runs", "show", &ok, "--step", "1"],
        vec!["runs", "show", &ok, "--step", "0", "--json"],
        vec!["runs", "show", &waiting],
        vec!["runs", "show", &failed],
        vec!["runs", "events", &ok],
        vec!["runs", "events", &failed, "--json"],
        vec!["runs", "show", &parent, "--step", "0"],
        vec!["runs", "journal", &ok],
        vec!["runs", "journal", &ok, "--json"],
        vec!["runs", "watch", &ok],
        vec!["runs", "watch", &failed, "--json"],
        vec!["waits", "list"],
        vec!["waits", "list", "--json"],
        vec!["waits", "list", "--all"],
        vec!["waits", "list", "--run", &waiting, "--json"],
        vec!["threads", "list"],
        vec!["threads", "list", "--json"],
        vec!["threads", "show", "t1"],
        vec!["threads", "show", "t1", "--json"],
        vec!["signal", "list", &ok],
        vec!["signal", "list", &ok, "--json"],
        vec!["runs", "values", &ok],
        vec!["runs", "values", &ok, "draft", "--json"],
        vec!["compact", "--finished-older-than", "30d", "--dry-run"],
        vec!["compact", "--journals", "--dry-run", "--json"],
        vec!["limits", "list"],
        vec!["limits", "list", "--json"],
        vec!["crews", "list"],
        vec!["crews", "list", "--json"],
        vec!["crews", "show", "greet"],
        vec!["crews", "show", "review", "1", "--json"],
        vec!["crews", "diff", "review", "1", "1"],
        vec!["crews", "diff", "review", "1", "1", "--json"],
        vec![
            "runs",
            "upgrade",
            "--crew",
            "review",
            "--to",
            "1",
            "--dry-run",
        ],
        vec!["runs", "upgrade", "--crew", "review", "--to", "1", "--json"],
        // Refusals: the same exit code (2 bad input, 6 not found).
        vec!["runs", "show", "not-a-run-id"],
        vec!["runs", "show", "00000000-0000-4000-8000-000000000000"],
        vec!["waits", "list", "--status", "sideways"],
        vec!["compact"],
        vec!["limits", "resume", "provider=never-paused"],
        vec!["limits", "pause", "provider=x", "--for", "soon"],
        vec!["crews", "show", "greet", "9"],
        vec!["crews", "diff", "greet", "1", "9"],
        vec!["signal", "send", "key:nobody-has-it", "paid"],
        vec!["signal", "send", &ok, "paid"],
        vec!["signal", "send", &waiting, ""],
        vec!["signal", "list", "not-a-run-id"],
    ];
    for args in &reads {
        same(&case, &served, args, args, false);
    }
    // A signal sent both ways: buffered alike (its ids and times masked).
    let send = [
        "signal",
        "send",
        &waiting,
        "paid",
        "--payload",
        "{\"n\": 1}",
    ];
    let sent = same(&case, &served, &send, &send, true);
    assert!(sent.stdout.contains("buffered"), "{}", sent.stdout);
    let listed = case
        .cairn(&["signal", "list", &waiting, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(listed["signals"].as_array().unwrap().len(), 2, "{listed}");
    // The process registry: the server's own process, its beats masked.
    for args in [&["workers"][..], &["workers", "--json"]] {
        same(&case, &served, args, args, true);
    }
    let workers = case.cairn(&["workers", "--json"]).expect_code(0).json();
    let server = &workers.as_array().unwrap()[0];
    assert_eq!(server["live"], true, "{workers}");
    let offers = server["offers"].as_array().unwrap();
    assert!(offers.iter().any(|o| o["name"] == "greet"), "{workers}");

    // A thread's budget, set the same both ways (a set is idempotent), then
    // shown; a raise of a limit it lacks is refused alike (nothing written).
    let set = [
        "threads",
        "budget",
        "t1",
        "--budget",
        "tokens=100000",
        "--by",
        "ada",
    ];
    same(&case, &served, &set, &set, true);
    let mut set_json = set.to_vec();
    set_json.push("--json");
    let budget = same(&case, &served, &set_json, &set_json, true).json();
    assert_eq!(budget["budget"]["tokens"], 100000, "{budget}");
    for args in [
        &["threads", "show", "t1"][..],
        &["threads", "show", "t1", "--json"],
    ] {
        same(&case, &served, args, args, true);
    }
    let lacking = ["threads", "budget", "t1", "--budget", "model_calls=+1"];
    let refused = same(&case, &served, &lacking, &lacking, true);
    assert_eq!(refused.code(), Some(2), "{}", refused.stderr);
    crate::support::assert_contains(&refused.stderr, "no such limit");

    // Lists read a page at a time (here one record a page) print the same.
    for args in [
        ["threads", "list", "--quiet"],
        ["threads", "list", "--json"],
        ["runs", "list", "--quiet"],
        ["runs", "list", "--json"],
    ] {
        let whole = case.cairn(&args).expect_code(0).stdout;
        let one = [("CAIRN_LIST_PAGE", "1")];
        assert_eq!(case.cairn_env(&args, &one).stdout, whole, "{args:?}");
        let mut remote_args = args.to_vec();
        remote_args.extend(["--server", &served.url, "--token", TOKEN]);
        let there = case.raw(&remote_args, &one).expect_code(0).stdout;
        let there = there.replace(&served.url, case.url());
        assert_eq!(there, whole, "{args:?} --server");
    }

    // Actions on alike runs, one here and one through the server.
    let other_failed = id_of(&run(&fail, &[]).expect_code(3));
    alike(
        &case,
        &served,
        &["runs", "retry"],
        (&failed, &other_failed),
        &[],
    );
    // Again, asking a `children` step to start every child again: the
    // choice is recorded both ways.
    let rerun = ["--rerun-children"];
    alike(
        &case,
        &served,
        &["runs", "retry"],
        (&failed, &other_failed),
        &rerun,
    );
    for id in [&failed, &other_failed] {
        let retried = case.events_of(id, "run_retried");
        assert_eq!(retried.len(), 2, "{retried:?}");
        assert_eq!(retried[1]["data"]["rerun_children"], true, "{retried:?}");
    }

    let other_waiting = id_of(&run(&review, &["--input", r#"{"topic": "t"}"#]).expect_code(4));
    let wait_of = |run: &str| {
        let waits = case
            .cairn(&["waits", "list", "--run", run, "--json"])
            .json();
        waits[0]["id"].as_str().unwrap().to_owned()
    };
    let waits = (wait_of(&waiting), wait_of(&other_waiting));
    let waits = (waits.0.as_str(), waits.1.as_str());
    let approve = ["--approve", "--by", "ada"];
    let out = alike(&case, &served, &["waits", "answer"], waits, &approve);
    assert_eq!(
        out.code(),
        Some(4),
        "approved, the run waits for its publishing approval"
    );
    // The first wait again: closed, both ways pointing at the open one.
    alike(&case, &served, &["waits", "answer"], waits, &approve);

    alike(
        &case,
        &served,
        &["runs", "fork"],
        (&ok, &ok),
        &["--from-step", "1"],
    );
    // Asking a `children` step the fork runs to start every child again:
    // recorded both ways.
    let rerun = [
        "--from-step",
        "0",
        "--rerun-children",
        "--enqueue",
        "--json",
    ];
    alike(&case, &served, &["runs", "fork"], (&ok, &ok), &rerun);
    let runs = case.cairn(&["runs", "list", "--json"]).json();
    let rerun_forks = runs.as_array().unwrap().iter().filter(|r| {
        let forked = case.events_of(r["id"].as_str().unwrap(), "run_forked");
        forked.iter().any(|e| e["data"]["rerun_children"] == true)
    });
    assert_eq!(
        rerun_forks.count(),
        2,
        "one fork here, one through the server"
    );
    let cancelled = (waiting.as_str(), other_waiting.as_str());
    alike(&case, &served, &["runs", "cancel"], cancelled, &["--json"]);
    let input = ["--input", r#"{"name": "Cy"}"#];
    alike(&case, &served, &["submit"], (&greet, "greet"), &input);
}

/// `HEAD HERE TAIL` locally and `HEAD THERE TAIL` against the server, on
/// alike runs (or a crew file and its name): the same, ids and times masked.
fn alike(
    case: &Case,
    served: &Served,
    head: &[&str],
    (here, there): (&str, &str),
    tail: &[&str],
) -> Out {
    let with = |id: &str| -> Vec<String> {
        head.iter()
            .copied()
            .chain([id])
            .chain(tail.iter().copied())
            .map(str::to_owned)
            .collect()
    };
    let (a, b) = (with(here), with(there));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    same(case, served, &a, &b, true)
}
