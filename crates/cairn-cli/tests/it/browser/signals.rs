//! Signals and schedules in the browser: a run waiting for a signal says
//! so on its page, an operator sends the signal from the form there (what
//! they typed survives the page's live refresh), the page it lands on says
//! what was sent and the run goes on to its end; the
//! header's Schedules link lists a schedule with its next fire times.

use super::{browser, browser_case, reload_until, runtime, Console, WAIT};
use crate::support::Kind;

/// A step that waits for `paid`, then one that quotes it.
const PAY: &str = "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"paid\"\n\
    kind = \"signal\"\nsignal = \"paid\"\n[[agents]]\nrole = \"ship\"\nkind = \"template\"\n\
    template = \"shipped {{ outputs.paid.n }}\"\n";

#[test]
fn a_signal_is_sent_from_a_runs_page_and_the_schedules_page_lists_a_schedule() {
    let Some(case) = browser_case(
        "a_signal_is_sent_from_a_runs_page_and_the_schedules_page_lists_a_schedule",
        Kind::Sqlite,
    ) else {
        return;
    };
    let console = Console::start(&case, &[("pay", PAY.to_owned())], "2", false);
    let id = console.submit(&case, "pay", "{}", false);
    let schedule = [
        "schedules",
        "create",
        "nightly",
        "--crew",
        "pay",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Paris",
        "--server",
        &console.page(""),
    ];
    case.raw(&schedule, &[]).expect_code(0);
    runtime().block_on(async {
        let b = browser().await;
        b.goto(&console.page(&format!("/runs/{id}"))).await.unwrap();
        let page = reload_until(&b, "the run to wait for its signal", |t| {
            t.contains("waits for signal paid")
        })
        .await;
        assert!(page.contains("Signals"), "{page}");
        // The page swaps its live part once its event stream has caught
        // up after the load; let it, so the form below is the one shown.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let form = "form.signal";
        assert_eq!(
            b.attr(&format!("{form} input[name=signal]"), "value").await.unwrap().as_deref(),
            Some("paid"),
            "the name it waits for, filled in"
        );
        b.execute(
            "document.querySelector('form.signal textarea[name=payload]').value = arguments[0]; return null;",
            vec![r#"{"n": 7}"#.into()],
        )
        .await
        .unwrap();
        b.fill(&format!("{form} input[name=reason]"), "paid by phone")
            .await
            .unwrap();
        // An event while the operator types (another signal, buffered)
        // swaps the page's live part: what was typed stays.
        let other = ["signal", "send", &id, "other", "--server", &console.page("")];
        case.raw(&other, &[]).expect_code(0);
        reload_free_wait(&b, "the other signal on the page").await;
        let typed = b
            .execute(
                "return [document.querySelector('form.signal textarea[name=payload]').value, \
                 document.querySelector('form.signal input[name=reason]').value];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(typed, serde_json::json!([r#"{"n": 7}"#, "paid by phone"]));
        b.click(&format!("{form} button[type=submit]")).await.unwrap();
        b.wait_for_text("p.flash", "Sent signal `paid`", WAIT).await.unwrap();
        reload_until(&b, "the run to end, the signal consumed", |t| {
            t.contains("succeeded") && t.contains("consumed by step 0")
        })
        .await;

        b.click("header nav a[href='/schedules']").await.unwrap();
        b.wait_for_text("h1", "Schedules", WAIT).await.unwrap();
        let section = b.text("#schedule-nightly").await.unwrap();
        assert!(section.contains("cron 0 3 * * * Europe/Paris"), "{section}");
        assert!(section.contains("Next:"), "{section}");
    });
    let run = case.show(&id);
    assert_eq!(
        crate::support::step(&run, 1)["output"],
        "shipped 7",
        "{run:#}"
    );
}

/// Waits, without reloading, until the live part shows a second signal
/// (the page swapped it on the event).
async fn reload_free_wait(b: &cairn_testkit::browser::Browser, what: &str) {
    for _ in 0..150 {
        let table = b.text("table.signals").await.unwrap_or_default();
        if table.contains("other") {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{what}: never shown");
}
