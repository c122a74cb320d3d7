//! Principals through the API, on both databases: the actor recorded is
//! the token's principal whatever a body's `by` says; a role below what a
//! route needs is 403 with nothing stored; a principal bound to a tenant
//! submits only as it; principals and the audit are admin routes; the
//! tokens of `CAIRN_API_TOKENS` keep working as the admin `api`.

use axum::http::{Method, StatusCode};
use cairn::{Access, Actor, AuditFilter, EventKind, NewPrincipal, RunId, Tenant, Via};
use cairn_testkit::{both, Kind};
use serde_json::{json, Value};

use crate::support::{Api, Reply};

both!(
    a_body_by_cannot_change_the_recorded_actor,
    a_role_below_the_route_is_refused_with_nothing_stored,
    a_principal_bound_to_a_tenant_submits_only_as_it,
    principals_and_the_audit_are_admin_routes,
);

const ENV_TOKEN: &str = "env-token-0123456789";

/// An API closed by `CAIRN_API_TOKENS`, on `kind`.
async fn closed(kind: Kind) -> Api {
    Api::with(kind, |s| s.with_tokens([ENV_TOKEN])).await
}

/// Adds a principal (as a test would through the CLI) and returns its token.
async fn add(api: &Api, name: &str, role: Access, tenants: &[&str]) -> String {
    let new = NewPrincipal {
        name: name.to_owned(),
        role,
        groups: vec![],
        tenants: tenants.iter().map(|t| Tenant::new(*t).unwrap()).collect(),
        email: None,
    };
    let issued = api.engine.add_principal(new, &Actor::new("test")).await;
    issued.unwrap().token
}

async fn call(api: &Api, token: &str, method: Method, uri: &str, body: Option<Value>) -> Reply {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    let body = body.map(|b| b.to_string().into_bytes());
    api.call(method, uri, &headers, body).await
}

/// `POST uri` with `body` as `token`'s, answered 200.
async fn posted(api: &Api, token: &str, uri: &str, body: Value) -> Reply {
    let reply = call(api, token, Method::POST, uri, Some(body)).await;
    assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
    reply
}

async fn last_event(api: &Api, id: RunId, kind: EventKind) -> Value {
    let events = api.engine.events(id).await.unwrap();
    let event = events.into_iter().rev().find(|e| e.kind == kind);
    event.unwrap_or_else(|| panic!("no {kind:?}")).data
}

async fn a_body_by_cannot_change_the_recorded_actor(kind: Kind) {
    let api = closed(kind).await;
    let ana = add(&api, "ana", Access::Operator, &[]).await;
    let submitted = call(
        &api,
        &ana,
        Method::POST,
        "/v1/runs",
        Some(json!({"crew": "greet", "input": {"name": "x"}})),
    )
    .await;
    assert_eq!(submitted.status, StatusCode::CREATED, "{}", submitted.text);
    let id: RunId = submitted.json()["id"].as_str().unwrap().parse().unwrap();
    let by_ana = last_event(&api, id, EventKind::RunSubmitted).await;
    assert_eq!(
        (&by_ana["by"], &by_ana["via"]),
        (&json!("ana"), &json!("api"))
    );

    let body = json!({"by": "mallory", "reason": "not mine"});
    let uri = format!("/v1/runs/{id}/cancel");
    posted(&api, &ana, &uri, body).await;
    let event = last_event(&api, id, EventKind::RunCancelled).await;
    assert_eq!(event["by"], "ana", "the token's principal acts");
    assert_eq!(event["note"], "mallory", "the body's `by` is a note");
    assert_eq!(event["reason"], "not mine");
    let token_id = api.engine.principal("ana").await.unwrap().unwrap().token_id;
    assert_eq!(event["token"], token_id.as_str());

    let only_ana = AuditFilter {
        principal: Some("ana".into()),
        ..AuditFilter::default()
    };
    let audit = api.engine.audit(&only_ana).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["run_submitted", "run_cancelled"]);
    assert!(audit
        .iter()
        .all(|e| e.via == Via::Api && e.run_id == Some(id)));
    let mallory = AuditFilter {
        principal: Some("mallory".into()),
        ..AuditFilter::default()
    };
    assert!(api.engine.audit(&mallory).await.unwrap().is_empty());
}

async fn a_role_below_the_route_is_refused_with_nothing_stored(kind: Kind) {
    let api = closed(kind).await;
    let viv = add(&api, "viv", Access::Viewer, &[]).await;
    let ops = add(&api, "ops", Access::Operator, &[]).await;
    let list = call(&api, &viv, Method::GET, "/v1/runs", None).await;
    assert_eq!(list.status, StatusCode::OK, "a viewer reads: {}", list.text);
    let submit = json!({"crew": "greet", "input": {"name": "x"}});
    let refused = call(&api, &viv, Method::POST, "/v1/runs", Some(submit)).await;
    let message = refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
    assert!(
        message.contains("`viv` is a viewer; this needs an operator"),
        "{message}"
    );
    assert!(api.runs().await.is_empty(), "nothing stored");
    let vivs = AuditFilter {
        principal: Some("viv".into()),
        ..AuditFilter::default()
    };
    let audit = api.engine.audit(&vivs).await.unwrap();
    assert_eq!(audit.len(), 1, "the refusal is audited: {audit:?}");
    assert_eq!(
        (audit[0].action.as_str(), &audit[0].detail["needed"]),
        ("refused", &json!("operator"))
    );

    let refused = call(&api, &ops, Method::GET, "/v1/principals", None).await;
    refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
    let body = json!({"name": "eve", "role": "admin"});
    let refused = call(&api, &ops, Method::POST, "/v1/principals", Some(body)).await;
    refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(api.engine.principals().await.unwrap().len(), 2, "no eve");

    api.engine
        .disable_principal("viv", &Actor::new("test"))
        .await
        .unwrap();
    let gone = call(&api, &viv, Method::GET, "/v1/runs", None).await;
    gone.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let rotated = api
        .engine
        .rotate_token("ops", &Actor::new("test"))
        .await
        .unwrap();
    let old = call(&api, &ops, Method::GET, "/v1/runs", None).await;
    old.assert_error(StatusCode::UNAUTHORIZED, "unauthorized");
    let new = call(&api, &rotated.token, Method::GET, "/v1/runs", None).await;
    assert_eq!(new.status, StatusCode::OK, "{}", new.text);
}

async fn a_principal_bound_to_a_tenant_submits_only_as_it(kind: Kind) {
    let api = closed(kind).await;
    let svc = add(&api, "svc", Access::Operator, &["acme"]).await;
    let as_other = json!({"crew": "greet", "input": {}, "tenant": "other"});
    let refused = call(&api, &svc, Method::POST, "/v1/runs", Some(as_other)).await;
    let message = refused.assert_error(StatusCode::FORBIDDEN, "forbidden");
    assert!(message.contains("only as tenant acme"), "{message}");
    assert!(api.runs().await.is_empty(), "nothing stored");
    let unnamed = json!({"crew": "greet", "input": {}});
    let taken = call(&api, &svc, Method::POST, "/v1/runs", Some(unnamed)).await;
    assert_eq!(taken.status, StatusCode::CREATED, "{}", taken.text);
    assert_eq!(taken.json()["tenant"], "acme", "its one tenant");
}

async fn principals_and_the_audit_are_admin_routes(kind: Kind) {
    let api = closed(kind).await;
    let body = json!({"name": "fin", "role": "operator", "groups": ["finance"]});
    let added = call(&api, ENV_TOKEN, Method::POST, "/v1/principals", Some(body)).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    let added = added.json();
    assert_eq!(
        (&added["name"], &added["groups"]),
        (&json!("fin"), &json!(["finance"]))
    );
    let token = added["token"].as_str().unwrap();
    assert!(token.starts_with("cairn_"), "{token}");
    let again = json!({"name": "fin", "role": "admin"});
    let taken = call(&api, ENV_TOKEN, Method::POST, "/v1/principals", Some(again)).await;
    taken.assert_error(StatusCode::CONFLICT, "principal_exists");
    let bad = json!({"name": "no spaces", "role": "admin"});
    let bad = call(&api, ENV_TOKEN, Method::POST, "/v1/principals", Some(bad)).await;
    bad.assert_error(StatusCode::BAD_REQUEST, "bad_principal");

    let listed = call(&api, ENV_TOKEN, Method::GET, "/v1/principals", None).await;
    assert_eq!(listed.json().as_array().unwrap().len(), 1);
    assert!(!listed.text.contains(token), "a list never shows a token");
    let uri = "/v1/principals/nobody/disable";
    let missing = call(&api, ENV_TOKEN, Method::POST, uri, None).await;
    missing.assert_error(StatusCode::NOT_FOUND, "principal_not_found");

    let audit = call(
        &api,
        ENV_TOKEN,
        Method::GET,
        "/v1/audit?principal=api",
        None,
    )
    .await;
    let entries = audit.ok_json();
    assert_eq!(entries.as_array().unwrap().len(), 1, "{entries}");
    let entry = &entries[0];
    assert_eq!(
        (&entry["action"], &entry["via"]),
        (&json!("principal_added"), &json!("api"))
    );
    let env_id = entry["token"].as_str().unwrap();
    assert!(env_id.starts_with("env-") && env_id.len() == 12, "{env_id}");
    assert_eq!(entry["detail"]["name"], "fin");
    let as_fin = call(&api, token, Method::GET, "/v1/audit", None).await;
    as_fin.assert_error(StatusCode::FORBIDDEN, "forbidden");

    // A provider key's pause is audited too (no run event records it).
    let pause = json!({"key": "provider=openai,url=http://x/v1,key=K", "for": "1m"});
    posted(&api, ENV_TOKEN, "/v1/limits/pause", pause).await;
    let all = api.engine.audit(&AuditFilter::default()).await.unwrap();
    let last = all.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.principal.as_str()),
        ("key_paused", "api")
    );

    // So are a thread's budget and a compaction (a dry run changes nothing
    // and is not audited).
    let budget = json!({"set": {"tokens": 1000}, "reason": "cap"});
    posted(&api, ENV_TOKEN, "/v1/threads/t1/budget", budget).await;
    for dry_run in [true, false] {
        let body = json!({"events_older_than": "30d", "dry_run": dry_run});
        posted(&api, ENV_TOKEN, "/v1/compact", body).await;
    }
    let all = api.engine.audit(&AuditFilter::default()).await.unwrap();
    let actions: Vec<&str> = all
        .iter()
        .rev()
        .take(2)
        .map(|e| e.action.as_str())
        .collect();
    assert_eq!(actions, ["compacted", "thread_budget_set"]);
    assert_eq!(all.last().unwrap().principal, "api");
}
