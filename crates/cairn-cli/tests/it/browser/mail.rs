//! Notices by e-mail, followed in the browser: `cairn serve` mails each
//! approver of a two-person wait (through an SMTP server this test runs)
//! its link; opening the link in Chromium shows a confirmation page and
//! records nothing; confirming votes, as that person `via: link`; the same
//! link again is refused.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{browser, browser_case, runtime, WAIT};
use crate::support::{serve, wait_until, Kind};

const PAY: &str = "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"pay\"\n\
    kind = \"template\"\ntemplate = \"paid {{ input.amount }}\"\napproval = \"before\"\n\
    [agents.approvers]\nallow = [\"group:finance\"]\nrequired = 2\n";
const TOKEN: &str = "mail-token-0123456789abcdef";

/// The messages an SMTP sink kept: `(recipients, data)`.
type Mails = Arc<Mutex<Vec<(Vec<String>, String)>>>;

/// A minimal SMTP server on a free port: it accepts every message.
fn smtp_sink() -> (u16, Mails) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mails = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&mails);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                let mut lines = BufReader::new(stream);
                let mut say = |text: &str| out.write_all(format!("{text}\r\n").as_bytes());
                let _ = say("220 sink ready");
                let (mut to, mut line) = (Vec::new(), String::new());
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    let command = line.trim_end().to_owned();
                    line.clear();
                    let verb = command.split(' ').next().unwrap_or("").to_ascii_uppercase();
                    let reply = match verb.as_str() {
                        "EHLO" | "HELO" => "250 sink",
                        "RCPT" => {
                            to.push(command.clone());
                            "250 ok"
                        }
                        "DATA" => {
                            let _ = say("354 go on");
                            let mut data = String::new();
                            while lines.read_line(&mut line).unwrap_or(0) > 0 && line != ".\r\n" {
                                data.push_str(&line);
                                line.clear();
                            }
                            line.clear();
                            kept.lock().unwrap().push((std::mem::take(&mut to), data));
                            "250 kept"
                        }
                        "QUIT" => {
                            let _ = say("221 bye");
                            return;
                        }
                        _ => "250 ok",
                    };
                    let _ = say(reply);
                }
            });
        }
    });
    (port, mails)
}

/// The link in a mail's text (quoted-printable soft breaks undone).
fn link_in(data: &str) -> String {
    let text = data.replace("=\r\n", "").replace("=3D", "=");
    let start = text.find("http://").expect("a link in the mail");
    text[start..].split_whitespace().next().unwrap().to_owned()
}

#[test]
fn a_mailed_link_shows_a_confirmation_votes_once_and_is_refused_again() {
    let Some(case) = browser_case(
        "a_mailed_link_shows_a_confirmation_votes_once_and_is_refused_again",
        Kind::Sqlite,
    ) else {
        return;
    };
    for who in ["ana", "bob"] {
        let email = format!("{who}@example.com");
        let add = [
            "principals",
            "add",
            who,
            "--role",
            "operator",
            "--group",
            "finance",
        ];
        case.cairn(&[&add[..], &["--email", &email]].concat())
            .expect_code(0);
    }
    let (port, mails) = smtp_sink();
    let crews = crate::support::crews_dir(&case, &[("pay.toml", PAY)]);
    let smtp = format!("smtp://127.0.0.1:{port}");
    let env = [
        ("CAIRN_API_TOKENS", TOKEN),
        ("CAIRN_SMTP_URL", smtp.as_str()),
        ("CAIRN_SMTP_FROM", "cairn@example.com"),
        (
            "CAIRN_NOTIFY_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
    ];
    let served = serve(&case, &["--crews", crews.to_str().unwrap()], &env);
    let submit = [
        "submit",
        "pay",
        "--input",
        r#"{"amount": 3}"#,
        "--server",
        &served.url,
    ];
    case.raw(&[&submit[..], &["--token", TOKEN]].concat(), &[])
        .expect_code(0);
    wait_until("two mails", Duration::from_secs(30), || {
        mails.lock().unwrap().len() >= 2
    });
    let mails = mails.lock().unwrap().clone();
    let to_ana = mails
        .iter()
        .find(|(to, _)| to.iter().any(|t| t.contains("ana@example.com")));
    let (_, data) = to_ana.expect("a mail to ana");
    assert!(
        data.contains("Subject: Cairn: a approval waits for you"),
        "{data}"
    );
    let link = link_in(data);
    assert!(
        link.starts_with(&format!("{}/links/cl_", served.url)),
        "{link}"
    );
    let votes = || {
        let audit = case.cairn(&["audit", "--json"]).expect_code(0).json();
        let all = audit.as_array().unwrap().clone();
        all.into_iter()
            .filter(|e| e["action"] == "wait_voted")
            .collect::<Vec<_>>()
    };
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&link).await.unwrap();
        b.wait_for_text("h1", "Answer as ana", WAIT).await.unwrap();
        assert!(votes().is_empty(), "opening the link records nothing");
        b.fill("input[name=reason]", "matches the invoice")
            .await
            .unwrap();
        b.click("button[value=approve]").await.unwrap();
        b.wait_for_text("h1", "Recorded", WAIT).await.unwrap();
        b.goto(&link).await.unwrap();
        b.wait_for_text("p.error", "used already", WAIT)
            .await
            .unwrap();
    });
    let voted = votes();
    assert_eq!(voted.len(), 1, "{voted:?}");
    assert_eq!(
        (&voted[0]["principal"], &voted[0]["via"]),
        (&"ana".into(), &"link".into())
    );
    assert_eq!(voted[0]["detail"]["reason"], "matches the invoice");
}
