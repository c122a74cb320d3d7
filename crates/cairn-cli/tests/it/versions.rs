//! Crew versions, both backends: runs waiting for a review survive a
//! deploy of a new crew version. An operator sees every stored version,
//! how two differ and which runs can move, and moves only those (a run
//! whose started steps the new version renames cannot move, and is forked
//! instead); a server offering two versions moves its `compatible` runs to
//! the newer one at their next step boundary and leaves `pinned` ones
//! where they are, executing nothing twice.

use crate::support::{
    self, agent_sh, agent_template, q, step, wait_until, Case, Kind, Out, Served,
};

both_backends!(
    an_operator_moves_the_runs_that_can_move_and_says_why_not,
    a_server_offering_two_versions_moves_compatible_runs_at_a_boundary,
    the_consoles_crews_page_moves_runs_to_the_newest_version,
    a_forced_upgrade_never_leaves_a_run_no_resume_can_read,
);

/// Version `version` of crew `essay`: `plan`, `write` (reviewed), `done`;
/// `extra` is appended (more agents, or top-level keys before them).
fn essay(version: &str, top: &str, write: &str, done: &str, extra: &[String]) -> String {
    let mut toml = format!("name = \"essay\"\nversion = {}\n{top}\n", q(version));
    let agents = [
        // An input with `boom` fails the plan (a run for `runs retry`).
        agent_template(
            "plan",
            "plan for {{ input.topic }}{% if input.boom is defined %}{{ input.boom.x }}{% endif %}",
        ),
        agent_template("write", write) + "review = true\n",
        agent_template("done", done),
    ];
    for a in agents.iter().chain(extra) {
        toml.push('\n');
        toml.push_str(a);
    }
    toml
}

fn v1(top: &str) -> String {
    essay("1", top, "draft v1", "done v1", &[])
}

/// A prompt changed and a step added at the end: compatible.
fn v2(top: &str) -> String {
    essay(
        "2",
        top,
        "draft v2",
        "done v2",
        &[agent_template("stamp", "stamped")],
    )
}

/// `plan` renamed `outline`: incompatible with any run that started it.
fn v3() -> String {
    essay("3", "", "draft v3", "done v3", &[]).replacen("role = \"plan\"", "role = \"outline\"", 1)
}

/// Version `version` of crew `clerk`: one `llm` step on the scripted model
/// (`scripts/clerk.toml`) that calls a tool and then would answer, stopped
/// by `max_turns = 1` before its answer.
fn clerk(version: &str) -> String {
    format!(
        "name = \"clerk\"\nversion = {}\n\n[[agents]]\nrole = \"clerk\"\nkind = \"llm\"\n\
         provider = \"scripted\"\nscript = \"scripts/clerk.toml\"\nmax_turns = 1\n\n\
         [[agents.tools]]\nname = \"echo\"\nparameters = {{ type = \"object\" }}\n\
         command = [\"sh\", \"-c\", \"cat\"]\n",
        q(version)
    )
}

fn clerk_script() -> String {
    let call = r#"{ id = "e1", name = "echo", arguments = { word = "hi" } }"#;
    crate::support::one_call_script("Echoing.", call, "Done.")
}

/// `cairn run CREW --json`, stopped at the review (exit 4); the run id.
fn run_to_review(case: &Case, crew: &str) -> String {
    let run = case
        .cairn(&["run", crew, "--input", r#"{"topic": "rivers"}"#, "--json"])
        .expect_code(4)
        .json();
    assert_eq!(run["cursor"], 1, "{run:#}");
    run["id"].as_str().unwrap().to_owned()
}

fn an_operator_moves_the_runs_that_can_move_and_says_why_not(kind: Kind) {
    let case = Case::new(kind);
    let c1 = case.write("v1.toml", &v1(""));
    let c2 = case.write("v2.toml", &v2(""));
    let c3 = case.write("v3.toml", &v3());
    let (c1, c2, c3) = (
        c1.to_str().unwrap(),
        c2.to_str().unwrap(),
        c3.to_str().unwrap(),
    );
    let runs: Vec<String> = (0..3).map(|_| run_to_review(&case, c1)).collect();

    // Stored once, with its unfinished runs.
    let crews = case
        .cairn(&["crews", "list", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(crews.as_array().unwrap().len(), 1, "{crews:#}");
    assert_eq!(crews[0]["name"], "essay");
    assert_eq!(crews[0]["version"], "1");
    assert_eq!(crews[0]["unfinished"], 3);
    let f1 = crews[0]["fingerprint"].as_str().unwrap().to_owned();
    assert_eq!(case.show(&runs[0])["crew_fingerprint"], f1.as_str());

    // v3 renames a started step: the diff says which runs cannot move and
    // why; an upgrade to it moves none (exit 2) and changes nothing.
    let diff = case
        .cairn(&["crews", "diff", "essay", "1", c3, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(diff["steps"][0]["change"], "renamed", "{diff:#}");
    assert_eq!(diff["steps"][1]["change"], "changed", "{diff:#}");
    assert_eq!(diff["runs"].as_array().unwrap().len(), 3, "{diff:#}");
    for r in diff["runs"].as_array().unwrap() {
        assert_eq!(r["movable"], false, "{r:#}");
        assert_eq!(r["idx"], 0, "{r:#}");
        assert!(r["reason"].as_str().unwrap().contains("`plan`"), "{r:#}");
    }
    let text = case
        .cairn(&["crews", "diff", "essay", "1", c3])
        .expect_code(0);
    assert!(text.stdout.contains("renamed"), "{}", text.stdout);
    assert!(text.stdout.contains("cannot move"), "{}", text.stdout);
    let refused = case
        .cairn(&["runs", "upgrade", "--crew", "essay", "--to", c3, "--json"])
        .expect_code(2)
        .json();
    assert!(refused
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["moved"] == false));
    for id in &runs {
        assert_eq!(case.show(id)["crew_version"], "1");
        assert!(case.events_of(id, "crew_upgraded").is_empty());
    }

    // v2 keeps the started steps: a dry run says all three would move and
    // moves none; then one run is moved, with who and why.
    let to_c2 = ["runs", "upgrade", "--crew", "essay", "--to", c2];
    let dry = case
        .cairn(&[&to_c2[..], &["--dry-run", "--json"]].concat())
        .expect_code(0)
        .json();
    let dry = dry.as_array().unwrap();
    assert_eq!(dry.len(), 3);
    assert!(dry
        .iter()
        .all(|v| v["movable"] == true && v["moved"] == false));
    assert_eq!(case.show(&runs[0])["crew_version"], "1");
    let who = ["--by", "ops", "--reason", "prompt fix", "--json"];
    let moved = case
        .cairn(&[&to_c2[..], &["--run", &runs[0]], &who].concat())
        .expect_code(0)
        .json();
    assert_eq!(moved[0]["moved"], true, "{moved:#}");
    let run = case.show(&runs[0]);
    assert_eq!(run["crew_version"], "2");
    assert_eq!(run["step_count"], 4);
    let ev = case.events_of(&runs[0], "crew_upgraded");
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert_eq!(ev[0]["data"]["from"]["fingerprint"], f1.as_str());
    assert_eq!(ev[0]["data"]["to"]["fingerprint"], run["crew_fingerprint"]);
    assert_eq!(ev[0]["data"]["note"], "ops", "`--by` is a note locally");
    assert_eq!(ev[0]["data"]["reason"], "prompt fix");
    let crews = case.cairn(&["crews", "list", "--json"]).json();
    let unfinished: Vec<(String, u64)> = crews
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["version"].as_str().unwrap().to_owned(),
                c["unfinished"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(unfinished, [("1".to_owned(), 2), ("2".to_owned(), 1)]);

    // Its review is answered: the steps after the cursor are v2's.
    let waits = case
        .cairn(&["waits", "list", "--run", &runs[0], "--json"])
        .json();
    let wait = waits[0]["id"].as_str().unwrap();
    case.cairn(&["waits", "answer", wait, "--approve"])
        .expect_code(0);
    let done = case.show(&runs[0]);
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(step(&done, 0)["output"], "plan for rivers");
    assert_eq!(
        step(&done, 1)["output"],
        "draft v1",
        "written before the move"
    );
    assert_eq!(step(&done, 2)["output"], "done v2");
    assert_eq!(step(&done, 3)["output"], "stamped");
    assert!(done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["attempt"] == 1));

    // The others stay on v1 and finish there; one is forked onto v3 from
    // its last compatible step (0: v3 renames step 0).
    let fork = case
        .cairn(&[
            "runs",
            "fork",
            &runs[1],
            "--from-step",
            "0",
            "--crew",
            c3,
            "--json",
        ])
        .expect_code(4)
        .json();
    assert_eq!(fork["crew_version"], "3", "{fork:#}");
    assert_eq!(step(&fork, 0)["role"], "outline");
    // v3 is stored now: a fork names it by version. Copying step 0 (which
    // v3 renames) is refused with nothing stored; from step 0 it runs.
    let stored = case.cairn(&["runs", "list", "--json"]).json();
    let refused = case.cairn(&[
        "runs",
        "fork",
        &runs[2],
        "--from-step",
        "1",
        "--crew-version",
        "3",
    ]);
    let refused = refused.expect_code(2);
    assert!(refused.stderr.contains("outline"), "{}", refused.stderr);
    assert_eq!(case.cairn(&["runs", "list", "--json"]).json(), stored);
    let onto = case
        .cairn(&[
            "runs",
            "fork",
            &runs[2],
            "--from-step",
            "0",
            "--crew-version",
            "3",
            "--json",
        ])
        .expect_code(4)
        .json();
    assert_eq!(onto["crew_version"], "3", "{onto:#}");
    let moved = case.events_of(onto["id"].as_str().unwrap(), "crew_upgraded");
    assert_eq!(moved[0]["data"]["from"]["version"], "1", "{moved:?}");
    let show = case
        .cairn(&["crews", "show", "essay", "1", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(show["agents"][0]["role"], "plan");
}

/// `cairn ARGS --server URL`.
fn remote(case: &Case, served: &Served, args: &[&str]) -> Out {
    let mut all = args.to_vec();
    all.extend(["--server", &served.url]);
    case.raw(&all, &[])
}

fn serve(case: &Case) -> Served {
    let dir = case.path("crews");
    support::serve(case, &["--crews", dir.to_str().unwrap()], &[])
}

fn a_server_offering_two_versions_moves_compatible_runs_at_a_boundary(kind: Kind) {
    let case = Case::new(kind);
    let dir = case.path("crews");
    std::fs::create_dir_all(&dir).unwrap();
    let top = "upgrade = \"compatible\"";
    std::fs::write(dir.join("essay-1.toml"), v1(top)).unwrap();
    // An `llm` crew stopped by `max_turns`: a run for `runs continue`.
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/clerk.toml"), clerk_script()).unwrap();
    std::fs::write(dir.join("clerk-1.toml"), clerk("1")).unwrap();
    let first = serve(&case);
    let submit = |extra: &[&str]| -> String {
        let mut args = vec!["submit", "essay", "--json"];
        if !extra.contains(&"--input") {
            args.extend(["--input", r#"{"topic": "rivers"}"#]);
        }
        args.extend(extra);
        let run = remote(&case, &first, &args).expect_code(0).json();
        run["id"].as_str().unwrap().to_owned()
    };
    let compatible: Vec<String> = (0..5).map(|_| submit(&[])).collect();
    let pinned: Vec<String> = (0..4).map(|_| submit(&["--upgrade", "pinned"])).collect();
    let manual = submit(&["--upgrade", "manual"]);
    let boom = [
        "--input",
        r#"{"topic": "t", "boom": 1}"#,
        "--upgrade",
        "pinned",
    ];
    let failed_v1 = submit(&boom);
    let clerk_run = |served: &Served| {
        let args = ["submit", "clerk", "--json"];
        let run = remote(&case, served, &args).expect_code(0).json();
        run["id"].as_str().unwrap().to_owned()
    };
    let interrupted_v1 = clerk_run(&first);
    let all: Vec<&String> = compatible.iter().chain(&pinned).chain([&manual]).collect();
    wait_until(
        "every run at its review",
        std::time::Duration::from_secs(60),
        || all.iter().all(|id| case.show(id)["status"] == "waiting"),
    );
    wait_until(
        "the boom run failed",
        std::time::Duration::from_secs(60),
        || case.show(&failed_v1)["status"] == "failed",
    );
    drop(first);

    // The deploy: v2 beside v1, one server offering both.
    std::fs::write(dir.join("essay-2.toml"), v2(top)).unwrap();
    std::fs::write(dir.join("clerk-2.toml"), clerk("2")).unwrap();
    let second = serve(&case);
    let crews = support::get(&second.listen, "/v1/crews");
    let offered: Vec<(&str, bool, u64)> = crews
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "essay")
        .map(|c| {
            let version = c["version"].as_str().unwrap();
            (
                version,
                c["newest"] == true,
                c["unfinished"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(offered, [("1", false, 11), ("2", true, 0)]);
    let page = support::get_text(&second.listen, "/crews");
    let v1 = &page[page.find("essay v1").expect("v1 on the crews page")..];
    assert!(
        v1.contains("An older version. 11 unfinished runs."),
        "{page}"
    );

    // Through the API: every run of v1 could move to v2; an operator moves
    // the `manual` one (its policy alone never would).
    let diff = remote(
        &case,
        &second,
        &["crews", "diff", "essay", "1", "2", "--json"],
    );
    let diff = diff.expect_code(0).json();
    assert_eq!(diff["steps"][3]["change"], "added", "{diff:#}");
    let runs = diff["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 11);
    assert!(runs.iter().all(|r| r["movable"] == true), "{diff:#}");
    let up = [
        "runs", "upgrade", "--crew", "essay", "--to", "2", "--run", &manual, "--json",
    ];
    let moved = remote(&case, &second, &up).expect_code(0).json();
    assert_eq!(moved[0]["moved"], true, "{moved:#}");

    // The reviews, answered through the API.
    for id in &all {
        let waits = remote(&case, &second, &["waits", "list", "--run", id, "--json"]).json();
        let wait = waits[0]["id"].as_str().unwrap();
        remote(&case, &second, &["waits", "answer", wait, "--approve"]).expect_code(0);
    }
    for id in &compatible {
        let run = case.show(id);
        assert_eq!(run["status"], "succeeded", "{run:#}");
        assert_eq!(run["crew_version"], "2", "{run:#}");
        assert_eq!(step(&run, 2)["output"], "done v2");
        assert_eq!(step(&run, 3)["output"], "stamped");
        let ev = case.events_of(id, "crew_upgraded");
        assert_eq!(ev.len(), 1, "{ev:#?}");
        assert_eq!(ev[0]["data"]["reason"], "upgrade policy `compatible`");
        assert_eq!(ev[0]["data"]["from"]["version"], "1");
    }
    let run = case.show(&manual);
    assert_eq!(run["crew_version"], "2", "{run:#}");
    assert_eq!(step(&run, 3)["output"], "stamped");
    assert_eq!(case.events_of(&manual, "crew_upgraded").len(), 1);
    for id in &pinned {
        let run = case.show(id);
        assert_eq!(run["status"], "succeeded", "{run:#}");
        assert_eq!(run["crew_version"], "1", "{run:#}");
        assert_eq!(run["steps"].as_array().unwrap().len(), 3);
        assert_eq!(step(&run, 2)["output"], "done v1");
        assert!(case.events_of(id, "crew_upgraded").is_empty());
    }
    // Nothing ran twice.
    for id in &all {
        let run = case.show(id);
        let steps = run["steps"].as_array().unwrap();
        assert!(steps.iter().all(|s| s["attempt"] == 1), "{run:#}");
        assert_eq!(case.events_of(id, "step_succeeded").len(), steps.len());
    }
    // A pinned run of v1 forked onto v2 through the API, from step 1.
    let onto = remote(
        &case,
        &second,
        &[
            "runs",
            "fork",
            &pinned[1],
            "--from-step",
            "1",
            "--crew-version",
            "2",
            "--json",
        ],
    );
    // Followed to its next stop: v1's review, run again on v2 (exit 4).
    let onto = onto.expect_code(4).json();
    let onto_id = onto["id"].as_str().unwrap().to_owned();
    let fork = case.show(&onto_id);
    assert_eq!(fork["crew_version"], "2", "{fork:#}");
    assert_eq!(case.events_of(&onto_id, "crew_upgraded").len(), 1);
    // Operator actions work on runs of both versions: retry (a failed run
    // of each), fork and cancel.
    let failed_v2 = remote(
        &case,
        &second,
        &["submit", "essay", "--json", boom[0], boom[1]],
    );
    let failed_v2 = failed_v2.expect_code(0).json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until(
        "the v2 boom run failed",
        std::time::Duration::from_secs(60),
        || case.show(&failed_v2)["status"] == "failed",
    );
    for (id, version) in [(&failed_v1, "1"), (&failed_v2, "2")] {
        let retried = remote(
            &case,
            &second,
            &["runs", "retry", id, "--enqueue", "--json"],
        );
        // Queued (exit 0), or already failed again (3) by the time it printed.
        assert!(matches!(retried.code(), Some(0 | 3)), "{}", retried.stderr);
        assert_eq!(retried.json()["crew_version"], version);
        wait_until("the retry ran", std::time::Duration::from_secs(60), || {
            let run = case.show(id);
            run["status"] == "failed" && step(&run, 0)["attempt"] == 2
        });
        assert_eq!(case.events_of(id, "run_retried").len(), 1);
    }
    // Continue: an interrupted run of each version carries on there.
    let interrupted_v2 = clerk_run(&second);
    for (id, version) in [(&interrupted_v1, "1"), (&interrupted_v2, "2")] {
        wait_until(
            "the clerk stopped at max_turns",
            std::time::Duration::from_secs(60),
            || case.show(id)["status"] == "interrupted",
        );
        let on = remote(&case, &second, &["runs", "continue", id, "--json"]);
        let on = on.expect_code(0).json();
        assert_eq!(on["status"], "succeeded", "{on:#}");
        assert_eq!(on["crew_version"], version, "{on:#}");
    }
    for (id, version) in [(&pinned[0], "1"), (&compatible[0], "2")] {
        let fork = remote(
            &case,
            &second,
            &["runs", "fork", id, "--from-step", "1", "--json"],
        );
        let fork = fork.expect_code(4).json();
        assert_eq!(fork["crew_version"], version, "{fork:#}");
        let fork_id = fork["id"].as_str().unwrap();
        let cancelled = remote(&case, &second, &["runs", "cancel", fork_id, "--json"]);
        assert_eq!(cancelled.expect_code(0).json()["status"], "cancelled");
    }
}

/// The console's crews page offers to move the compatible runs of older
/// versions to the newest, and its form does (by `console`, with the
/// reason typed).
fn the_consoles_crews_page_moves_runs_to_the_newest_version(kind: Kind) {
    let case = Case::new(kind);
    let dir = case.path("crews");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("essay-1.toml"), v1("")).unwrap();
    let crew = dir.join("essay-1.toml");
    let id = run_to_review(&case, crew.to_str().unwrap());
    std::fs::write(dir.join("essay-2.toml"), v2("")).unwrap();
    let served = serve(&case);
    let page = support::get_text(&served.listen, "/crews");
    let v2 = &page[page.find("essay v2").expect("v2 on the crews page")..];
    assert!(v2.contains("(1 unfinished) to v2"), "{page}");
    let csrf = v2
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the form's CSRF token")
        .to_owned();
    // v1's section links to how v2 differs and which runs can move.
    let v1 = &page[page.find("essay v1").expect("v1 on the crews page")..];
    assert!(v1.contains("/crews/essay/diff?from=1&amp;to=2"), "{page}");
    let diff = support::get_text(&served.listen, "/crews/essay/diff?from=1&to=2");
    assert!(diff.contains("Crew essay: v1 to v2"), "{diff}");
    assert!(diff.contains("<td>added</td>"), "v2's new step: {diff}");
    assert!(
        diff.contains(&id[..13]) && diff.contains("<td>yes</td>"),
        "{diff}"
    );
    // The server announces itself once it listens: under load, a moment
    // after the pages above.
    wait_until(
        "the server to offer v2",
        std::time::Duration::from_secs(10),
        || support::get_text(&served.listen, "/workers").contains("essay v2"),
    );
    // The run's page offers to fork it onto v2; the fork runs there.
    let run_page = support::get_text(&served.listen, &format!("/runs/{id}"));
    assert!(
        run_page.contains(r#"<option value="2">v2</option>"#),
        "{run_page}"
    );
    let body = format!("csrf={csrf}&from_step=1&crew_version=2&reason=try+v2");
    let (status, _) = support::post_form(&served.listen, &format!("/runs/{id}/fork"), &body);
    assert!(status.contains("303"), "{status}");
    let listed = case.cairn(&["runs", "list", "--json"]).json();
    let fork = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["parent_run_id"] == id.as_str())
        .expect("the fork");
    assert_eq!(fork["crew_version"], "2", "{fork:#}");
    let fork_id = fork["id"].as_str().unwrap();
    let ev = case.events_of(fork_id, "crew_upgraded");
    assert_eq!(ev[0]["data"]["by"], "console");
    case.cairn(&["runs", "cancel", fork_id]).expect_code(0);
    let forged = support::post_form(&served.listen, "/crews/essay/2/upgrade", "csrf=nope");
    assert!(forged.0.contains("403"), "{forged:?}");
    assert_eq!(case.show(&id)["crew_version"], "1");
    let body = format!("csrf={csrf}&reason=prompt+fix");
    let (status, answer) = support::post_form(&served.listen, "/crews/essay/2/upgrade", &body);
    assert!(status.contains("200"), "{status}: {answer}");
    assert!(answer.contains("Moved 1 of 1"), "{answer}");
    assert_eq!(case.show(&id)["crew_version"], "2");
    let ev = case.events_of(&id, "crew_upgraded");
    assert_eq!(ev[0]["data"]["by"], "console");
    assert_eq!(ev[0]["data"]["reason"], "prompt fix");
}

/// Crew `essay` version `version` of these agents.
fn essay_of(version: &str, agents: &[String]) -> String {
    format!(
        "name = \"essay\"\nversion = {}\n\n{}",
        q(version),
        agents.join("\n")
    )
}

/// `runs upgrade --crew essay --to TO --run RUN ARGS` (`--json` with `json`).
fn upgrade(case: &Case, to: &str, run: &str, args: &[&str], json: bool) -> Out {
    let mut all = vec![
        "runs", "upgrade", "--crew", "essay", "--to", to, "--run", run,
    ];
    all.extend(args);
    if json {
        all.push("--json");
    }
    case.cairn(&all)
}

/// Issue 47.6: `--force` overrides only what leaves the run readable (the
/// kind of a step it finished). A renamed started step, a new kind for the
/// step the run is inside, or a cursor past the new last step is refused,
/// forced or not (exit 2, nothing written), offering the fork that takes
/// the run onto the version instead; that fork runs.
fn a_forced_upgrade_never_leaves_a_run_no_resume_can_read(kind: Kind) {
    let case = Case::new(kind);
    let file = |name: &str, text: String| {
        let path = case.write(name, &text);
        path.to_str().unwrap().to_owned()
    };
    let c1 = file("v1.toml", v1(""));
    let renamed = file("v3.toml", v3());
    let reviewed = |role: &str| agent_template(role, "w") + "review = true\n";
    let write_rekinded = file(
        "v5.toml",
        essay_of(
            "5",
            &[
                agent_template("plan", "p"),
                agent_sh("write", "echo hi") + "review = true\n",
                agent_template("done", "d"),
            ],
        ),
    );
    let plan_rekinded = file(
        "v6.toml",
        essay_of(
            "6",
            &[
                agent_sh("plan", "echo planned"),
                reviewed("write"),
                agent_template("done", "done v6"),
            ],
        ),
    );
    let short = file(
        "v7.toml",
        essay_of("7", &[agent_template("plan", "p"), reviewed("write")]),
    );
    let (a, b, c) = (
        run_to_review(&case, &c1),
        run_to_review(&case, &c1),
        run_to_review(&case, &c1),
    );
    // Queued at step 2 (its review answered, not yet executed).
    let queued = run_to_review(&case, &c1);
    let waits = case
        .cairn(&["waits", "list", "--run", &queued, "--json"])
        .json();
    let wait = waits[0]["id"].as_str().unwrap();
    case.cairn(&["waits", "answer", wait, "--approve", "--enqueue"])
        .expect_code(0);
    assert_eq!(case.show(&queued)["cursor"], 2);

    for (run, to, idx, fork_from, forced) in [
        (&a, &renamed, 0, 0, true),
        (&b, &write_rekinded, 1, 1, true),
        (&queued, &short, 2, 2, false),
        (&queued, &short, 2, 2, true),
    ] {
        let before = case.show(run);
        let force: &[&str] = if forced { &["--force"] } else { &[] };
        let refused = upgrade(&case, to, run, force, true).expect_code(2).json();
        let v = &refused[0];
        assert_eq!(
            (v["moved"].as_bool(), v["idx"].as_u64()),
            (Some(false), Some(idx))
        );
        assert_eq!(v["fork_from"], fork_from, "{v:#}");
        let reason = v["reason"].as_str().unwrap();
        assert_eq!(
            reason.contains("--force overrides only"),
            forced,
            "{reason}"
        );
        assert_eq!(case.show(run), before, "nothing written");
        assert!(case.events_of(run, "crew_upgraded").is_empty());
    }

    // The text offers the fork; run as printed, it takes the run there.
    let text = upgrade(&case, &renamed, &a, &["--force"], false).expect_code(2);
    let offer = text
        .stdout
        .lines()
        .find_map(|l| {
            l.split_once("instead: cairn ")
                .map(|(_, cmd)| cmd.to_owned())
        })
        .unwrap_or_else(|| panic!("no fork offered: {}", text.stdout));
    assert!(
        offer.ends_with(&format!("--from-step 0 --crew {renamed}")),
        "{offer}"
    );
    let args: Vec<&str> = offer.split(' ').chain(["--json"]).collect();
    let fork = case.cairn(&args).expect_code(4).json();
    assert_eq!(fork["crew_version"], "3", "{fork:#}");

    // A finished step's new kind is overridden, recorded; the run finishes.
    let moved = upgrade(&case, &plan_rekinded, &c, &["--force"], true)
        .expect_code(0)
        .json();
    assert_eq!(moved[0]["moved"], true, "{moved:#}");
    let ev = case.events_of(&c, "crew_upgraded");
    assert_eq!(ev[0]["data"]["forced"], true);
    let overridden = ev[0]["data"]["overridden"].as_str().unwrap();
    assert!(overridden.contains("step 0 (`plan`)"), "{overridden}");
    let waits = case.cairn(&["waits", "list", "--run", &c, "--json"]).json();
    let wait = waits[0]["id"].as_str().unwrap();
    case.cairn(&["waits", "answer", wait, "--approve"])
        .expect_code(0);
    let done = case.show(&c);
    assert_eq!(done["status"], "succeeded", "{done:#}");
    assert_eq!(step(&done, 0)["output"], "plan for rivers");
    assert_eq!(step(&done, 2)["output"], "done v6");
    case.cairn(&["doctor"]).expect_code(0);
}
