//! A Rust agent publishes values for its run's callers: the newest of each
//! key is read back, and a bad key publishes nothing.

use cairn::{async_trait, Agent, Crew, StepContext, StepOutput, Stop, SubmitOptions};
use cairn_testkit::{both, Kind};
use serde_json::json;

both!(a_rust_agent_publishes_values_its_callers_read);

/// Publishes `draft` twice and `final` once; a key of 300 bytes is refused.
struct Publisher;

#[async_trait]
impl Agent for Publisher {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let fail = |e: cairn::PublishError| {
            Stop::from(cairn::ErrorInfo::new(
                cairn::ErrorKind::Agent,
                e.to_string(),
                false,
            ))
        };
        cx.publish("draft", json!(1)).await.map_err(fail)?;
        cx.publish("draft", json!({"v": 2})).await.map_err(fail)?;
        cx.publish("final", json!("done")).await.map_err(fail)?;
        let refused = cx.publish(&"k".repeat(300), json!(0)).await;
        Ok(StepOutput::new(json!({"refused": refused.is_err()})))
    }
}

async fn a_rust_agent_publishes_values_its_callers_read(kind: Kind) {
    let (_db, engine) = super::opened(kind).await;
    let crew = Crew::builder("publish", "1")
        .agent_named("writer", "publisher", Publisher)
        .build()
        .unwrap();
    let done = engine
        .run(&crew, json!({}), SubmitOptions::default())
        .await
        .unwrap();
    let shown = engine.show(done.run.id).await.unwrap();
    assert_eq!(shown.steps[0].output, Some(json!({"refused": true})));
    let values = engine.published(done.run.id).await.unwrap();
    let pairs: Vec<(&str, &serde_json::Value)> =
        values.iter().map(|p| (p.key.as_str(), &p.value)).collect();
    assert_eq!(
        pairs,
        [("draft", &json!({"v": 2})), ("final", &json!("done"))]
    );
    let one = engine.published_value(done.run.id, "final").await.unwrap();
    assert_eq!(one.map(|p| p.idx.get()), Some(0));
    assert_eq!(
        engine.published_value(done.run.id, "none").await.unwrap(),
        None
    );
}
