//! `/v1/threads`: the thread documents (the same as `cairn threads list`
//! and `show --json`), odd ids in the path, the thread id rule on submit
//! and fork (400 before anything is stored), and a fork's thread. SQLite
//! and PostgreSQL (which cannot store a NUL character).

use axum::http::StatusCode;
use cairn::RunFilter;
use cairn_testkit::Kind;
use serde_json::{json, Value};

use crate::support::Api;

/// `text` as one percent-encoded path segment.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// [`submit_in`], driven to its end: the run's id.
async fn driven_in(api: &Api, thread: &str, name: &str) -> String {
    let id = submit_in(api, thread, name).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    api.drive(id.parse().unwrap()).await;
    id
}

async fn submit_in(api: &Api, thread: &str, name: &str) -> Value {
    let body = json!({"crew": "greet", "input": {"name": name}, "thread_id": thread});
    let reply = api.post_json("/v1/runs", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    reply.json()
}

#[tokio::test]
async fn threads_are_listed_and_shown_as_the_engine_sees_them() {
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let api = Api::with(kind, |s| s).await;
        assert_eq!(api.get("/v1/threads").await.json(), json!([]));
        let odd = "user/42 chat?#%20 é";
        let first = submit_in(&api, odd, "Ada").await;
        submit_in(&api, "other", "Bob").await;
        let third = submit_in(&api, odd, "Cy").await;
        api.drive(first["id"].as_str().unwrap().parse().unwrap())
            .await;

        let listed = api.get("/v1/threads").await;
        let listed = listed.ok_json();
        assert_eq!(
            listed,
            serde_json::to_value(api.engine.threads().await.unwrap()).unwrap()
        );
        let names = crate::support::strs(&listed, "thread_id");
        assert_eq!(names, ["other", odd]);
        assert_eq!(listed[1]["runs"], 2);
        for key in ["input_tokens", "output_tokens", "last_run_at"] {
            assert!(listed[1].get(key).is_some(), "{key}: {listed}");
        }

        // Pages: `limit` and the `Link` header's next page, to the end.
        let first_page = api.get("/v1/threads?limit=1").await;
        assert_eq!(first_page.json(), json!([listed[0]]));
        let link = first_page.headers["link"].to_str().unwrap().to_owned();
        assert_eq!(link, "</v1/threads?limit=1&cursor=other>; rel=\"next\"");
        let last_page = api.get("/v1/threads?limit=1&cursor=other").await;
        assert_eq!(last_page.json(), json!([listed[1]]));
        assert!(last_page.headers.get("link").is_none(), "the last page");
        for bad in ["limit=0", "limit=x", "limit=1&cursor=nobody", "order=x"] {
            let reply = api.get(&format!("/v1/threads?{bad}")).await;
            assert_eq!(
                reply.status,
                StatusCode::BAD_REQUEST,
                "{bad}: {}",
                reply.text
            );
        }

        let shown = api.get(&format!("/v1/threads/{}", segment(odd))).await;
        let shown = shown.ok_json();
        assert_eq!(
            shown,
            serde_json::to_value(api.engine.thread(odd).await.unwrap()).unwrap()
        );
        assert_eq!(shown["thread_id"], odd);
        assert_eq!(
            shown["totals"],
            json!({"runs": 2, "input_tokens": 0, "output_tokens": 0})
        );
        // The runs are the documents `GET /v1/runs` lists.
        let page = api.get("/v1/runs").await.json();
        let in_thread: Vec<&Value> = page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["thread_id"] == odd)
            .collect();
        assert_eq!(shown["runs"].as_array().unwrap().len(), 2);
        assert_eq!(&shown["runs"][0], in_thread[0]);
        assert_eq!(&shown["runs"][1], in_thread[1]);
        assert_eq!(shown["runs"][1]["id"], third["id"]);
    }
}

#[tokio::test]
async fn an_unknown_or_malformed_thread_is_404_or_400() {
    let api = Api::sqlite().await;
    submit_in(&api, "known", "Ada").await;
    api.get_error(
        "/v1/threads/unknown",
        StatusCode::NOT_FOUND,
        "thread_not_found",
    )
    .await;
    let long = "x".repeat(257);
    let msg = api
        .get(&format!("/v1/threads/{long}"))
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_thread_id");
    assert!(
        msg.contains("thread_id") && msg.contains("257 bytes"),
        "{msg}"
    );
    api.get_error(
        "/v1/threads/a%00b",
        StatusCode::BAD_REQUEST,
        "bad_thread_id",
    )
    .await;
    api.get_error("/v1/threads/%FF", StatusCode::BAD_REQUEST, "bad_thread_id")
        .await;
}

#[tokio::test]
async fn a_bad_thread_id_is_400_and_stores_nothing() {
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let api = Api::with(kind, |s| s).await;
        let source = driven_in(&api, "t", "Ada").await;
        for (bad, problem) in [
            (json!(""), "is empty"),
            (json!("x".repeat(257)), "257 bytes"),
            (json!("a\u{0}b"), "NUL"),
        ] {
            let body = json!({"crew": "greet", "input": {}, "thread_id": bad});
            let msg = api
                .post_json("/v1/runs", &body)
                .await
                .assert_error(StatusCode::BAD_REQUEST, "bad_thread_id");
            assert!(msg.contains("thread_id") && msg.contains(problem), "{msg}");
            let fork = json!({"from_step": 0, "thread_id": bad});
            api.post_json(&format!("/v1/runs/{source}/fork"), &fork)
                .await
                .assert_error(StatusCode::BAD_REQUEST, "bad_thread_id");
        }
        let runs = api.engine.list(&RunFilter::default()).await.unwrap();
        assert_eq!(runs.len(), 1, "{kind:?}");
    }
}

#[tokio::test]
async fn a_fork_keeps_its_thread_unless_the_body_names_another() {
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let api = Api::with(kind, |s| s).await;
        let source = driven_in(&api, "t", "Ada").await;
        let uri = format!("/v1/runs/{source}/fork");
        let kept = api.post_json(&uri, &json!({"from_step": 1})).await;
        assert_eq!(kept.status, StatusCode::CREATED, "{}", kept.text);
        assert_eq!(kept.json()["thread_id"], "t");
        let moved = api
            .post_json(&uri, &json!({"from_step": 1, "thread_id": "u"}))
            .await;
        assert_eq!(moved.status, StatusCode::CREATED, "{}", moved.text);
        assert_eq!(moved.json()["thread_id"], "u");
        let null = api
            .post_json(&uri, &json!({"from_step": 1, "thread_id": null}))
            .await;
        assert_eq!(null.json()["thread_id"], "t");
        let shown = api.get("/v1/threads/t").await.json();
        assert_eq!(shown["totals"]["runs"], 3);
    }
}
