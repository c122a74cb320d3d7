//! Tests that skip (a tool this machine lacks) say so twice: one line on
//! stderr at once, and one line in the file `CAIRN_SKIP_LOG` names, which
//! the README's test command (`just test`) sums up as the last line of the
//! run, so a skip never passes unseen among thousands of lines. Each
//! line of the file is `TEST<tab>WHY`.

use std::io::Write;
use std::path::Path;

/// The variable naming the file each skip is appended to.
pub const SKIP_LOG: &str = "CAIRN_SKIP_LOG";

/// Records that `test` skipped because `why` (which says what to install).
pub fn skip(test: &str, why: &str) {
    let log = std::env::var_os(SKIP_LOG);
    skip_to(log.as_deref().map(Path::new), test, why);
}

/// [`skip`] with the log named (none: stderr only).
pub fn skip_to(log: Option<&Path>, test: &str, why: &str) {
    let _ = writeln!(std::io::stderr(), "skipped {test}: {why}");
    let Some(log) = log else {
        return;
    };
    // `TEST<tab>WHY`, each on one line.
    let flat = |s: &str| s.replace(['\n', '\t'], " ");
    let line = format!("{}\t{}", flat(test), flat(why));
    // One short line per write: appends of a line do not interleave.
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log);
    if let Ok(mut file) = file {
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_skip_is_one_line_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skipped.log");
        skip_to(
            Some(&log),
            "browser::a",
            "chromium not found\n(apt-get install chromium)",
        );
        skip_to(Some(&log), "pooler::b", "pgbouncer is not installed");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text,
            "browser::a\tchromium not found (apt-get install chromium)\n\
             pooler::b\tpgbouncer is not installed\n"
        );
    }

    /// The test command's last line (`scripts/skipped-summary`) counts the
    /// skips and names each reason once.
    #[test]
    fn the_summary_line_names_each_reason_once() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skipped.log");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/skipped-summary");
        let summary = |log: &Path| {
            let out = std::process::Command::new(&script)
                .arg(log)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(summary(&log), "cairn tests: nothing skipped\n");
        skip_to(Some(&log), "browser::a", "chromium not found");
        skip_to(Some(&log), "browser::b", "chromium not found");
        skip_to(Some(&log), "pooler::c", "pgbouncer is not installed");
        assert_eq!(
            summary(&log),
            "cairn tests: SKIPPED 3 tests, counted as passed: 2 × chromium not found; \
             1 × pgbouncer is not installed\n"
        );
    }
}
