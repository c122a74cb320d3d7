//! A server's crews directory: a step may start children of an offered
//! crew by its name (`crew = "greet"`), resolved against the crews of the
//! same directory whatever the order of their files; a name nothing offers
//! stops the startup naming the file and the name.

use cairn::{Engine, SubmitOptions};
use cairn_server::{Crews, Error};
use cairn_testkit::{Kind, TestDb};
use serde_json::json;

use crate::support::{agent, crew, greet, template};

/// `afan.toml` sorts before `greet.toml`: its name resolves on a later pass.
fn fan() -> String {
    let children = "crew = \"greet\"\nchildren = [{ key = \"a\", input = { name = \"Ann\" } }, \
                    { key = \"b\", input = { name = \"Bo\" } }]\n";
    let join = "{% for c in outputs.hellos %}{{ c.output }}; {% endfor %}";
    crew(
        "fan",
        &[
            agent("hellos", "children", children),
            template("join", join, ""),
        ],
    )
}

#[tokio::test]
async fn a_children_step_starts_an_offered_crew_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("afan.toml"), fan()).unwrap();
    std::fs::write(dir.path().join("greet.toml"), greet()).unwrap();
    let crews = Crews::load_dir(dir.path()).unwrap();
    let fan = crews.get("fan").expect("fan loaded");
    let db = TestDb::of(Kind::Sqlite).await;
    let engine = Engine::open(&db.url).await.unwrap();
    let driven = engine
        .run(fan, json!({}), SubmitOptions::default())
        .await
        .unwrap();
    assert_eq!(driven.run.status.as_str(), "succeeded");
    let view = engine.show(driven.run.id).await.unwrap();
    assert_eq!(
        view.steps[1].output,
        Some(json!("Hello Ann; Hello Bo; ")),
        "{view:?}"
    );
    let keys: Vec<_> = view.children.iter().map(|c| c.key.clone()).collect();
    assert_eq!(keys, ["a", "b"]);
}

#[tokio::test]
async fn a_name_nothing_offers_stops_the_startup_naming_file_and_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("afan.toml"), fan()).unwrap();
    let err = Crews::load_dir(dir.path()).unwrap_err();
    let Error::CrewFile { path, source } = &err else {
        panic!("not a crew file error: {err:?}");
    };
    assert!(path.ends_with("afan.toml"), "{path:?}");
    let text = source.to_string();
    assert!(
        text.contains("`greet`") && text.contains("not a crew offered here"),
        "{text}"
    );
}

/// A price table put in the crews directory stops the startup saying it
/// is no crew and where a price table goes (it used to say only that a
/// field `openai` is unknown).
#[test]
fn a_price_table_in_the_crews_directory_says_where_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("greet.toml"), greet()).unwrap();
    let prices = "[openai.\"gpt-4o\"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n";
    std::fs::write(dir.path().join("prices.toml"), prices).unwrap();
    match Crews::load_dir(dir.path()) {
        Err(e @ Error::NotACrew { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("prices.toml") && text.contains("CAIRN_PRICES"),
                "{text}"
            );
        }
        Err(other) => panic!("expected not_a_crew, got {other}"),
        Ok(_) => panic!("a price table loaded as a crew"),
    }
}
