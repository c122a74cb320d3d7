//! What reaches a terminal: text from steps, models and API clients is
//! printed with its control characters escaped (no title set, no screen
//! cleared, no forged line), and no URL's password is printed.

use crate::support::{agent_sh, crew_toml, Case, Kind};

/// A step whose output is a string holding escape sequences (set the
/// window title, clear the screen, a carriage return): `run`'s text shows
/// them escaped, its JSON keeps the exact string.
#[test]
fn a_step_output_cannot_drive_the_terminal() {
    let case = Case::new(Kind::Sqlite);
    let evil = r#"cat > /dev/null; printf '"\\u001b]0;owned\\u0007\\u001b[2Jclean\\rforged"\n'"#;
    let crew = case.write("crew.toml", &crew_toml("evil", &[agent_sh("only", evil)]));
    let crew = crew.to_str().unwrap();
    let out = case.cairn(&["run", crew]).expect_code(0);
    for c in ['\u{1b}', '\u{7}', '\r'] {
        assert!(
            !out.stdout.contains(c),
            "{c:?} reached stdout: {:?}",
            out.stdout
        );
    }
    crate::support::assert_contains(&out.stdout, r"\u{1b}]0;owned\u{7}");
    let id = case.only_run_id();
    let json = case.show(&id);
    assert_eq!(
        json["steps"][0]["output"], "\u{1b}]0;owned\u{7}\u{1b}[2Jclean\rforged",
        "the JSON keeps the exact text"
    );
}

/// A thread id with a newline (as an API client may send) cannot forge a
/// line of `threads list`.
#[test]
fn a_thread_id_cannot_forge_a_line() {
    let case = Case::new(Kind::Sqlite);
    let crew = case.counting_crew(1);
    let forged = "t\n     1          0/0  2026-01-01T00:00:00.000Z  forged";
    case.cairn(&["run", crew.to_str().unwrap(), "--thread-id", forged])
        .expect_code(0);
    let out = case.cairn(&["threads", "list"]).expect_code(0);
    // The header and one line, which shows the newline escaped.
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    assert!(out.stdout.contains(r"t\u{a}     1"), "{}", out.stdout);
}

/// Client mode never prints the server URL's password, in the error that
/// says the server cannot be reached or in a suggested command.
#[test]
fn client_mode_does_not_print_the_urls_password() {
    let case = Case::new(Kind::Sqlite);
    for server in [
        "http://ops:s3cr3t@127.0.0.1:1",
        "http://ops:s3/cr3t@127.0.0.1:1/",
    ] {
        let out = case.raw(&["--server", server, "runs", "list"], &[]);
        assert_ne!(out.code(), Some(0));
        crate::support::assert_contains(&out.stderr, "cannot reach the server");
        assert!(
            !out.stderr.contains("s3cr3t") && !out.stderr.contains("cr3t"),
            "{}",
            out.stderr
        );
    }
}

/// `serve --public-url`: in development mode (no tokens) the public URL's
/// host is served besides the loopback names; any other `Host` is refused
/// (DNS rebinding).
#[test]
fn serve_public_url_is_a_host_development_mode_serves() {
    use std::io::{Read, Write};
    let case = Case::new(Kind::Sqlite);
    let served = crate::support::serve(&case, &["--public-url", "https://cairn.example.com/"], &[]);
    let status = |host: &str| -> String {
        let mut s = std::net::TcpStream::connect(&served.listen).unwrap();
        write!(
            s,
            "GET /v1/runs HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or_default().to_owned()
    };
    assert!(status("cairn.example.com").contains(" 200 "));
    assert!(status("127.0.0.1").contains(" 200 "));
    assert!(status("rebound.example").contains(" 400 "));
}
