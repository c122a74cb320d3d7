//! Two people approve a payment in the browser: three principals sign in
//! to one console in turn. The viewer sees the wait and its "0 of 2
//! approvals" but no form; one operator of finance approves (the wait
//! stays open, "1 of 2 approvals: ana"); a second approves and the run goes
//! on. The audit names each vote with its principal and `via: console`.

use super::{
    browser, browser_case, click_and_land, reload_until, runtime, sign_out, Console, WAIT,
};
use crate::support::{Case, Kind};

/// A payment approved before it runs by two people of finance.
const PAY: &str = "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"pay\"\n\
    kind = \"template\"\ntemplate = \"paid {{ input.amount }}\"\napproval = \"before\"\n\
    [agents.approvers]\nallow = [\"group:finance\"]\nrequired = 2\n";

/// Adds a principal on the case's database; its token.
fn principal(case: &Case, name: &str, role: &str, group: &[&str]) -> String {
    let mut args = vec!["principals", "add", name, "--role", role, "--json"];
    for g in group {
        args.extend(["--group", g]);
    }
    let added = case.cairn(&args).expect_code(0).json();
    added["token"].as_str().unwrap().to_owned()
}

async fn sign_in(b: &cairn_testkit::browser::Browser, console: &Console, token: &str) {
    b.goto(&console.page("/login")).await.unwrap();
    b.wait_for("input#token", WAIT).await.unwrap();
    b.fill("input#token", token).await.unwrap();
    b.click("main.login button").await.unwrap();
    b.wait_for_text("h1", "Runs", WAIT).await.unwrap();
}

#[test]
fn two_principals_approve_a_two_person_wait_and_a_viewer_only_sees_it() {
    let Some(case) = browser_case(
        "two_principals_approve_a_two_person_wait_and_a_viewer_only_sees_it",
        Kind::Sqlite,
    ) else {
        return;
    };
    let viv = principal(&case, "viv", "viewer", &[]);
    let ana = principal(&case, "ana", "operator", &["finance"]);
    let bob = principal(&case, "bob", "operator", &["finance"]);
    let console = Console::start(&case, &[("pay", PAY.to_owned())], "1", true);
    let id = console.submit(&case, "pay", r#"{"amount": 7}"#, true);
    let approve = "section.wait form:has(input[name=decision][value=approve])";
    runtime().block_on(async {
        let b = browser().await;
        sign_in(&b, &console, &viv).await;
        b.goto(&console.page("/waits")).await.unwrap();
        reload_until(&b, "the approval", |t| t.contains("0 of 2 approvals")).await;
        assert!(b.text("header").await.unwrap().contains("Signed in as viv"));
        assert!(
            !b.exists("section.wait form").await.unwrap(),
            "a viewer gets no form"
        );
        sign_out(&b).await;

        for (token, who, after) in [(&ana, "ana", "1 of 2 approvals: ana"), (&bob, "bob", "")] {
            sign_in(&b, &console, token).await;
            b.goto(&console.page("/waits")).await.unwrap();
            b.wait_for(approve, WAIT).await.unwrap();
            b.fill(
                &format!("{approve} input[name=reason]"),
                &format!("checked by {who}"),
            )
            .await
            .unwrap();
            click_and_land(&b, &format!("{approve} button"), who).await;
            if !after.is_empty() {
                b.goto(&console.page("/waits")).await.unwrap();
                reload_until(&b, "ana's vote", |t| t.contains(after)).await;
            }
            sign_out(&b).await;
        }
    });
    let done = case
        .cairn(&["runs", "show", &id, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(done["status"], "succeeded", "{done:#}");
    let audit = case.cairn(&["audit", "--json"]).expect_code(0).json();
    let votes: Vec<(&str, &str, &str)> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| ["wait_voted", "wait_answered"].contains(&e["action"].as_str().unwrap()))
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap();
            (field("action"), field("principal"), field("via"))
        })
        .collect();
    assert_eq!(
        votes,
        [
            ("wait_voted", "ana", "console"),
            ("wait_answered", "bob", "console")
        ]
    );
}
