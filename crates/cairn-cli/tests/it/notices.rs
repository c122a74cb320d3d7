//! Notices of open waits, between real processes: `cairn serve` opens a
//! two-person wait while the webhook receiver is down, fails to deliver,
//! and is SIGKILLed; the receiver comes back (verifying every signature
//! with the Standard Webhooks library), the server restarts, and the
//! notice arrives once, with the id it had before the kill and a link per
//! approver. Opening a link changes nothing; its confirmation votes, once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::support::{assert_contains, post_form, serve, wait_until, Case, Kind, Served};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TOKEN: &str = "notices-token-0123456789";
const PAY: &str = "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"pay\"\n\
    kind = \"template\"\ntemplate = \"paid {{ input.amount }}\"\napproval = \"before\"\n\
    [agents.approvers]\nallow = [\"group:finance\"]\nrequired = 2\n";

both_backends!(
    a_notice_survives_a_down_receiver_and_a_killed_server_and_its_link_votes_once,
    a_reminder_goes_before_the_deadline_to_those_who_have_not_voted,
    an_expired_link_shows_and_votes_nothing,
);

/// What the receiver got: each verified notice's id and body, and how
/// many it refused.
#[derive(Default)]
struct Received {
    notices: Vec<(String, Value)>,
    refused: usize,
}

/// A receiver on `port` that verifies each POST with the spec's library.
fn receiver(port: u16, got: Arc<Mutex<Received>>) -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.spawn(async move {
        let hook = move |headers: HeaderMap, body: Bytes| {
            let got = Arc::clone(&got);
            async move {
                let webhook = standardwebhooks::Webhook::new(SECRET).unwrap();
                let mut got = got.lock().unwrap();
                if webhook.verify(&body, &headers).is_err() {
                    got.refused += 1;
                    return StatusCode::BAD_REQUEST;
                }
                let id = headers["webhook-id"].to_str().unwrap().to_owned();
                got.notices
                    .push((id, serde_json::from_slice(&body).unwrap()));
                StatusCode::NO_CONTENT
            }
        };
        let app = axum::Router::new().route("/hook", axum::routing::post(hook));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        axum::serve(listener, app).await.unwrap();
    });
    rt
}

fn serve_notifying(case: &Case, port: u16) -> Served {
    serve_with(case, port, PAY, &[])
}

fn serve_with(case: &Case, port: u16, crew: &str, more: &[(&str, &str)]) -> Served {
    let crews = crate::support::crews_dir(case, &[("pay.toml", crew)]);
    let hook = format!("http://127.0.0.1:{port}/hook");
    let env = [
        ("CAIRN_API_TOKENS", TOKEN),
        ("CAIRN_NOTIFY_URL", hook.as_str()),
        ("CAIRN_NOTIFY_SECRET", SECRET),
    ];
    serve(
        case,
        &["--crews", crews.to_str().unwrap()],
        &[&env, more].concat(),
    )
}

/// Adds the finance operators `names`; their tokens.
fn finance(case: &Case, names: &[&str]) -> Vec<String> {
    let add = |name: &str| {
        let args = [
            "principals",
            "add",
            name,
            "--role",
            "operator",
            "--group",
            "finance",
            "--json",
        ];
        let out = case.cairn(&args).expect_code(0).json();
        out["token"].as_str().unwrap().to_owned()
    };
    names.iter().map(|n| add(n)).collect()
}

/// A port free now, for a receiver that starts seconds later, taken below
/// the kernel's ephemeral range (`ip_local_port_range`, 32768 and up
/// here): a port the kernel hands out (`bind(0)`) could go to another
/// test's process in between, and the receiver would find it in use.
fn free_port() -> u16 {
    let (lo, hi) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| {
            let mut it = r.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999));
    let range = match lo > 11_000 {
        true => 10_000..lo,
        false => hi.saturating_add(1)..u16::MAX,
    };
    let start = std::process::id() as usize;
    let span = range.len().max(1);
    (0..span)
        .map(|i| range.start + ((start * 7919 + i) % span) as u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port outside the ephemeral range")
}

fn a_notice_survives_a_down_receiver_and_a_killed_server_and_its_link_votes_once(kind: Kind) {
    let case = Case::new(kind);
    finance(&case, &["ana", "bob"]);
    let port = free_port();
    let served = serve_notifying(&case, port);
    let submit = [
        "submit",
        "pay",
        "--input",
        r#"{"amount": 9}"#,
        "--server",
        &served.url,
    ];
    case.raw(&[&submit[..], &["--token", TOKEN]].concat(), &[])
        .expect_code(0);
    let err = case.path("serve.err");
    wait_until("a failed delivery", Duration::from_secs(30), || {
        std::fs::read_to_string(&err)
            .unwrap_or_default()
            .contains("notice not delivered")
    });
    let waits = case
        .cairn(&["waits", "list", "--json"])
        .expect_code(0)
        .json();
    let wait = waits[0]["id"].as_str().unwrap().to_owned();
    drop(served); // SIGKILL, between the wait's commit and any delivery

    let got = Arc::new(Mutex::new(Received::default()));
    let _receiver = receiver(port, Arc::clone(&got));
    let served = serve_notifying(&case, port);
    wait_until("the notice", Duration::from_secs(30), || {
        !got.lock().unwrap().notices.is_empty()
    });
    std::thread::sleep(Duration::from_secs(2));
    let (id, body) = {
        let got = got.lock().unwrap();
        assert_eq!(got.refused, 0, "every signature verifies");
        assert_eq!(got.notices.len(), 1, "once: {:?}", got.notices);
        got.notices[0].clone()
    };
    assert_eq!(
        id,
        format!("msg_{}", wait.replace('-', "")),
        "the id it had before the kill"
    );
    assert_eq!(body["type"], "wait.opened");
    assert_eq!(body["data"]["wait_id"], wait.as_str());
    let links = body["data"]["links"].as_array().unwrap();
    let people: Vec<&str> = links
        .iter()
        .map(|l| l["principal"].as_str().unwrap())
        .collect();
    assert_eq!(people, ["ana", "bob"]);

    // Opening the link shows a confirmation and records nothing.
    let url = links[0]["url"].as_str().unwrap();
    let path = url
        .strip_prefix(&served.url)
        .expect("a link to this server");
    let page = crate::support::get_text(&served.listen, path);
    assert!(
        page.contains("Answer as ana") && page.contains("Nothing is recorded"),
        "{page}"
    );
    let audit = |action: &str| case.audit_of(action);
    assert!(audit("wait_voted").is_empty(), "a GET votes nothing");

    let (status, page) = post_form(&served.listen, path, "decision=approve&reason=fine");
    assert!(status.contains(" 200 "), "{status}: {page}");
    assert!(
        page.contains("Your approve was recorded. The wait is open."),
        "{page}"
    );
    let voted = audit("wait_voted");
    assert_eq!(voted.len(), 1, "{voted:?}");
    assert_eq!(
        (&voted[0]["principal"], &voted[0]["via"]),
        (&Value::from("ana"), &Value::from("link"))
    );
    let (again, page) = post_form(&served.listen, path, "decision=approve");
    assert!(
        again.contains(" 410 ") && page.contains("used already"),
        "{again}: {page}"
    );
    drop(served);
}

/// A reminder goes out once, within `CAIRN_NOTIFY_REMIND` of the wait's
/// deadline, with links only for those who have not voted; an answer that
/// quotes another digest than the notice's is refused with nothing stored.
fn a_reminder_goes_before_the_deadline_to_those_who_have_not_voted(kind: Kind) {
    let case = Case::new(kind);
    let tokens = finance(&case, &["ana", "bob"]);
    let port = free_port();
    let got = Arc::new(Mutex::new(Received::default()));
    let _receiver = receiver(port, Arc::clone(&got));
    let crew = PAY.replace("approval", "wait_deadline_ms = 12000\napproval");
    let served = serve_with(&case, port, &crew, &[("CAIRN_NOTIFY_REMIND", "6s")]);
    let remote = |token: &str, args: &[&str]| {
        let to = ["--server", served.url.as_str(), "--token", token];
        case.raw(&[args, &to[..]].concat(), &[])
    };
    let submitted = remote(TOKEN, &["submit", "pay", "--input", r#"{"amount": 9}"#]);
    assert!(
        matches!(submitted.code(), Some(0 | 4)),
        "queued or waiting: {submitted:?}"
    );
    wait_until("the notice", Duration::from_secs(30), || {
        !got.lock().unwrap().notices.is_empty()
    });
    let opened = got.lock().unwrap().notices[0].1.clone();
    let wait = opened["data"]["wait_id"].as_str().unwrap().to_owned();
    let digest = opened["data"]["digest"].as_str().unwrap().to_owned();
    assert!(digest.starts_with("sha256:"), "{opened}");

    let answer = [
        "waits",
        "answer",
        &wait,
        "--approve",
        "--enqueue",
        "--digest",
    ];
    let stale = remote(&tokens[0], &[&answer[..], &["sha256:0"]].concat()).expect_code(2);
    assert_contains(&stale.stderr, "asks about something other than");
    let voted = case.audit_of("wait_voted");
    assert_eq!(voted.len(), 0, "a stale digest stores no vote");
    // Recorded: the run still waits for a second approval (exit code 4).
    remote(&tokens[0], &[&answer[..], &[digest.as_str()]].concat()).expect_code(4);
    let votes = case.audit_of("wait_voted");
    let vote = votes.first().expect("ana's vote is audited");
    assert_eq!(
        (&vote["principal"], &vote["via"]),
        (&json!("ana"), &json!("cli"))
    );

    wait_until("the reminder", Duration::from_secs(30), || {
        got.lock().unwrap().notices.len() >= 2
    });
    std::thread::sleep(Duration::from_secs(2));
    let got = got.lock().unwrap();
    assert_eq!(
        got.notices.len(),
        2,
        "one notice, one reminder: {:?}",
        got.notices
    );
    let (id, reminder) = &got.notices[1];
    assert_eq!(id, &format!("msg_{}_reminder", wait.replace('-', "")));
    assert_eq!(reminder["type"], "wait.reminder");
    let people: Vec<&str> = reminder["data"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["principal"].as_str().unwrap())
        .collect();
    assert_eq!(people, ["bob"], "ana voted already");
    drop(served);
}

/// A link past `CAIRN_NOTIFY_LINK_TTL` is refused when opened and when
/// confirmed (410), and no vote is stored.
fn an_expired_link_shows_and_votes_nothing(kind: Kind) {
    let case = Case::new(kind);
    finance(&case, &["ana"]);
    let port = free_port();
    let got = Arc::new(Mutex::new(Received::default()));
    let _receiver = receiver(port, Arc::clone(&got));
    let served = serve_with(&case, port, PAY, &[("CAIRN_NOTIFY_LINK_TTL", "1s")]);
    let to = ["--server", served.url.as_str(), "--token", TOKEN];
    let submit = ["submit", "pay", "--input", r#"{"amount": 9}"#];
    let submitted = case.raw(&[&submit[..], &to[..]].concat(), &[]);
    assert!(matches!(submitted.code(), Some(0 | 4)), "{submitted:?}");
    wait_until("the notice", Duration::from_secs(30), || {
        !got.lock().unwrap().notices.is_empty()
    });
    let url = got.lock().unwrap().notices[0].1["data"]["links"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = url
        .strip_prefix(&served.url)
        .expect("a link to this server");
    std::thread::sleep(Duration::from_millis(1_500));
    let page = crate::support::get_text(&served.listen, path);
    assert_contains(&page, "This link expired");
    let (status, page) = post_form(&served.listen, path, "decision=approve");
    assert!(
        status.contains(" 410 ") && page.contains("expired"),
        "{status}: {page}"
    );
    let votes = case.audit_of("wait_voted");
    assert_eq!(votes.len(), 0, "an expired link votes nothing");
    drop(served);
}
