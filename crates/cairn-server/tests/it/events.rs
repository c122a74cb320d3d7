//! `GET /v1/runs/{id}/events`: ids are the per-run `seq`, `Last-Event-ID`
//! resumes after it, and the stream ends once the run has ended.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use cairn::RunId;
use serde_json::{json, Value};

use crate::support::{Api, Reply};

/// One SSE frame.
#[derive(Debug)]
struct Frame {
    id: i64,
    event: String,
    data: Value,
}

fn frames(reply: &Reply) -> Vec<Frame> {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.content_type().starts_with("text/event-stream"),
        "{}",
        reply.content_type()
    );
    reply
        .text
        .split("\n\n")
        .filter_map(|block| {
            let (mut id, mut event, mut data) = (None, None, None);
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => id = Some(value.parse().unwrap()),
                    "event" => event = Some(value.to_owned()),
                    "data" => data = Some(serde_json::from_str(value).unwrap()),
                    _ => {} // comments (keep-alives)
                }
            }
            Some(Frame {
                id: id?,
                event: event.unwrap(),
                data: data.unwrap(),
            })
        })
        .collect()
}

async fn events(api: &Api, id: RunId, last: Option<&str>) -> Reply {
    let uri = format!("/v1/runs/{id}/events");
    let headers: Vec<(&str, &str)> = last.map(|l| ("last-event-id", l)).into_iter().collect();
    tokio::time::timeout(
        Duration::from_secs(20),
        api.call(Method::GET, &uri, &headers, None),
    )
    .await
    .expect("the stream of a finished run ends")
}

#[tokio::test]
async fn a_finished_run_streams_every_event_then_ends_and_resumes_after_last_event_id() {
    let api = Api::sqlite().await;
    let id = api.submit("pipeline", json!({"name": "sse"})).await;
    api.drive(id).await;
    let stored = api.engine.events(id).await.unwrap();
    let n = stored.len() as i64;
    assert!(n >= 5, "submitted, claimed, 2 steps, succeeded: {n}");

    let all = frames(&events(&api, id, None).await);
    let got: Vec<i64> = all.iter().map(|f| f.id).collect();
    assert_eq!(got, (1..=n).collect::<Vec<_>>());
    for (frame, record) in all.iter().zip(&stored) {
        assert_eq!(frame.data, serde_json::to_value(record).unwrap());
        assert_eq!(frame.event, frame.data["kind"].as_str().unwrap());
        assert_eq!(frame.data["seq"], frame.id);
        assert_eq!(frame.data["run_id"], id.to_string());
    }
    assert_eq!(all.first().unwrap().event, "run_submitted");
    assert_eq!(all.last().unwrap().event, "run_succeeded");

    for k in [0, 1, n / 2, n - 1, n, n + 10] {
        let after = frames(&events(&api, id, Some(&k.to_string())).await);
        let got: Vec<i64> = after.iter().map(|f| f.id).collect();
        assert_eq!(got, (k + 1..=n).collect::<Vec<_>>(), "Last-Event-ID: {k}");
    }
}

#[tokio::test]
async fn a_failed_run_streams_its_failure_and_ends() {
    let api = Api::sqlite().await;
    let id = api.submit("broken", json!({})).await;
    api.drive(id).await;
    let all = frames(&events(&api, id, None).await);
    assert_eq!(all.last().unwrap().event, "run_failed");
    assert!(all.iter().any(|f| f.event == "step_failed"));
}

#[tokio::test]
async fn a_live_stream_follows_the_run_until_it_ends() {
    let api = Api::sqlite().await;
    let id = api.submit("pipeline", json!({"name": "live"})).await;
    let stream = {
        let uri = format!("/v1/runs/{id}/events");
        let api = &api;
        async move { api.call(Method::GET, &uri, &[], None).await }
    };
    let drive = async {
        // Let the stream send `run_submitted` and poll a few times first.
        tokio::time::sleep(Duration::from_millis(400)).await;
        api.drive(id).await;
    };
    let (reply, ()) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(stream, drive)
    })
    .await
    .expect("the stream ends once the run has succeeded");
    let all = frames(&reply);
    let n = api.engine.events(id).await.unwrap().len() as i64;
    assert_eq!(
        all.iter().map(|f| f.id).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
    assert_eq!(all.last().unwrap().event, "run_succeeded");
}

#[tokio::test]
async fn events_refuse_unknown_runs_and_bad_last_event_ids() {
    let api = Api::sqlite().await;
    api.get_error(
        &format!("/v1/runs/{}/events", RunId::new()),
        StatusCode::NOT_FOUND,
        "run_not_found",
    )
    .await;
    api.get_error("/v1/runs/xyz/events", StatusCode::BAD_REQUEST, "bad_run_id")
        .await;
    let id = api.submit("greet", json!({})).await;
    for bad in ["abc", "-1", "1.5"] {
        api.call(
            Method::GET,
            &format!("/v1/runs/{id}/events"),
            &[("last-event-id", bad)],
            None,
        )
        .await
        .assert_error(StatusCode::BAD_REQUEST, "bad_last_event_id");
    }
}

/// `?follow=false` sends what is stored and ends, though the run has not
/// ended (a queued run would keep a following stream open): how a client
/// reads a waiting run's log. `Last-Event-ID` still applies; a `follow`
/// that is not a boolean is 400 `bad_query`.
#[tokio::test]
async fn follow_false_sends_the_stored_events_of_an_unfinished_run_and_ends() {
    let api = Api::sqlite().await;
    let id = api.submit("pipeline", json!({"name": "stored"})).await;
    let stored = api.engine.events(id).await.unwrap();
    assert!(!stored.is_empty(), "run_submitted at least");
    let uri = format!("/v1/runs/{id}/events?follow=false");
    let read = |last: Option<&'static str>| {
        let headers: Vec<(&str, &str)> = last.map(|l| ("last-event-id", l)).into_iter().collect();
        let api = &api;
        let uri = uri.clone();
        async move {
            tokio::time::timeout(
                Duration::from_secs(20),
                api.call(Method::GET, &uri, &headers, None),
            )
            .await
            .expect("a stream with follow=false ends though the run is queued")
        }
    };
    let all = frames(&read(None).await);
    assert_eq!(
        all.iter().map(|f| f.id).collect::<Vec<_>>(),
        stored.iter().map(|e| e.seq).collect::<Vec<_>>()
    );
    assert_eq!(
        api.engine.get_run(id).await.unwrap().status,
        cairn::RunStatus::Queued
    );
    assert!(frames(&read(Some("1")).await).iter().all(|f| f.id > 1));
    api.get_error(
        &format!("/v1/runs/{id}/events?follow=maybe"),
        StatusCode::BAD_REQUEST,
        "bad_query",
    )
    .await;
}
