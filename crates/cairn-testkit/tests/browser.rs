//! The browser harness against a tiny hand-served page: fill, click, wait
//! for a script's change, screenshot; and nothing left running after drop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_testkit::browser::{Browser, BrowserError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PAGE: &str = r#"<!doctype html>
<html><head><title>t</title></head><body>
<form id="f"><input id="name" name="name" value="old" data-kind="text"><button id="go" type="button">Go</button></form>
<p id="out">waiting</p><p id="hidden" style="display:none">secret</p>
<script>
document.getElementById('go').addEventListener('click', () => setTimeout(() => {
  document.getElementById('out').textContent = 'hello ' + document.getElementById('name').value;
}, 300));
document.getElementById('f').addEventListener('submit', e => {
  e.preventDefault();
  document.getElementById('out').textContent = 'submitted';
});
</script></body></html>"#;

/// Serves `PAGE` for any request, one connection at a time.
async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = vec![0; 8192];
            let _ = conn.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                PAGE.len()
            );
            let _ = conn.write_all(head.as_bytes()).await;
            let _ = conn.write_all(PAGE.as_bytes()).await;
            let _ = conn.shutdown().await;
        }
    });
    format!("http://{addr}/")
}

/// Pids of live processes in process group `pgid` (from /proc).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the ")" that ends the command name: state ppid pgrp ...
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) && fields.first() != Some(&"Z") {
            pids.push(pid);
        }
    }
    pids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drives_a_page_and_leaves_nothing_running() {
    if !cairn_testkit::browser::present("drives_a_page_and_leaves_nothing_running") {
        return;
    }
    let url = serve().await;
    let browser = Browser::start().await.unwrap_or_else(|e| panic!("{e}"));
    let pgid = browser.driver_pid();

    browser.goto(&url).await.unwrap();
    assert_eq!(browser.current_url().await.unwrap(), url);
    assert_eq!(browser.text("#out").await.unwrap(), "waiting");
    assert_eq!(
        browser.text("#hidden").await.unwrap(),
        "",
        "hidden text is not visible text"
    );
    assert!(browser.exists("#go").await.unwrap());
    assert!(!browser.exists("#nope").await.unwrap());
    assert_eq!(
        browser.attr("#name", "data-kind").await.unwrap().as_deref(),
        Some("text")
    );
    assert_eq!(browser.attr("#name", "nope").await.unwrap(), None);

    browser.fill("#name", "Ada").await.unwrap();
    browser.click("#go").await.unwrap();
    let text = browser
        .wait_for_text("#out", "Ada", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(text, "hello Ada");
    let value = browser
        .execute("return [arguments[0] + 1, document.title]", vec![41.into()])
        .await
        .unwrap();
    assert_eq!(value, serde_json::json!([42, "t"]));

    browser.submit_form("#f").await.unwrap();
    browser
        .wait_for_text("#out", "submitted", Duration::from_secs(5))
        .await
        .unwrap();
    browser.reload().await.unwrap();
    browser
        .wait_for("#out", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(browser.text("#out").await.unwrap(), "waiting");

    // A timeout says what it waited for, what it last saw and where.
    let err = browser
        .wait_for_text("#out", "never", Duration::from_millis(300))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BrowserError::Timeout { .. }), "{msg}");
    assert!(msg.contains("\"waiting\"") && msg.contains(&url), "{msg}");
    let err = browser.click("#nope").await.unwrap_err().to_string();
    assert!(
        err.contains("no such element") && err.contains("#nope"),
        "{err}"
    );

    browser.set_size(800, 600).await.unwrap();
    let width = browser
        .execute("return window.outerWidth", vec![])
        .await
        .unwrap();
    assert_eq!(width, 800);
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("page.png");
    browser.screenshot_png(&shot).await.unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    assert!(
        group_members(pgid).len() > 1,
        "chromium runs in chromedriver's group"
    );
    drop(browser);
    assert!(
        !std::path::Path::new(&format!("/proc/{pgid}")).exists(),
        "chromedriver {pgid} outlived its Browser"
    );
    // SIGKILL is delivered at once, but a process leaves /proc when it is gone.
    let mut left = group_members(pgid);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = group_members(pgid);
    }
    assert_eq!(
        left,
        Vec::<u32>::new(),
        "processes of the group outlived it"
    );
}

/// Without Chromium a browser test skips with one line naming itself and
/// what is missing, and passes, so the rest of the suite runs; with
/// `CAIRN_REQUIRE_BROWSER` set it fails instead. This test binary is run
/// again with Chromium's path pointing nowhere.
#[test]
fn a_missing_chromium_skips_with_one_line_unless_required() {
    let exe = std::env::current_exe().unwrap();
    let rerun = |require: bool| {
        let mut cmd = std::process::Command::new(&exe);
        // A skip made on purpose: not one the test command's summary
        // should report.
        cmd.args(["--exact", "drives_a_page_and_leaves_nothing_running"])
            .env("CAIRN_CHROMIUM", "/nonexistent/chromium")
            .env_remove(cairn_testkit::browser::REQUIRE)
            .env_remove(cairn_testkit::SKIP_LOG);
        if require {
            cmd.env(cairn_testkit::browser::REQUIRE, "1");
        }
        cmd.output().unwrap()
    };
    let skipped = rerun(false);
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("skipped "))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0]
            .starts_with("skipped drives_a_page_and_leaves_nothing_running: chromium not found"),
        "{stderr}"
    );
    let required = rerun(true);
    assert!(
        !required.status.success(),
        "a required browser test passed without Chromium"
    );
}
