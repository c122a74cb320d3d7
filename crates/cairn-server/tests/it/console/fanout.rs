//! Fan-outs and waits on the console's pages, through the router: a
//! `children` step's time runs from its spawn to its join on the run's
//! page, its timeline and the crews page alike; the runs table badges a
//! run waiting for its children apart from one waiting for a person; the
//! crews page's means leave people's waiting time out, as the run pages do.

use axum::http::StatusCode;
use serde_json::json;

use crate::support::{write_crews, Api};

/// A child that works for 300 ms.
pub(crate) const CHILD: &str = "name = \"child\"\nversion = \"1\"\n[[agents]]\nrole = \"work\"\n\
    kind = \"command\"\ncommand = [\"sh\", \"-c\", 'cat > /dev/null; sleep 0.3; echo \"{}\"']\n";

/// A fan-out over `input.items` of [`CHILD`], then a template step.
pub(crate) const FAN: &str = "name = \"fan\"\nversion = \"1\"\n[[agents]]\nrole = \"spread\"\n\
    kind = \"children\"\ncrew = \"child.toml\"\nover = \"input.items\"\n\
    [[agents]]\nrole = \"sum\"\nkind = \"template\"\ntemplate = \"done\"\n";

/// A child a person reviews, and a fan-out of it.
const NOTE: &str = "name = \"note\"\nversion = \"1\"\n[[agents]]\nrole = \"draft\"\n\
    kind = \"template\"\ntemplate = \"a note\"\nreview = true\n";
const NOTES: &str = "name = \"notes\"\nversion = \"1\"\n[[agents]]\nrole = \"gather\"\n\
    kind = \"children\"\ncrew = \"note.toml\"\nover = \"input.items\"\n";

/// A router on a fresh SQLite database offering the test crews and `more`
/// (name, text).
pub(crate) async fn api_with(more: &[(&str, &str)]) -> Api {
    let db = cairn_testkit::TestDb::of(cairn_testkit::Kind::Sqlite).await;
    let dir = tempfile::tempdir().unwrap();
    write_crews(dir.path());
    for (name, text) in more {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).unwrap();
    }
    let engine = cairn::Engine::open(&db.url).await.unwrap();
    let crews = cairn_server::Crews::load_dir(dir.path()).unwrap();
    Api {
        app: cairn_server::router(cairn_server::AppState::new(engine.clone(), crews)),
        engine,
        db,
        _crews_dir: dir,
    }
}

/// `12 ms`, `1.5 s` as milliseconds.
fn ms_of(text: &str) -> f64 {
    match text.split_once(' ') {
        Some((n, "ms")) => n.parse().unwrap_or(f64::NAN),
        Some((n, "s")) => n.parse::<f64>().map_or(f64::NAN, |s| s * 1000.0),
        _ => f64::NAN,
    }
}

/// The cells of a page's steps table, in order.
fn step_cells(page: &str) -> Vec<String> {
    let steps = &page[page.find(r#"<table class="steps">"#).unwrap()..];
    let steps = &steps[..steps.find("</table>").unwrap()];
    steps
        .split("<td>")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_children_steps_time_runs_from_spawn_to_join_on_every_page() {
    let api = api_with(&[("child", CHILD), ("fan", FAN)]).await;
    let id = api.submit("fan", json!({"items": ["a", "b"]})).await;
    api.drive(id).await;
    assert_eq!(
        api.engine.get_run(id).await.unwrap().status,
        cairn::RunStatus::Succeeded
    );
    let page = api.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    // The steps table: the children's 300 ms are the step's, not the few
    // ms of the step woken by the join.
    let cells = step_cells(&page.text);
    assert_eq!(cells[1], "spread", "{cells:?}");
    assert!(ms_of(&cells[4]) >= 300.0, "the children step: {cells:?}");
    // The timeline draws the wait for the children, with its title.
    crate::support::assert_contains(&page.text, r#"<g class="bar children">"#);
    crate::support::assert_contains(&page.text, "waiting for 2 children");
    let svg = &page.text[page.text.find("<svg").unwrap()..page.text.find("</svg>").unwrap()];
    assert_eq!(
        svg.matches(r#"class="bar child succeeded""#).count(),
        2,
        "{svg}"
    );
    // The crews page's mean, by the same rule.
    let crews = api.get("/crews").await;
    let at = crews
        .text
        .find("spread (children)")
        .expect("the fan's chart");
    let figures = &crews.text[at..];
    let figures = &figures[figures.find(r#"class="figures""#).unwrap()..];
    let mean = figures[figures.find('>').unwrap() + 1..]
        .split(" ms")
        .next()
        .unwrap_or_default();
    assert!(
        mean.parse::<f64>().unwrap_or(0.0) >= 300.0,
        "the mean of the children step: {mean}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_table_badges_a_run_waiting_for_its_children() {
    let api = api_with(&[("note", NOTE), ("notes", NOTES)]).await;
    let parent = api.submit("notes", json!({"items": ["x"]})).await;
    api.drive(parent).await;
    let alone = api.submit("review", json!({"topic": "t"})).await;
    api.drive(alone).await;
    let page = api.get("/").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let row = |id: cairn::RunId| {
        let at = page.text.find(&id.to_string()[..13]).unwrap();
        let start = page.text[..at].rfind("<tr>").unwrap();
        page.text[start..at].to_owned()
    };
    let waiting_on_children = row(parent);
    assert!(
        waiting_on_children.contains(r#"<span class="badge children-person">waiting for 1 child: 1 waiting for a person</span>"#),
        "{waiting_on_children}"
    );
    // Its page says where its children's waits are answered.
    let child = api.engine.show(parent).await.unwrap().children[0].run_id;
    let own = api.get(&format!("/runs/{parent}")).await;
    let pointer = &own.text[own.text.find(r#"<p class="children-waits">"#).unwrap()..];
    assert!(
        pointer.contains(&format!(r#"<a href="/runs/{child}">key 0</a>"#)),
        "{pointer}"
    );
    // A run waiting for a person itself has the status only.
    let waiting = row(alone);
    assert!(
        waiting.contains(r#"class="badge waiting""#) && !waiting.contains("children-"),
        "{waiting}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crews_pages_means_leave_peoples_waiting_out() {
    let api = api_with(&[]).await;
    let id = api.submit("review", json!({"topic": "cairns"})).await;
    api.drive(id).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    api.approve_first_wait("ann").await;
    api.drive(id).await;
    let crews = api.get("/crews").await;
    let review = &crews.text[crews.text.find("review v1").expect("the review crew")..];
    let figures = &review[review.find("writer (template)").expect("the writer")..];
    let figures = &figures[figures.find(r#"class="figures""#).unwrap()..];
    let mean = figures[figures.find('>').unwrap() + 1..]
        .split(" ms")
        .next()
        .unwrap_or_default()
        .parse::<f64>()
        .unwrap_or(f64::NAN);
    assert!(
        mean < 1000.0,
        "the writer's mean holds the 1.1 s wait: {mean}"
    );
    // As its run's page says of it.
    let page = api.get(&format!("/runs/{id}")).await;
    let cells = step_cells(&page.text);
    assert!(ms_of(&cells[4]) < 1000.0, "{cells:?}");
    assert!(ms_of(&cells[5]) >= 1100.0, "{cells:?}");
}
