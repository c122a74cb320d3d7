//! `/v1/runs`: submit (201, idempotent 200, conflicts), every body error,
//! the body limit, show, and the list's filters and pagination.

use axum::http::{header, Method, StatusCode};
use cairn::RunId;
use cairn_testkit::Kind;
use serde_json::{json, Value};

use crate::support::Api;

#[tokio::test]
async fn submit_queues_a_run_and_returns_the_run_object() {
    let api = Api::sqlite().await;
    let reply = api
        .post_json(
            "/v1/runs",
            &json!({"crew": "greet", "input": {"name": "Ada"}, "thread_id": "t-1"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let run = reply.json();
    let id = run["id"].as_str().unwrap();
    assert_eq!(
        reply.headers[header::LOCATION].to_str().unwrap(),
        format!("/v1/runs/{id}")
    );
    assert_eq!(run["status"], "queued");
    assert_eq!(run["crew"], "greet");
    assert_eq!(run["input"], json!({"name": "Ada"}));
    assert_eq!(run["thread_id"], "t-1");
    assert_eq!(run["steps"], json!([]));

    // GET returns the same document, which is `engine.show` (= `runs show --json`).
    let shown = api.get(&format!("/v1/runs/{id}")).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.json(), run);
    let view = api.engine.show(id.parse().unwrap()).await.unwrap();
    assert_eq!(serde_json::to_value(&view).unwrap(), run);

    // After execution the run object carries its steps.
    api.drive(id.parse().unwrap()).await;
    let done = api.get(&format!("/v1/runs/{id}")).await.json();
    assert_eq!(done["status"], "succeeded");
    assert_eq!(done["steps"][0]["output"], "Hello Ada");
}

#[tokio::test]
async fn a_repeated_idempotency_key_returns_the_same_run_with_200() {
    let api = Api::sqlite().await;
    let body = json!({"crew": "greet", "input": {"name": "x"}, "idempotency_key": "k-1"});
    let first = api.post_json("/v1/runs", &body).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let second = api.post_json("/v1/runs", &body).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(first.json()["id"], second.json()["id"]);
    assert!(second.headers.get(header::LOCATION).is_none());

    // Still 200 with the same id once the run has finished.
    api.drive(first.json()["id"].as_str().unwrap().parse().unwrap())
        .await;
    let third = api.post_json("/v1/runs", &body).await;
    assert_eq!(third.status, StatusCode::OK);
    assert_eq!(third.json()["id"], first.json()["id"]);
    assert_eq!(third.json()["status"], "succeeded");

    // The same key for another input or crew is a conflict.
    let other_input = json!({"crew": "greet", "input": {"name": "y"}, "idempotency_key": "k-1"});
    api.post_json("/v1/runs", &other_input)
        .await
        .assert_error(StatusCode::CONFLICT, "idempotency_conflict");
    let other_crew = json!({"crew": "pipeline", "input": {"name": "x"}, "idempotency_key": "k-1"});
    api.post_json("/v1/runs", &other_crew)
        .await
        .assert_error(StatusCode::CONFLICT, "idempotency_conflict");
    assert_eq!(api.runs().await.len(), 1);
}

#[tokio::test]
async fn body_mistakes_are_4xx_with_json_errors_and_write_nothing() {
    let api = Api::sqlite().await;
    let post = |body: &'static str, headers: &'static [(&'static str, &'static str)]| {
        let api = &api;
        async move {
            api.call(
                Method::POST,
                "/v1/runs",
                headers,
                Some(body.as_bytes().to_vec()),
            )
            .await
        }
    };
    const JSON: &[(&str, &str)] = &[("content-type", "application/json")];
    const TEXT: &[(&str, &str)] = &[("content-type", "text/plain")];
    let (bad, unsupported, unknown) = (
        StatusCode::BAD_REQUEST,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        StatusCode::NOT_FOUND,
    );
    // (body, headers, status, code, what the message names, if checked)
    #[rustfmt::skip]
    let cases = [
        ("{\"crew\": ", JSON, bad, "bad_json", None),
        ("not json", JSON, bad, "bad_json", None),
        ("", JSON, bad, "bad_json", None),
        ("{\"input\": {}}", JSON, bad, "invalid_body", Some("crew")),
        ("{\"crew\": \"greet\"}", JSON, bad, "invalid_body", Some("input")),
        ("{\"crew\": 7, \"input\": {}}", JSON, bad, "invalid_body", None),
        ("{\"crew\": \"greet\", \"input\": {}, \"idempotency_key\": 5}", JSON, bad, "invalid_body", None),
        ("{\"crew\": \"greet\", \"input\": {}, \"idempotencykey\": \"k\"}", JSON, bad, "invalid_body", Some("idempotencykey")),
        ("[1, 2]", JSON, bad, "invalid_body", None),
        ("{\"crew\": \"greet\", \"input\": {}}", &[], unsupported, "unsupported_media_type", None),
        ("{\"crew\": \"greet\", \"input\": {}}", TEXT, unsupported, "unsupported_media_type", None),
        ("{\"crew\": \"nope\", \"input\": {}}", JSON, unknown, "unknown_crew", Some("nope")),
    ];
    for (body, headers, status, code, names) in cases {
        let m = post(body, headers).await.assert_error(status, code);
        if let Some(word) = names {
            assert!(m.contains(word), "{m}");
        }
    }

    assert!(api.runs().await.is_empty());
    // A JSON content type with parameters is fine.
    let ok = post(
        "{\"crew\": \"greet\", \"input\": null}",
        &[("content-type", "application/json; charset=utf-8")],
    )
    .await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    // The default limit is 1 MiB.
    let api = Api::sqlite().await;
    let big = json!({"crew": "greet", "input": {"blob": "x".repeat(1024 * 1024)}});
    api.post_json("/v1/runs", &big)
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let fits = json!({"crew": "greet", "input": {"blob": "x".repeat(1000 * 1000)}});
    assert_eq!(
        api.post_json("/v1/runs", &fits).await.status,
        StatusCode::CREATED
    );

    // A configured limit, with and without a Content-Length header.
    let api = Api::with(Kind::Sqlite, |s| s.with_body_limit(64)).await;
    let body = json!({"crew": "greet", "input": {"name": "y".repeat(100)}}).to_string();
    let len = body.len().to_string();
    api.call(
        Method::POST,
        "/v1/runs",
        &[
            ("content-type", "application/json"),
            ("content-length", &len),
        ],
        Some(body.clone().into_bytes()),
    )
    .await
    .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    api.post_raw("/v1/runs", "application/json", body.into_bytes())
        .await
        .assert_error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let small = json!({"crew": "greet", "input": 1});
    assert_eq!(
        api.post_json("/v1/runs", &small).await.status,
        StatusCode::CREATED
    );
    assert_eq!(api.runs().await.len(), 1);
}

#[tokio::test]
async fn show_refuses_malformed_and_unknown_ids() {
    let api = Api::sqlite().await;
    let m = api
        .get("/v1/runs/not-a-uuid")
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_run_id");
    assert!(m.contains("not-a-uuid"));
    let id = RunId::new();
    let m = api
        .get(&format!("/v1/runs/{id}"))
        .await
        .assert_error(StatusCode::NOT_FOUND, "run_not_found");
    assert!(m.contains(&id.to_string()));
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_pages_oldest_first_with_an_opaque_cursor() {
    let api = Api::sqlite().await;
    let mut all = vec![];
    for i in 0..5 {
        all.push(api.submit("greet", json!({"i": i})).await.to_string());
    }
    let page = api.get("/v1/runs").await.json();
    assert_eq!(ids(&page), all);
    assert_eq!(page["next_cursor"], Value::Null);
    assert!(
        page["runs"][0].get("steps").is_none(),
        "list items carry no steps"
    );

    let mut seen = vec![];
    let mut uri = "/v1/runs?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let reply = api.get(&uri).await;
        let page = reply.ok_json();
        let got = ids(&page);
        assert!(got.len() <= 2);
        seen.extend(got);
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/v1/runs?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, all);
    assert_eq!(pages, 3);

    // An exact fit ends with a null cursor, not an empty extra page.
    let page = api.get("/v1/runs?limit=5").await.json();
    assert_eq!(ids(&page).len(), 5);
    assert_eq!(page["next_cursor"], Value::Null);

    // `order=newest`: the same runs newest first, its pages going on
    // towards older runs.
    let mut newest = vec![];
    let mut uri = "/v1/runs?limit=2&order=newest".to_owned();
    loop {
        let page = api.get(&uri).await.json();
        newest.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => uri = format!("/v1/runs?limit=2&order=newest&cursor={cursor}"),
            None => break,
        }
    }
    let reversed: Vec<String> = all.iter().rev().cloned().collect();
    assert_eq!(newest, reversed);
    let bad = api.get("/v1/runs?order=sideways").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    assert!(bad.text.contains("order"), "{}", bad.text);
}

#[tokio::test]
async fn list_filters_by_status_and_crew_and_survives_status_changes_between_pages() {
    let api = Api::sqlite().await;
    let a = api.submit("greet", json!({"name": "a"})).await;
    let b = api.submit("pipeline", json!({"name": "b"})).await;
    let c = api.submit("greet", json!({"name": "c"})).await;
    let d = api.submit("greet", json!({"name": "d"})).await;
    let e = api.submit("broken", json!({})).await;
    api.drive(b).await;
    api.drive(e).await;

    let ids_of = |uri: String| {
        let api = &api;
        async move {
            let reply = api.get(&uri).await;
            assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
            ids(&reply.json())
        }
    };
    let s = |id: cairn::RunId| id.to_string();
    assert_eq!(
        ids_of("/v1/runs?status=queued".into()).await,
        [s(a), s(c), s(d)]
    );
    assert_eq!(ids_of("/v1/runs?status=succeeded".into()).await, [s(b)]);
    assert_eq!(ids_of("/v1/runs?status=failed".into()).await, [s(e)]);
    assert!(ids_of("/v1/runs?status=cancelled".into()).await.is_empty());
    assert_eq!(
        ids_of("/v1/runs?crew=greet".into()).await,
        [s(a), s(c), s(d)]
    );
    assert_eq!(
        ids_of("/v1/runs?crew=pipeline&status=succeeded".into()).await,
        [s(b)]
    );
    assert!(ids_of("/v1/runs?crew=nobody".into()).await.is_empty());
    assert_eq!(
        ids_of("/v1/runs?status=&crew=&limit=&cursor=".into()).await,
        [s(a), s(b), s(c), s(d), s(e)]
    );

    // The cursor run leaves the filter between pages: the next page still
    // starts right after it.
    let first = api.get("/v1/runs?status=queued&limit=1").await.json();
    assert_eq!(ids(&first), [s(a)]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    api.drive(a).await;
    let next = api
        .get(&format!("/v1/runs?status=queued&limit=1&cursor={cursor}"))
        .await
        .json();
    assert_eq!(ids(&next), [s(c)]);
}

#[tokio::test]
async fn list_refuses_bad_query_parameters() {
    let api = Api::sqlite().await;
    api.submit("greet", json!({})).await;
    for (uri, code) in [
        ("/v1/runs?status=done", "bad_query"),
        ("/v1/runs?limit=0", "bad_query"),
        ("/v1/runs?limit=-1", "bad_query"),
        ("/v1/runs?limit=ten", "bad_query"),
        ("/v1/runs?limit=1001", "bad_query"),
        ("/v1/runs?stauts=queued", "bad_query"),
        ("/v1/runs?cursor=garbage", "bad_cursor"),
    ] {
        let m = api
            .get(uri)
            .await
            .assert_error(StatusCode::BAD_REQUEST, code);
        assert!(!m.is_empty(), "{uri}");
    }
    let m = api
        .get("/v1/runs?status=done")
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_query");
    assert!(m.contains("status") && m.contains("queued"), "{m}");
    let unknown = RunId::new();
    api.get_error(
        &format!("/v1/runs?cursor={unknown}"),
        StatusCode::BAD_REQUEST,
        "bad_cursor",
    )
    .await;
}

/// `GET /v1/runs/{id}/journal`: an `llm` step's transcript as journaled,
/// the same items `cairn runs journal --json` prints.
#[tokio::test]
async fn the_journal_of_an_agent_step() {
    let api = Api::sqlite().await;
    let id = api.submit("agent", json!({"word": "hi"})).await;
    api.drive(id).await;
    let reply = api.get(&format!("/v1/runs/{id}/journal")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let items = reply.json()["items"].as_array().unwrap().clone();
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "assistant_text",
            "tool_call_started",
            "tool_call",
            "turn_end",
            "tool_result",
            "assistant_text",
            "turn_end"
        ]
    );
    assert_eq!(items[4]["payload"]["content"], "{\"word\":\"hi\"}");
    assert_eq!(items[4]["idx"], 0);
    assert_eq!(items[4]["seq"], 5);
    let view = api.engine.journal(id, None).await.unwrap();
    assert_eq!(serde_json::to_value(&view).unwrap(), json!(items));
    // One step, a step with no journal, bad input, unknown runs.
    assert_eq!(
        api.get(&format!("/v1/runs/{id}/journal?step=0"))
            .await
            .json()["items"],
        json!(items)
    );
    assert_eq!(
        api.get(&format!("/v1/runs/{id}/journal?step=7"))
            .await
            .json()["items"],
        json!([])
    );
    api.get_error(
        &format!("/v1/runs/{id}/journal?step=x"),
        StatusCode::BAD_REQUEST,
        "bad_query",
    )
    .await;
    api.get_error(
        &format!("/v1/runs/{}/journal", RunId::new()),
        StatusCode::NOT_FOUND,
        "run_not_found",
    )
    .await;
    api.get_error(
        "/v1/runs/nope/journal",
        StatusCode::BAD_REQUEST,
        "bad_run_id",
    )
    .await;
}
