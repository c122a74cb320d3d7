//! Inbound webhooks through a real `cairn serve` (with API tokens, which a
//! hook does not need), both backends: a delivery with a wrong signature
//! or token is refused (401) and stores nothing; a right one, signed by the
//! Standard Webhooks library, wakes the waiting run; the same delivery
//! again is a no-op; a token hook with `--start` starts a run on a thread
//! that has none, which consumes the signal and ends.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::support::{self, wait_until, Case, Kind};

both_backends!(
    a_signed_delivery_wakes_the_run_once_and_a_wrong_one_stores_nothing,
    a_token_hook_starts_a_run_on_a_thread_that_has_none,
);

/// A sender's trace, as its `traceparent` header carries it.
const SENDER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// `POST PATH` with `headers` and a JSON `body`: the status code and the
/// answer.
fn post(listen: &str, path: &str, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(listen).expect("connect to the server");
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         {extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send a POST");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn payment(case: &Case) -> std::path::PathBuf {
    let crews = support::crews_dir(case, &[]);
    std::fs::copy(support::example("payment.toml"), crews.join("payment.toml")).unwrap();
    crews
}

/// `cairn hooks create` with `args` and `more`: the secret it prints.
fn hook(case: &Case, args: &[&str], more: &[&str]) -> String {
    let mut all = vec!["hooks", "create"];
    all.extend(args.iter().chain(more).copied());
    all.push("--json");
    let made = case.cairn(&all).expect_code(0).json();
    made["secret"].as_str().unwrap().to_owned()
}

fn signals(case: &Case, id: &str) -> Vec<Value> {
    let listed = case
        .cairn(&["signal", "list", id, "--json"])
        .expect_code(0)
        .json();
    listed["signals"].as_array().unwrap().clone()
}

fn a_signed_delivery_wakes_the_run_once_and_a_wrong_one_stores_nothing(kind: Kind) {
    let case = Case::new(kind);
    let crews = payment(&case);
    let secret = hook(
        &case,
        &["pay", "--scheme", "standard", "--signal", "{{ body.type }}"],
        &[
            "--target",
            "key:order-{{ body.order }}",
            "--payload",
            "body.data",
        ],
    );
    assert!(secret.starts_with("whsec_"), "{secret}");
    let crew = crews.join("payment.toml");
    let run = case
        .cairn(&[
            "run",
            crew.to_str().unwrap(),
            "--input",
            "{\"order\": 3}",
            "--idempotency-key",
            "order-3",
            "--json",
        ])
        .expect_code(4)
        .json();
    let id = run["id"].as_str().unwrap().to_owned();
    let served = support::serve_crews(&case, &crews, "hooks-test-token-0123456789");
    let body = json!({"type": "paid", "order": 3, "data": {"amount": 30}}).to_string();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let signed = |msg: &str, secret: &str| {
        let webhook = standardwebhooks::Webhook::new(secret).unwrap();
        vec![
            ("webhook-id", msg.to_owned()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                webhook.sign(msg, now, body.as_bytes()).unwrap(),
            ),
        ]
    };
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let (code, refused) = post(
        &served.listen,
        "/v1/hooks/pay",
        &signed("msg_1", other),
        &body,
    );
    assert_eq!(
        (code, &refused["error"]["code"]),
        (401, &json!("hook_unauthorized")),
        "{refused}"
    );
    let (code, missing) = post(&served.listen, "/v1/hooks/pay", &[], &body);
    assert_eq!(code, 401, "{missing}");
    assert!(
        signals(&case, &id).is_empty(),
        "a refused delivery stores nothing"
    );

    let (code, sent) = post(
        &served.listen,
        "/v1/hooks/pay",
        &[
            signed("msg_1", &secret),
            vec![("traceparent", SENDER.to_owned())],
        ]
        .concat(),
        &body,
    );
    assert_eq!(code, 200, "{sent}");
    assert_eq!(
        (sent["signal"]["run_id"].as_str(), sent["woke"].as_bool()),
        (Some(id.as_str()), Some(true)),
        "{sent}"
    );
    assert_eq!(
        sent["signal"]["id"], "msg_1",
        "the delivery's id is the signal's"
    );
    let (code, again) = post(
        &served.listen,
        "/v1/hooks/pay",
        &signed("msg_1", &secret),
        &body,
    );
    assert_eq!(
        (code, again["duplicate"].as_bool()),
        (200, Some(true)),
        "{again}"
    );
    wait_until(
        "the server to finish the run",
        Duration::from_secs(60),
        || case.show(&id)["status"] == "succeeded",
    );
    // The sender's trace is kept, for the run's trace to link.
    let received = case.events_of(&id, "signal_received");
    let received = received.iter().find(|e| e["data"]["id"] == "msg_1");
    assert_eq!(received.unwrap()["data"]["traceparent"], SENDER);
    let shown = case.show(&id);
    assert_eq!(
        support::step(&shown, 1)["output"],
        json!({"name": "paid", "payload": {"amount": 30}})
    );
    assert_eq!(
        signals(&case, &id).len(),
        1,
        "the same delivery twice stores one signal"
    );
    let audit = case.cairn(&["audit", "--json"]).expect_code(0).json();
    let via_hook = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["via"] == "hook")
        .count();
    assert_eq!(via_hook, 1, "{audit:#}");
}

fn a_token_hook_starts_a_run_on_a_thread_that_has_none(kind: Kind) {
    let case = Case::new(kind);
    let crews = payment(&case);
    let token = hook(
        &case,
        &[
            "chat",
            "--signal",
            "paid",
            "--target",
            "thread:{{ body.conversation }}",
        ],
        &["--start", "payment"],
    );
    let listed = case
        .cairn(&["hooks", "list", "--json"])
        .expect_code(0)
        .json();
    assert!(
        !listed.to_string().contains(&token),
        "a list never shows a secret"
    );
    let served = support::serve_crews(&case, &crews, "hooks-test-token-0123456789");
    let body = json!({"conversation": "c-1", "order": 4}).to_string();
    let wrong = [("authorization", "Bearer ch_not-this-one".to_owned())];
    let (code, _) = post(&served.listen, "/v1/hooks/chat", &wrong, &body);
    assert_eq!(code, 401);
    assert!(case.list().is_empty(), "a refused delivery starts nothing");
    let right = [("authorization", format!("Bearer {token}"))];
    let (code, sent) = post(&served.listen, "/v1/hooks/chat", &right, &body);
    assert_eq!(
        (code, sent["started"].as_bool()),
        (200, Some(true)),
        "{sent}"
    );
    let id = sent["signal"]["run_id"].as_str().unwrap().to_owned();
    wait_until("the started run to end", Duration::from_secs(60), || {
        case.show(&id)["status"] == "succeeded"
    });
    let run = case.show(&id);
    assert_eq!(run["thread_id"], "c-1", "{run:#}");
    assert_eq!(
        run["input"],
        json!({"conversation": "c-1", "order": 4}),
        "the payload is its input"
    );
    case.cairn(&["hooks", "delete", "chat"]).expect_code(0);
    let (code, gone) = post(&served.listen, "/v1/hooks/chat", &right, &body);
    assert_eq!(
        (code, &gone["error"]["code"]),
        (404, &json!("hook_not_found"))
    );
}
