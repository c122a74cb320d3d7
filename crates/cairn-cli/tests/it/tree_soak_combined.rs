//! The combined tree campaign (issue 47, docs/reliability.md): `cairn
//! serve` with its embedded runner plus three `cairn worker` processes run
//! parents that fan out to children, each child one model call on a
//! provider key an operator limited to 2 calls in flight (`cairn limits set
//! KEY --in-flight 2`), each tree under a budget of tokens (`cairn submit
//! --budget tokens=N`); the workers are SIGKILLed at seeded random moments
//! and restarted. The budget is small on purpose: a tree's calls go one at
//! a time and every tree of four children stops at it (its last child
//! `interrupted`, `budget_exceeded`), sooner when calls lost with their
//! worker count against it at their estimates; an operator raises and
//! continues each stopped tree through the server (`cairn runs continue
//! PARENT --budget tokens=+N --server URL`) while the kills go on.
//!
//! Checks, besides the children campaigns' lost and repeated (here a
//! child's "runs" are its calls sent, `model_call_sent`): the model server
//! never streamed more than 2 answers at once; every request it served was
//! recorded sent before it left (none free); each tree's spending, when it
//! stopped and at the end, is within its budget plus one call's estimate.
//! Sizes as in `tree_soak.rs` (`CAIRN_SOAK_*`).

use std::time::{Duration, Instant};

use cairn_testkit::SlowModel;
use serde_json::{json, Value};

use crate::support::{agent_template, crew_toml, fan_join_crew, q, serve, Case, Kind};
use crate::tree_soak::{word, Campaign, Size};

both_backends!(a_limited_budgeted_tree_campaign_under_kills_keeps_its_bounds);

/// What each call may answer, and so holds against its tree besides its
/// input while it runs.
const MAX_TOKENS: u64 = 200;
/// Each tree's budget, in tokens. A call's hold (its input, about 20, plus
/// `MAX_TOKENS`) leaves no room beside another's, so a tree's calls go one
/// at a time; a served call spends 15 (12 in, 3 out), and a call is refused
/// once the spent and its input pass the budget: the fourth child of an
/// unkilled tree is stopped `interrupted`, and a call lost to a kill
/// (counted at its estimate of about 220) stops its tree sooner.
const BUDGET: u64 = 50;
/// What an operator adds to a stopped tree's budget before continuing it.
const RAISE: u64 = 1000;
/// The key's in-flight limit.
const IN_FLIGHT: usize = 2;

/// The child crew `write` (a model call, then a template naming its item)
/// and the parent: a `children` step over `input.items` (concurrency 2,
/// `all_ok`) and a template joining the outputs.
fn crews(case: &Case, model: &SlowModel) -> String {
    let writer = format!(
        "[[agents]]\nrole = \"writer\"\nkind = \"llm\"\nprovider = \"openai\"\nmodel = \"slow-1\"\n\
         base_url = {}\nmax_tokens = {MAX_TOKENS}\n",
        q(&model.base_url)
    );
    let name = agent_template("name", "{{ input.item }}: {{ outputs.writer }}");
    case.write("child.toml", &crew_toml("write", &[writer, name]));
    let crew = fan_join_crew(
        case,
        "concurrency = 2\njoin = \"all_ok\"\n",
        "{% for c in outputs.fan %}{{ c.output }}|{% endfor %}",
    );
    crew.display().to_string()
}

/// A sent call's estimate (input plus `max_tokens`).
fn estimate(sent: &Value) -> u64 {
    sent["data"]["estimate_input"].as_u64().unwrap_or(0)
        + sent["data"]["estimate_output"].as_u64().unwrap_or(0)
}

/// The estimates of every call the children of `parent` sent.
fn sent_in_tree(c: &Campaign, parent: &str) -> Vec<u64> {
    c.list(Some(parent))
        .iter()
        .filter_map(|ch| ch["id"].as_str())
        .flat_map(|id| c.events_of(id, "model_call_sent"))
        .map(|e| estimate(&e))
        .collect()
}

/// What the combined campaign counted besides the tally.
#[derive(Debug, Default)]
struct Books {
    /// The server's URL, for the operator's commands.
    server: String,
    budget_stops: u64,
    over_budget: Vec<String>,
    largest_estimate: u64,
}

/// Checks a tree's spending against its budget plus one call's estimate
/// (`when` names the moment, for the message).
fn within_budget(c: &Campaign, books: &mut Books, parent: &str, when: &str) {
    let run = c.show(parent);
    let budget = run["budget"]["tokens"].as_u64().unwrap_or(0);
    let spent = run["spent"]["tokens"].as_u64().unwrap_or(u64::MAX);
    let one = sent_in_tree(c, parent).into_iter().max().unwrap_or(0);
    books.largest_estimate = books.largest_estimate.max(one);
    if spent > budget + one {
        books.over_budget.push(format!(
            "tree {parent} {when}: spent {spent} tokens of {budget} (one call: {one})"
        ));
    }
}

/// The operator: a parent some of whose children stopped at the tree's
/// budget is checked, then raised and continued through the
/// server (whose runner and the workers carry the children on).
fn raise_stopped(c: &mut Campaign, books: &mut Books, parent: &str) {
    if c.show(parent)["status"] != "waiting" {
        return;
    }
    // Not only once every child stopped: a child beyond the step's
    // concurrency is held until a sibling ends, and a stopped one has not.
    let children = c.list(Some(parent));
    if !children.iter().any(|ch| ch["status"] == "interrupted") {
        return;
    }
    within_budget(c, books, parent, "when it stopped");
    books.budget_stops += 1;
    let raise = format!("tokens=+{RAISE}");
    let args = [
        "runs",
        "continue",
        parent,
        "--budget",
        &raise,
        "--by",
        "soak",
        "--server",
        &books.server,
    ];
    c.case.raw(&args, &[]).expect_code(0);
}

fn a_limited_budgeted_tree_campaign_under_kills_keeps_its_bounds(kind: Kind) {
    let _load = crate::support::loads_the_machine();
    let size = Size::from_env();
    let model = SlowModel::start(&["one ", "two ", "three"], Duration::from_millis(80))
        .expect("the model server");
    model.release();
    let case = Case::new(kind);
    let crew = crews(&case, &model);
    let key = format!("provider=openai,url={},key=OPENAI_API_KEY", model.base_url);
    let limit = IN_FLIGHT.to_string();
    case.cairn(&["limits", "set", &key, "--in-flight", &limit])
        .expect_code(0);
    let args = ["--concurrency", "2", "--foreign-runs"];
    let served = serve(&case, &args, &[("CAIRN_LOG", "warn")]);
    let listed = case
        .raw(&["--json", "limits", "list", "--server", &served.url], &[])
        .expect_code(0)
        .json();
    assert_eq!(
        listed[0]["limits"],
        json!({ "in_flight": IN_FLIGHT }),
        "{listed}"
    );
    let items: Vec<String> = (0..size.children).map(word).collect();
    let expected: String = items
        .iter()
        .map(|i| format!("{i}: one two three|"))
        .collect();
    let input = json!({ "items": items }).to_string();
    let budget = format!("tokens={BUDGET}");
    let submit = ["submit", &crew, "--input", &input, "--budget", &budget]
        .map(str::to_owned)
        .to_vec();
    let mut c = Campaign::new(case, size, submit, "");
    c.runs_are_calls = true;
    c.top_up();
    c.start_workers(3);
    let started = Instant::now();
    let mut books = Books {
        server: served.url.clone(),
        ..Books::default()
    };
    while c.tally.kills < size.kills {
        c.kill_round(1500);
        for parent in c.parents.clone() {
            raise_stopped(&mut c, &mut books, &parent);
        }
    }
    c.drain(|c, parent| raise_stopped(c, &mut books, parent));
    let mut sent = 0;
    for parent in c.parents.clone() {
        let Some(run) = c.finished_parent(&parent) else {
            continue;
        };
        c.check_join(&parent, &run, &expected);
        c.check_children(&parent, size.children);
        within_budget(&c, &mut books, &parent, "at the end");
        sent += sent_in_tree(&c, &parent).len();
    }
    let (requests, peak) = (model.requests(), model.peak());
    let more = format!(
        ", {requests} model requests ({sent} recorded sent), at most {peak} in flight \
         (limit {IN_FLIGHT}), {} stops at a tree's budget (each raised and continued), \
         {} over budget (one call's estimate: {} tokens)",
        books.budget_stops,
        books.over_budget.len(),
        books.largest_estimate
    );
    drop(served);
    c.report("combined", kind, size, &more, started);
    assert!(
        requests <= sent,
        "{requests} requests served, only {sent} recorded sent: a call went free"
    );
    assert!(
        (1..=IN_FLIGHT).contains(&peak),
        "{peak} calls in flight at once at the provider, over the key's limit of {IN_FLIGHT}"
    );
    assert!(books.over_budget.is_empty(), "{:#?}", books.over_budget);
}
