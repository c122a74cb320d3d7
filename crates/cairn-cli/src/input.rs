//! What the user typed, read into Cairn's types before anything is opened
//! or sent: run and wait ids, thread ids, JSON values and `@FILE`s within
//! their caps, crews, answers. A mistake is a [`UsageError`] (exit 2).

use std::path::Path;

use serde_json::Value;

use cairn::{Answer, Crew, ExecutorConfig, RunId, WaitStatus};

/// An error in what the user typed: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

pub fn parse_run_id(s: &str) -> anyhow::Result<RunId> {
    s.parse::<RunId>().map_err(|e| usage(e.to_string()))
}

/// A `--thread` value, checked by the one rule (`cairn::ThreadId`).
pub fn parse_thread(arg: Option<String>) -> anyhow::Result<Option<String>> {
    arg.map(|t| {
        cairn::ThreadId::for_field(t, "--thread")
            .map(cairn::ThreadId::into_string)
            .map_err(|e| usage(e.to_string()))
    })
    .transpose()
}

/// The caps of a run input and an answer, checked here before anything is
/// opened (the engine checks them again).
pub fn caps() -> (usize, usize) {
    let limits = ExecutorConfig::default().limits;
    (limits.max_input_bytes, limits.max_answer_bytes)
}

/// Reads `path` (an `@FILE` of `flag`), at most `cap` bytes: a larger file
/// is refused without reading the rest (`@/dev/zero` ends at the cap).
pub fn read_capped(path: &str, flag: &str, cap: usize) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot read {flag} file {path}: {e}")))?;
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| usage(format!("cannot read {flag} file {path}: {e}")))?;
    if bytes.len() > cap {
        return Err(usage(format!(
            "{flag} file {path} is over the cap of {cap} bytes (reading stopped there)"
        )));
    }
    String::from_utf8(bytes).map_err(|_| usage(format!("{flag} file {path} is not UTF-8 text")))
}

/// A JSON value given as text or `@FILE`, within `cap` bytes (compact).
pub fn parse_json_arg(arg: &str, flag: &str, what: &str, cap: usize) -> anyhow::Result<Value> {
    let (text, origin) = match arg.strip_prefix('@') {
        Some(path) => (read_capped(path, flag, cap)?, format!("{flag} file {path}")),
        None => (arg.to_owned(), flag.to_owned()),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("{origin} is not valid JSON: {e}")))?;
    let size = value.to_string().len();
    if size > cap {
        return Err(usage(format!(
            "{what} is {size} bytes, over the cap of {cap} bytes"
        )));
    }
    Ok(value)
}

pub fn parse_input(arg: &str) -> anyhow::Result<Value> {
    parse_json_arg(arg, "--input", "the run input", caps().0)
}

pub fn load_crew(path: &Path) -> anyhow::Result<Crew> {
    Crew::from_file(path).map_err(|e| usage(e.to_string()))
}

/// The status `waits list` filters by: `--status`, else (in text) open
/// unless `--all`. The JSON array keeps its documented contents, every
/// wait, unless `--status` narrows it.
pub fn wait_status(status: Option<String>, all: bool) -> anyhow::Result<Option<WaitStatus>> {
    match status {
        Some(s) => Ok(Some(s.parse::<WaitStatus>().map_err(usage)?)),
        // `--json` changes the form, never the records: open ones too.
        None if all => Ok(None),
        None => Ok(Some(WaitStatus::Open)),
    }
}

/// The answer `waits answer` was given (clap lets only one through).
pub fn parse_answer(
    approve: bool,
    edit: Option<String>,
    reject: Option<String>,
    answer: Option<String>,
) -> anyhow::Result<Answer> {
    Ok(match (approve, edit, reject, answer) {
        (true, ..) => Answer::Approve,
        (_, Some(edit), ..) => Answer::Edit {
            output: parse_output_arg(&edit)?,
        },
        (_, _, Some(feedback), _) => Answer::Reject { feedback },
        (_, _, _, Some(value)) => Answer::Answer {
            value: parse_json_arg(&value, "--answer", "the answer", caps().1)?,
        },
        _ => return Err(usage("say --approve, --edit, --reject or --answer")),
    })
}

/// Who acts or answers: `--by`, else `$USER`, else `cli` (as every
/// `--by`'s help says).
pub fn answered_by(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "cli".to_owned())
}

/// An edited output: JSON if it parses, else the text itself (@FILE reads
/// a file, up to the answer cap).
pub fn parse_output_arg(arg: &str) -> anyhow::Result<Value> {
    let text = match arg.strip_prefix('@') {
        Some(path) => read_capped(path, "--edit", caps().1)?,
        None => arg.to_owned(),
    };
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.trim().to_owned())))
}

/// `resume --context`: a JSON object (or @FILE) within the input cap.
pub fn parse_context(text: &str) -> anyhow::Result<Value> {
    let value = parse_json_arg(text, "--context", "the context", caps().0)?;
    if !value.is_object() {
        return Err(usage(
            "--context: give a JSON object, such as '{\"hint\": \"…\"}'",
        ));
    }
    Ok(value)
}

/// A wait id as typed.
pub fn parse_wait_id(s: &str) -> anyhow::Result<cairn::WaitId> {
    s.parse::<cairn::WaitId>().map_err(usage)
}
