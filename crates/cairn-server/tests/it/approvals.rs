//! A two-person approval through the API, on both databases: the run's
//! submitter is refused (403 `not_an_approver`, audited as `refused`,
//! nothing stored), one approval leaves the wait open (the ballot says
//! "1 of 2"), the same principal again does not count, a second principal
//! decides; and moving the run to a crew version without the policy does
//! not change who may answer the wait that is open.

use axum::http::{Method, StatusCode};
use cairn::{
    Access, Actor, AuditFilter, Crew, NewPrincipal, Origin, RunId, SubmitOptions, Via, WaitId,
};
use cairn_testkit::{both, Kind};
use serde_json::{json, Value};

use crate::support::{Api, Reply};

both!(a_two_person_approval_survives_an_upgrade_and_refuses_the_submitter);

const ENV_TOKEN: &str = "env-token-0123456789";

/// The `pay` crew at `version`: a payment step approved before it runs,
/// by two of finance who did not submit the run (`policy` lines).
fn pay(version: &str, policy: &str) -> Crew {
    let toml = format!(
        "name = \"pay\"\nversion = \"{version}\"\n\n[[agents]]\nrole = \"pay\"\n\
         kind = \"template\"\ntemplate = \"PAID {{{{ input.amount }}}}\"\n\
         approval = \"before\"\n{policy}"
    );
    Crew::from_toml(&toml).unwrap()
}

const TWO_OF_FINANCE: &str =
    "[agents.approvers]\nallow = [\"group:finance\"]\nrequired = 2\nself_approval = false\n";

async fn token(api: &Api, name: &str) -> String {
    let new = NewPrincipal {
        name: name.to_owned(),
        role: Access::Operator,
        groups: vec!["finance".into()],
        tenants: vec![],
        email: None,
    };
    let issued = api.engine.add_principal(new, &Actor::new("test")).await;
    issued.unwrap().token
}

async fn answer(api: &Api, token: &str, wait: WaitId) -> Reply {
    let auth = format!("Bearer {token}");
    let headers = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let body = json!({"decision": "approve", "reason": "checked"});
    let uri = format!("/v1/waits/{wait}/answer");
    let body = Some(body.to_string().into_bytes());
    api.call(Method::POST, &uri, &headers, body).await
}

/// A run of `pay` v1 submitted by `sam` through the API, waiting for its
/// approval; its wait.
async fn waiting(api: &Api) -> (RunId, WaitId) {
    let sam = Actor::new("sam").from(Origin {
        via: Some(Via::Api),
        ..Origin::default()
    });
    let opts = SubmitOptions {
        by: Some(sam),
        ..SubmitOptions::default()
    };
    let crew = pay("1", TWO_OF_FINANCE);
    let run = api.engine.submit(&crew, json!({"amount": 5}), opts).await;
    let id = run.unwrap().run.id;
    api.engine.execute(id).await.unwrap();
    let waits = api.waits().await;
    (id, waits[0].id)
}

async fn ballot(api: &Api, wait: WaitId) -> Value {
    let auth = format!("Bearer {ENV_TOKEN}");
    let uri = format!("/v1/waits/{wait}/ballot");
    let reply = api
        .call(Method::GET, &uri, &[("authorization", &auth)], None)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.json()
}

/// `/waits` as the console shows it to the holder of `token`.
async fn waits_page(api: &Api, token: &str) -> String {
    let (h, b) = crate::console::form(&format!("token={token}"));
    let signed = api.call(Method::POST, "/login", &h, b).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.text);
    let set = signed.headers["set-cookie"].to_str().unwrap();
    let cookie = set.split(';').next().unwrap().to_owned();
    let page = api
        .call(Method::GET, "/waits", &[("cookie", &cookie)], None)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    page.text
}

async fn a_two_person_approval_survives_an_upgrade_and_refuses_the_submitter(kind: Kind) {
    let api = Api::with(kind, |s| s.with_tokens([ENV_TOKEN])).await;
    let (sam, ana, bob) = (
        token(&api, "sam").await,
        token(&api, "ana").await,
        token(&api, "bob").await,
    );
    let (run, wait) = waiting(&api).await;

    // v2 drops the policy; the open wait keeps the one it opened with.
    let v2 = pay("2", "");
    api.engine.register(&v2);
    let moved = api
        .engine
        .upgrade_runs(&v2, Some(run), false, false, &Actor::new("ops"))
        .await;
    assert!(moved.unwrap().iter().all(|v| v.moved), "moved to v2");
    assert_eq!(api.engine.get_run(run).await.unwrap().crew_version, "2");

    let refused = answer(&api, &sam, wait).await;
    let message = refused.assert_error(StatusCode::FORBIDDEN, "not_an_approver");
    assert!(message.contains("self_approval = false"), "{message}");
    assert!(ballot(&api, wait).await["votes"]
        .as_array()
        .unwrap()
        .is_empty());
    let sams = AuditFilter {
        principal: Some("sam".into()),
        ..AuditFilter::default()
    };
    let audit = api.engine.audit(&sams).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["run_submitted", "refused"], "{audit:?}");

    for _ in 0..2 {
        let first = answer(&api, &ana, wait).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        assert_eq!(first.json()["status"], "open", "one of two, however often");
    }
    let one = ballot(&api, wait).await;
    assert_eq!(
        one["approvers"]["required"], 2,
        "the policy the wait opened with"
    );
    assert_eq!(
        one["votes"],
        json!([{"by": "ana", "decision": "approve", "via": "api"}])
    );

    // The console offers the answer forms only to those the policy admits.
    for (token, forms) in [(ENV_TOKEN, false), (bob.as_str(), true)] {
        let page = waits_page(&api, token).await;
        assert!(page.contains("1 of 2 approvals: ana"), "{page}");
        assert_eq!(page.contains("name=\"decision\""), forms, "{page}");
    }

    let decided = answer(&api, &bob, wait).await;
    let decided = decided.ok_json();
    assert_eq!(
        (&decided["status"], &decided["answered_by"]),
        (&json!("answered"), &json!("bob"))
    );
    assert_eq!(decided["run"]["status"], "queued");
}
