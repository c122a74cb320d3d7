//! Fuzzing of the crew file parser (`CrewDef::from_toml`), bounded so it
//! runs in every `cargo test` (no nightly toolchain, so no libFuzzer: a
//! seeded proptest instead).
//!
//! - Generated crews (every kind and optional field, arbitrary Unicode in
//!   strings) are written as TOML and must parse back to the same `CrewDef`
//!   with the same fingerprint.
//! - Mutated crew files (generated crews, the examples and the parser's
//!   edge cases, cut, spliced and salted with TOML tokens; or with keys set
//!   to wrong types, edge numbers or removed) must never make
//!   the parser panic; every refusal is a `CrewError` whose message names
//!   the place (a line and column, or the crew and the agent or key), and
//!   every crew that parses round-trips through its stored JSON and through
//!   TOML again.
//!
//! `CAIRN_FUZZ_CASES=N` sets the number of cases of each property (default
//! 128 generated, 1,000 mutated as text, 500 edited as tables); `CAIRN_FUZZ_SEED=N` picks another seed
//! (default fixed, so CI is reproducible).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_core::{
    AgentDef, AgentKind, Answer, ApprovalPoint, CrewDef, CrewError, LlmDef, OnDeadline,
    ProviderKind, RetryPolicy, ToolDef,
};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{json, Value};

fn cases(default: u32) -> u32 {
    std::env::var("CAIRN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A runner with a fixed seed (or `CAIRN_FUZZ_SEED`) that writes no
/// regression files: a failure prints its minimal input instead.
fn runner(default_cases: u32) -> TestRunner {
    let seed = std::env::var("CAIRN_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x00ca_14f0);
    TestRunner::new(Config {
        cases: cases(default_cases),
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    })
}

// ---------------------------------------------------------------- writing

/// JSON as a TOML value; `None` for what TOML cannot hold (null).
fn toml_of(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64()?),
        },
        Value::String(s) => toml::Value::String(s.clone()),
        Value::Array(a) => toml::Value::Array(a.iter().map(toml_of).collect::<Option<_>>()?),
        Value::Object(o) => toml::Value::Table(
            o.iter()
                .map(|(k, v)| Some((k.clone(), toml_of(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

fn int(n: impl Into<i64>) -> toml::Value {
    toml::Value::Integer(n.into())
}

fn u64_value(n: u64) -> Option<toml::Value> {
    i64::try_from(n).ok().map(toml::Value::Integer)
}

/// A crew as its file: the inverse of `CrewDef::from_toml`. `None` if the
/// crew holds something a file cannot say (a JSON null, a u64 past i64).
fn write_toml(crew: &CrewDef) -> Option<String> {
    let mut root = toml::Table::new();
    root.insert("name".into(), crew.name.clone().into());
    root.insert("version".into(), crew.version.clone().into());
    let mut agents = Vec::new();
    for a in &crew.agents {
        let mut t = toml::Table::new();
        t.insert("role".into(), a.role.as_str().into());
        t.insert("kind".into(), a.kind.name().into());
        match &a.kind {
            AgentKind::Command {
                command,
                permanent_exit_codes,
                ..
            } => {
                t.insert("command".into(), command.clone().into());
                if !permanent_exit_codes.is_empty() {
                    let codes: Vec<toml::Value> =
                        permanent_exit_codes.iter().map(|c| int(*c)).collect();
                    t.insert("permanent_exit_codes".into(), codes.into());
                }
            }
            AgentKind::Template { template } => {
                t.insert("template".into(), template.clone().into());
            }
            // Not generated: a children step names a crew file; signal
            // steps have their own parse tests (`crew/tests.rs`).
            AgentKind::Rust { .. } | AgentKind::Children(_) | AgentKind::Signal(_) => return None,
            AgentKind::Llm(l) => write_llm(l, &mut t)?,
        }
        if let Some(ms) = a.timeout_ms {
            t.insert("timeout_ms".into(), u64_value(ms)?);
        }
        if let Some(r) = a.retry {
            let mut rt = toml::Table::new();
            rt.insert("max_attempts".into(), int(r.max_attempts));
            rt.insert("initial_delay_ms".into(), u64_value(r.initial_delay_ms)?);
            rt.insert("multiplier".into(), r.multiplier.into());
            rt.insert("max_delay_ms".into(), u64_value(r.max_delay_ms)?);
            rt.insert("jitter".into(), r.jitter.into());
            t.insert("retry".into(), rt.into());
        }
        if a.review {
            t.insert("review".into(), true.into());
        }
        if let Some(ApprovalPoint::Before) = a.approval {
            t.insert("approval".into(), "before".into());
        }
        if let Some(ms) = a.wait_deadline_ms {
            t.insert("wait_deadline_ms".into(), u64_value(ms)?);
        }
        match &a.on_deadline {
            None => {}
            Some(OnDeadline::Fail) => {
                t.insert("on_deadline".into(), "fail".into());
            }
            Some(OnDeadline::Default {
                answer: Answer::Approve,
            }) => {
                t.insert("on_deadline".into(), "approve".into());
            }
            Some(OnDeadline::Default {
                answer: Answer::Answer { value },
            }) => {
                let mut od = toml::Table::new();
                od.insert("answer".into(), toml_of(value)?);
                t.insert("on_deadline".into(), od.into());
            }
            Some(OnDeadline::Default { .. }) => return None,
        }
        if !a.env.is_empty() {
            let names: Vec<toml::Value> = a.env.iter().map(|n| n.as_str().into()).collect();
            t.insert("env".into(), names.into());
        }
        if a.inherit_env {
            t.insert("inherit_env".into(), true.into());
        }
        agents.push(toml::Value::Table(t));
    }
    root.insert("agents".into(), agents.into());
    toml::to_string(&root).ok()
}

fn write_llm(l: &LlmDef, t: &mut toml::Table) -> Option<()> {
    t.insert("provider".into(), l.provider.as_str().into());
    t.insert("model".into(), l.model.clone().into());
    let mut opt = |k: &str, v: Option<toml::Value>| {
        if let Some(v) = v {
            t.insert(k.into(), v);
        }
    };
    opt("instructions", l.instructions.clone().map(Into::into));
    opt("max_turns", l.max_turns.map(int));
    opt("base_url", l.base_url.clone().map(Into::into));
    opt("api_key_env", l.api_key_env.clone().map(Into::into));
    opt("max_tokens", l.max_tokens.map(int));
    opt("temperature", l.temperature.map(Into::into));
    opt("window_items", l.window_items.map(int));
    opt("window_tokens", l.window_tokens.map(int));
    opt("script", l.script.clone().map(Into::into));
    opt("thread_history", l.thread_history.map(Into::into));
    if l.ask_human {
        t.insert("ask_human".into(), true.into());
    }
    if let Some(ms) = l.stream_timeout_ms {
        t.insert("stream_timeout_ms".into(), u64_value(ms)?);
    }
    if !l.tools.is_empty() {
        let mut tools = Vec::new();
        for tool in &l.tools {
            let mut tt = toml::Table::new();
            tt.insert("name".into(), tool.name.clone().into());
            tt.insert("description".into(), tool.description.clone().into());
            tt.insert("parameters".into(), toml_of(&tool.parameters)?);
            tt.insert("command".into(), tool.command.clone().into());
            if tool.idempotent {
                tt.insert("idempotent".into(), true.into());
            }
            if let Some(ms) = tool.timeout_ms {
                tt.insert("timeout_ms".into(), u64_value(ms)?);
            }
            tools.push(toml::Value::Table(tt));
        }
        t.insert("tools".into(), tools.into());
    }
    Some(())
}

// ------------------------------------------------------------- generating

/// Any text, printable or not (quotes, newlines, NUL, emoji, …).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_-]{0,8}",
        "\\PC{0,12}",
        ".{0,12}",
        Just("\"'\\\n\t\u{0}é😀".to_owned()),
    ]
}

/// Text that is not blank (names and roles).
fn label() -> impl Strategy<Value = String> {
    text().prop_map(|s| format!("{s}x"))
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn small_u64() -> impl Strategy<Value = u64> {
    1..=i64::MAX as u64
}

fn retry() -> impl Strategy<Value = RetryPolicy> {
    (
        1u32..,
        0u64..1_000_000,
        1.0f64..100.0,
        0u64..1_000_000,
        0.0f64..=1.0,
    )
        .prop_map(
            |(max_attempts, initial, multiplier, extra, jitter)| RetryPolicy {
                max_attempts,
                initial_delay_ms: initial,
                multiplier,
                max_delay_ms: initial + extra,
                jitter,
            },
        )
}

fn tools() -> impl Strategy<Value = Vec<ToolDef>> {
    prop::collection::vec(
        (
            "[A-Za-z0-9_-]{0,8}",
            text(),
            json_value(),
            prop::collection::vec(text(), 0..3),
            label(),
            any::<bool>(),
            prop::option::of(small_u64()),
        ),
        0..3,
    )
    .prop_map(|tools| {
        tools
            .into_iter()
            .enumerate()
            // Tool names are unique, never `ask_human`, never empty.
            .map(
                |(i, (name, description, params, mut argv, prog, idem, ms))| {
                    argv.insert(0, prog);
                    ToolDef {
                        name: format!("{name}{i}"),
                        description,
                        parameters: json!({"type": "object", "x": params}),
                        command: argv,
                        idempotent: idem,
                        timeout_ms: ms,
                    }
                },
            )
            .collect()
    })
}

fn llm() -> impl Strategy<Value = LlmDef> {
    (
        prop_oneof![
            Just(ProviderKind::Openai),
            Just(ProviderKind::Anthropic),
            Just(ProviderKind::Scripted)
        ],
        label(),
        (
            prop::option::of(text()),
            prop::option::of(1u32..),
            prop::option::of(text()),
            prop::option::of(text()),
            prop::option::of(any::<u32>()),
            prop::option::of(0.0f64..=2.0),
        ),
        (
            prop::option::of(1u32..),
            prop::option::of(1u32..),
            prop::option::of(small_u64()),
            label(),
            any::<bool>(),
            prop::option::of(any::<bool>()),
        ),
        tools(),
    )
        .prop_map(
            |(provider, model, (ins, turns, url, key, max_tokens, temp), rest, tools)| {
                let (wi, wt, stream, script, ask_human, history) = rest;
                LlmDef {
                    instructions: ins,
                    max_turns: turns,
                    base_url: url,
                    api_key_env: key,
                    max_tokens,
                    temperature: temp,
                    window_items: wi,
                    window_tokens: wt,
                    stream_timeout_ms: stream,
                    script: (provider == ProviderKind::Scripted).then_some(script),
                    tools,
                    ask_human,
                    thread_history: history,
                    ..LlmDef::new(provider, model)
                }
            },
        )
}

fn kind() -> impl Strategy<Value = AgentKind> {
    prop_oneof![
        (
            label(),
            prop::collection::vec(text(), 0..4),
            prop::collection::vec(any::<i32>(), 0..3)
        )
            .prop_map(|(prog, mut argv, codes)| {
                argv.insert(0, prog);
                AgentKind::Command {
                    command: argv,
                    permanent_exit_codes: codes,
                    delegate: vec![],
                    delegate_defs: vec![],
                    max_children: None,
                    limit_key: vec![],
                    limits: None,
                }
            }),
        text().prop_map(|template| AgentKind::Template { template }),
        llm().prop_map(|l| AgentKind::Llm(Box::new(l))),
    ]
}

fn on_deadline() -> impl Strategy<Value = Option<OnDeadline>> {
    prop::option::of(prop_oneof![
        Just(OnDeadline::Fail),
        Just(OnDeadline::Default {
            answer: Answer::Approve
        }),
        json_value().prop_map(|value| OnDeadline::Default {
            answer: Answer::Answer { value }
        }),
    ])
}

fn agent() -> impl Strategy<Value = AgentDef> {
    (
        label(),
        kind(),
        prop::option::of(small_u64()),
        prop::option::of(retry()),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<u32>().prop_map(u64::from)),
        on_deadline(),
    )
        .prop_map(
            |(role, kind, timeout, retry, review, approval, deadline, on_deadline)| AgentDef {
                timeout_ms: timeout,
                retry,
                review,
                approval: approval.then_some(ApprovalPoint::Before),
                wait_deadline_ms: deadline,
                on_deadline,
                ..AgentDef::new(role, kind)
            },
        )
}

/// A valid crew: roles made unique by their index.
fn crew() -> impl Strategy<Value = CrewDef> {
    (label(), text(), prop::collection::vec(agent(), 1..5)).prop_map(
        |(name, version, mut agents)| {
            for (i, a) in agents.iter_mut().enumerate() {
                a.role = cairn_core::Role::new(format!("{}{i}", a.role));
            }
            CrewDef {
                name,
                version,
                agents,
                dir: None,
                budget: None,
                upgrade: None,
            }
        },
    )
}

// -------------------------------------------------------------- checking

/// How many inputs `check` saw parse, refused as syntax, refused as invalid.
static OUTCOMES: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// What every answer of the parser must satisfy: a crew that round-trips,
/// or a typed refusal that names its place.
fn check(text: &str) -> Result<(), TestCaseError> {
    let outcome = CrewDef::from_toml(text);
    let class = match &outcome {
        Ok(_) => 0,
        Err(CrewError::Syntax(_)) => 1,
        Err(_) => 2,
    };
    OUTCOMES[class].fetch_add(1, Ordering::Relaxed);
    match outcome {
        Ok(crew) => {
            prop_assert_eq!(crew.validate(), Ok(()));
            let stored: CrewDef = serde_json::from_value(crew.to_json())
                .map_err(|e| TestCaseError::fail(format!("stored JSON does not decode: {e}")))?;
            prop_assert_eq!(&stored, &crew);
            prop_assert_eq!(stored.fingerprint(), crew.fingerprint());
            // A crew that says something TOML cannot (a NaN in `parameters`
            // is stored as null) has no file form to compare.
            if let Some(again) = write_toml(&crew) {
                let back = CrewDef::from_toml(&again).map_err(|e| {
                    TestCaseError::fail(format!("its own file form is refused: {e}\n{again}"))
                })?;
                prop_assert_eq!(&back, &crew);
                prop_assert_eq!(back.fingerprint(), crew.fingerprint());
            }
        }
        Err(e) => {
            let message = e.to_string();
            match &e {
                CrewError::Syntax(detail) => {
                    prop_assert!(
                        names_a_line(detail),
                        "a syntax error that names no line: {message}"
                    );
                    prop_assert!(!detail.contains('\n'), "not one line: {message:?}");
                }
                CrewError::Invalid { crew, detail } => {
                    prop_assert!(
                        message.starts_with(&format!("crew `{crew}` is not valid: ")),
                        "{message}"
                    );
                    prop_assert!(
                        detail.contains("agent") || detail.contains("`name`"),
                        "a refusal that names neither an agent nor a key: {message}"
                    );
                }
                other => {
                    return Err(TestCaseError::fail(format!(
                        "an unknown kind of refusal: {other:?}"
                    )))
                }
            }
        }
    }
    Ok(())
}

/// `line L, column C: …`
fn names_a_line(detail: &str) -> bool {
    let Some(rest) = detail.strip_prefix("line ") else {
        return false;
    };
    let (line, rest) = rest.split_once(", column ").unwrap_or(("", ""));
    let column = rest.split_once(": ").map_or("", |(c, _)| c);
    line.parse::<u32>().is_ok_and(|l| l >= 1) && column.parse::<u32>().is_ok_and(|c| c >= 1)
}

// ---------------------------------------------------------------- mutating

/// Pieces of crew files the mutator splices in.
const TOKENS: &[&str] = &[
    "[[agents]]\n",
    "[[agents.tools]]\n",
    "[agents.retry]\n",
    "\n",
    " = ",
    "\"",
    "'''",
    "\"\"\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    "#",
    "\\",
    "\\u0000",
    "\\uD800",
    "name = \"n\"\n",
    "version = 1\n",
    "version = 1.5\n",
    "version = nan\n",
    "role = \"r\"\n",
    "role = \" \"\n",
    "kind = \"command\"\n",
    "kind = \"template\"\n",
    "kind = \"llm\"\n",
    "kind = \"rust\"\n",
    "command = []\n",
    "command = [\"\"]\n",
    "template = \"{{ x\"\n",
    "provider = \"scripted\"\n",
    "provider = \"openai\"\n",
    "script = \"s.toml\"\n",
    "model = \"\"\n",
    "max_turns = 0\n",
    "window_items = 0\n",
    "temperature = nan\n",
    "temperature = -0.0\n",
    "timeout_ms = 0\n",
    "timeout_ms = -1\n",
    "timeout_ms = 18446744073709551615\n",
    "retry = { max_attempts = 0 }\n",
    "retry = { multiplier = inf }\n",
    "retry = { jitter = nan }\n",
    "retry = { max_delay_ms = 1, initial_delay_ms = 2 }\n",
    "review = true\n",
    "approval = \"before\"\n",
    "approval = \"after\"\n",
    "on_deadline = \"approve\"\n",
    "on_deadline = \"never\"\n",
    "on_deadline = { answer = 1979-05-27T07:32:00Z }\n",
    "ask_human = true\n",
    "name = \"ask_human\"\n",
    "parameters = { type = \"object\", x = nan }\n",
    "idempotent = true\n",
    "é",
    "😀",
    "\u{0}",
    "\r\n",
    "\t",
    "0x7fffffffffffffff",
    "1e400",
    "-",
];

/// Crew files to start from besides generated ones.
const SEEDS: &[&str] = &[
    include_str!("../../../examples/research.toml"),
    include_str!("../../../examples/review.toml"),
    include_str!("../../../examples/agents/crew.toml"),
    "name = \"x\"\nversion = \"1\"\n",
    "",
];

#[derive(Debug, Clone)]
enum Edit {
    /// Whole-line edits keep the TOML mostly valid, so they reach the
    /// crew rules; character edits reach the TOML grammar.
    DeleteLine {
        at: usize,
    },
    DuplicateLine {
        at: usize,
        to: usize,
    },
    InsertLine {
        at: usize,
        token: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Duplicate {
        at: usize,
        len: usize,
        to: usize,
    },
    Insert {
        at: usize,
        token: usize,
    },
    Replace {
        at: usize,
        with: char,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>;
    prop_oneof![
        1 => at().prop_map(|at| Edit::DeleteLine { at }),
        1 => (at(), at()).prop_map(|(at, to)| Edit::DuplicateLine { at, to }),
        3 => (at(), 0..TOKENS.len()).prop_map(|(at, token)| Edit::InsertLine { at, token }),
        1 => (at(), 1usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        1 => (at(), 1usize..80, at()).prop_map(|(at, len, to)| Edit::Duplicate { at, len, to }),
        1 => (at(), 0..TOKENS.len()).prop_map(|(at, token)| Edit::Insert { at, token }),
        1 => (at(), any::<char>()).prop_map(|(at, with)| Edit::Replace { at, with }),
    ]
}

/// Applies edits to the lines or characters of `text` (so the result stays
/// a `str`).
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let n = chars.len();
        let s: String = chars.iter().collect();
        let mut lines: Vec<String> = s.split_inclusive('\n').map(str::to_owned).collect();
        let lines_n = lines.len();
        match *e {
            Edit::DeleteLine { at } if lines_n > 0 => {
                lines.remove(at % lines_n);
                chars = lines.concat().chars().collect();
            }
            Edit::DuplicateLine { at, to } if lines_n > 0 => {
                let line = lines[at % lines_n].clone();
                lines.insert(to % (lines_n + 1), line);
                chars = lines.concat().chars().collect();
            }
            Edit::InsertLine { at, token } => {
                let token = TOKENS[token].trim_end_matches('\n');
                lines.insert(at % (lines_n + 1), format!("{token}\n"));
                if let Some(prev) = lines.get_mut((at % (lines_n + 1)).wrapping_sub(1)) {
                    if !prev.ends_with('\n') {
                        prev.push('\n');
                    }
                }
                chars = lines.concat().chars().collect();
            }
            Edit::Delete { at, len } if n > 0 => {
                let at = at % n;
                chars.drain(at..(at + len).min(n));
            }
            Edit::Duplicate { at, len, to } if n > 0 => {
                let at = at % n;
                let piece: Vec<char> = chars[at..(at + len).min(n)].to_vec();
                let to = to % (n + 1);
                chars.splice(to..to, piece);
            }
            Edit::Insert { at, token } => {
                let at = at % (n + 1);
                chars.splice(at..at, TOKENS[token].chars());
            }
            Edit::Replace { at, with } if n > 0 => chars[at % n] = with,
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Keys of a crew file (and some it does not have).
const KEYS: &[&str] = &[
    "name",
    "version",
    "role",
    "kind",
    "command",
    "template",
    "timeout_ms",
    "retry",
    "permanent_exit_codes",
    "review",
    "approval",
    "wait_deadline_ms",
    "on_deadline",
    "env",
    "inherit_env",
    "provider",
    "model",
    "instructions",
    "max_turns",
    "base_url",
    "api_key_env",
    "max_tokens",
    "temperature",
    "window_items",
    "window_tokens",
    "stream_timeout_ms",
    "script",
    "tools",
    "ask_human",
    "thread_history",
    "handler",
    "agents",
    "parameters",
    "idempotent",
];

/// Values to put under those keys: right and wrong types, edge numbers.
fn some_value() -> impl Strategy<Value = toml::Value> {
    prop_oneof![
        Just(toml::Value::Integer(0)),
        Just(toml::Value::Integer(-1)),
        Just(toml::Value::Integer(i64::MAX)),
        Just(toml::Value::Float(f64::NAN)),
        Just(toml::Value::Float(f64::INFINITY)),
        Just(toml::Value::Float(-0.0)),
        Just(toml::Value::Boolean(true)),
        Just(toml::Value::String(String::new())),
        Just(toml::Value::String(" ".into())),
        prop_oneof![
            Just("command"),
            Just("template"),
            Just("llm"),
            Just("rust"),
            Just("scripted"),
            Just("openai"),
            Just("before"),
            Just("fail"),
            Just("approve")
        ]
        .prop_map(|s| toml::Value::String(s.into())),
        text().prop_map(toml::Value::String),
        Just(toml::Value::Array(vec![])),
        Just(toml::Value::Array(vec!["".into()])),
        Just(toml::Value::Table(toml::Table::new())),
        Just(toml::Value::Array(vec![toml::Value::Table(
            toml::Table::new()
        )])),
        json_value().prop_filter_map("TOML-able", |v| toml_of(&v)),
    ]
}

/// One edit of a crew file's tables: set or remove a key at the top, in
/// an agent, in its `retry` or in its first tool.
#[derive(Debug, Clone)]
struct TableEdit {
    place: u8,
    agent: usize,
    key: usize,
    value: Option<toml::Value>,
}

fn table_edit() -> impl Strategy<Value = TableEdit> {
    (
        0u8..4,
        any::<usize>(),
        0..KEYS.len(),
        prop::option::of(some_value()),
    )
        .prop_map(|(place, agent, key, value)| TableEdit {
            place,
            agent,
            key,
            value,
        })
}

fn apply(text: &str, edits: &[TableEdit]) -> Option<String> {
    let mut root: toml::Table = toml::from_str(text).ok()?;
    for e in edits {
        let agents = root.get_mut("agents").and_then(|a| a.as_array_mut());
        let table = match (e.place, agents) {
            (0, _) | (_, None) => Some(&mut root),
            (_, Some(agents)) if agents.is_empty() => None,
            (place, Some(agents)) => {
                let n = agents.len();
                let agent = agents[e.agent % n].as_table_mut();
                match place {
                    1 => agent,
                    2 => agent
                        .and_then(|a| a.get_mut("retry"))
                        .and_then(|r| r.as_table_mut()),
                    _ => agent
                        .and_then(|a| a.get_mut("tools"))
                        .and_then(|t| t.as_array_mut())
                        .and_then(|t| t.first_mut())
                        .and_then(|t| t.as_table_mut()),
                }
            }
        };
        if let Some(table) = table {
            match &e.value {
                Some(v) => table.insert(KEYS[e.key].into(), v.clone()),
                None => table.remove(KEYS[e.key]),
            };
        }
    }
    toml::to_string(&root).ok()
}

fn seed_text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => (0..SEEDS.len()).prop_map(|i| SEEDS[i].to_owned()),
        3 => crew().prop_filter_map("a crew with a file form", |c| write_toml(&c)),
    ]
}

// ------------------------------------------------------------------- tests

#[test]
fn generated_crews_round_trip_through_their_file() {
    runner(128)
        .run(&crew(), |crew| {
            prop_assert_eq!(crew.validate(), Ok(()));
            let text = write_toml(&crew).expect("a generated crew has a file form");
            let parsed = CrewDef::from_toml(&text)
                .map_err(|e| TestCaseError::fail(format!("refused: {e}\n{text}")))?;
            prop_assert_eq!(&parsed, &crew);
            prop_assert_eq!(parsed.fingerprint(), crew.fingerprint());
            check(&text)
        })
        .unwrap();
}

#[test]
fn mutated_crew_files_never_panic_and_refusals_name_the_place() {
    runner(1000)
        .run(
            &(seed_text(), prop::collection::vec(edit(), 1..6)),
            |(seed, edits)| check(&mutate(&seed, &edits)),
        )
        .unwrap();
    // Not vacuous: the mutations reach all three answers (the counts are
    // shared with the other tests of this file, which only add to them).
    let [ok, syntax, invalid] = OUTCOMES.each_ref().map(|c| c.load(Ordering::Relaxed));
    println!("crew fuzz: {ok} parsed, {syntax} syntax errors, {invalid} invalid crews");
    assert!(
        ok > 0 && syntax > 0 && invalid > 0,
        "{ok} / {syntax} / {invalid}"
    );
}

#[test]
fn crew_files_with_wrong_keys_and_values_are_refused_by_place() {
    runner(500)
        .run(
            &(crew(), prop::collection::vec(table_edit(), 1..4)),
            |(crew, edits)| {
                let text = write_toml(&crew).expect("a generated crew has a file form");
                match apply(&text, &edits) {
                    Some(edited) => check(&edited),
                    None => Ok(()),
                }
            },
        )
        .unwrap();
    let [ok, syntax, invalid] = OUTCOMES.each_ref().map(|c| c.load(Ordering::Relaxed));
    println!("crew fuzz (tables): {ok} parsed, {syntax} syntax errors, {invalid} invalid crews");
}

/// The parser's edge cases, each checked by the same rules (a fixed corpus
/// that the mutations above start from in spirit, kept as plain inputs).
#[test]
fn edge_cases_obey_the_same_rules() {
    let base = "name = \"x\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"command\"\ncommand = [\"true\"]\n";
    let mut inputs: Vec<String> = TOKENS.iter().map(|t| format!("{base}{t}")).collect();
    inputs.extend(TOKENS.iter().map(|t| (*t).to_owned()));
    inputs.extend(SEEDS.iter().map(|s| (*s).to_owned()));
    inputs.push("version = \"1\"\n".into());
    inputs.push("name = \"x\"\n".into());
    inputs.push(format!(
        "{base}[[agents]]\nrole = \"a\"\nkind = \"template\"\ntemplate = \"t\"\n"
    ));
    for text in &inputs {
        if let Err(e) = check(text) {
            panic!("{e}\ninput:\n{text}");
        }
    }
}
