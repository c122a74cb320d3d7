//! The crew file format: what parses, what is refused and how it says so.
use super::*;

const GOOD: &str = include_str!("testdata/good.toml");
const LLM: &str = include_str!("testdata/llm.toml");
const FANOUT: &str = include_str!("testdata/fanout.toml");
const DELEGATING: &str = include_str!("testdata/delegating.toml");

fn parse(text: &str) -> CrewDef {
    CrewDef::from_toml(text).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    match CrewDef::from_toml(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// A crew `name` of one agent, `role`, whose other lines are `body`.
fn one_agent(name: &str, role: &str, body: &str) -> String {
    format!("name = \"{name}\"\nversion = \"1\"\n[[agents]]\nrole = \"{role}\"\n{body}")
}

/// Parsed and stored, `crew` reads back the same, fingerprint and all (so
/// a resume rebuilds the same agents).
#[track_caller]
fn round_trips(crew: &CrewDef) {
    let back: CrewDef = serde_json::from_value(crew.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&back, crew);
    assert_eq!(back.fingerprint(), crew.fingerprint());
}

/// A crew whose `text` leaves `key` out stores no `key`: its fingerprint
/// is what it was before the key existed.
#[track_caller]
fn unset_is_not_stored(text: &str, key: &str) {
    let stored = parse(text).to_json().to_string();
    assert!(!stored.contains(key), "absent `{key}`: not stored");
}

/// A template agent refuses `line`, which sets `key` (a key of the agents
/// that run a program or call a model); a crew without it stores none.
#[track_caller]
fn only_for_programs_and_models(line: &str, key: &str) {
    let template = format!("kind = \"template\"\ntemplate = \"x\"\n{line}");
    let says = format!("does not take `{key}`");
    refused(&one_agent("t", "a", &template), &says);
    unset_is_not_stored(GOOD, key);
}

/// `text` is refused, and the error says `says`.
#[track_caller]
fn refused(text: &str, says: &str) {
    let got = err(text);
    assert!(got.contains(says), "want `{says}` in `{got}`");
}

#[test]
fn parses_minimum_shape() {
    let crew = parse(GOOD);
    assert_eq!(crew.name, "research");
    assert_eq!(crew.step_count(), 2);
    assert_eq!(crew.agents[1].role.as_str(), "writer");
    assert!(matches!(crew.agents[0].kind, AgentKind::Command { .. }));
}

#[test]
fn env_and_inherit_env_parse_and_are_checked() {
    let before = parse(GOOD);
    let text = GOOD.replace(
        "command = [\"sh\", \"-c\", \"echo hi\"]",
        "command = [\"sh\", \"-c\", \"echo hi\"]\nenv = [\"GITHUB_TOKEN\", \"_X1\"]\ninherit_env = true",
    );
    let crew = parse(&text);
    assert_eq!(crew.agents[0].env, ["GITHUB_TOKEN", "_X1"]);
    assert!(crew.agents[0].inherit_env);
    assert_ne!(crew.fingerprint(), before.fingerprint());
    // Absent keys leave the stored form (and so the fingerprint) as before.
    assert!(before.to_json()["agents"][0].get("env").is_none());
    assert!(before.to_json()["agents"][0].get("inherit_env").is_none());
    let bad = GOOD.replace(
        "command = [\"sh\", \"-c\", \"echo hi\"]",
        "command = [\"sh\", \"-c\", \"echo hi\"]\nenv = [\"A=B\"]",
    );
    refused(&bad, "`env` entry \"A=B\"");
    let on_template = GOOD.replace(
        "template = \"{{ input.topic }}\"",
        "template = \"{{ input.topic }}\"\nenv = [\"HOME\"]",
    );
    refused(&on_template, "takes no `env`");
}

#[test]
fn retry_policy_and_permanent_exit_codes_parse() {
    let text = GOOD.replace(
        "command = [\"sh\", \"-c\", \"echo hi\"]",
        "command = [\"sh\", \"-c\", \"echo hi\"]\npermanent_exit_codes = [2, 64]\ntimeout_ms = 30000\n\
         retry = { max_attempts = 5, initial_delay_ms = 100, multiplier = 3.0, max_delay_ms = 900, jitter = 0.1 }",
    );
    let crew = parse(&text);
    let a = &crew.agents[0];
    assert_eq!(a.timeout_ms, Some(30000));
    let r = a.retry_policy();
    assert_eq!(
        (r.max_attempts, r.initial_delay_ms, r.max_delay_ms),
        (5, 100, 900)
    );
    assert!(
        matches!(&a.kind, AgentKind::Command { permanent_exit_codes, .. } if permanent_exit_codes == &[2, 64])
    );
    // Defaults apply to the fields not given, and to agents with no `retry`.
    let partial = GOOD.replace(
        "kind = \"template\"",
        "kind = \"template\"\nretry = { max_attempts = 1 }",
    );
    let crew = parse(&partial);
    assert_eq!(crew.agents[1].retry_policy().max_attempts, 1);
    assert_eq!(crew.agents[1].retry_policy().initial_delay_ms, 200);
    assert_eq!(crew.agents[0].retry_policy(), RetryPolicy::default());
}

#[test]
fn fingerprint_is_stable_and_sensitive() {
    let a = parse(GOOD);
    let b = parse(GOOD);
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert!(a.fingerprint().as_str().starts_with("sha256:"));
    let changed = parse(&GOOD.replace("echo hi", "echo bye"));
    assert_ne!(a.fingerprint(), changed.fingerprint());
}

#[test]
fn stored_json_round_trips() {
    round_trips(&parse(GOOD));
}

#[test]
fn bad_crews_are_refused_with_a_reason() {
    #[rustfmt::skip]
    let cases: &[(&str, &str)] = &[
        ("name = ", "crew file is not valid: line 1, column 8"),
        ("name = \"x\"\nversion = \"1\"\n[[agents]\n", "line 3"),
        (&GOOD.replace("role = \"writer\"", "role = \"researcher\""), "role `researcher` appears more than once"),
        (&GOOD.replace("kind = \"template\"", "kind = \"llmx\""), "unknown kind `llmx`"),
        (&GOOD.replace("template = ", "tmpl = "), "unknown field `tmpl`"),
        (&GOOD.replace("[\"sh\", \"-c\", \"echo hi\"]", "[]"), "empty `command`"),
        ("name = \"x\"\nversion = \"1\"\n", "has no agents"),
        (&GOOD.replace("kind = \"template\"", "kind = \"template\"\nretry = { max_attempts = 0 }"), "bad `retry`: `max_attempts` must be at least 1"),
        (&GOOD.replace("kind = \"template\"", "kind = \"template\"\nretry = { tries = 2 }"), "unknown field `tries`"),
        ("name = \"x\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\n", "needs `template`"),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert!(!got.contains('\n'), "one line: {got}");
        assert!(got.contains(want), "want `{want}` in `{got}`");
    }
}

#[test]
fn llm_agents_parse_with_their_tools() {
    let crew = parse(LLM);
    let AgentKind::Llm(llm) = &crew.agents[0].kind else {
        panic!("not an llm agent: {:?}", crew.agents[0].kind)
    };
    assert_eq!(llm.provider, crate::llm::ProviderKind::Openai);
    assert_eq!(llm.model, "gpt-4o-mini");
    assert_eq!(llm.max_turns(), 8);
    assert_eq!(llm.max_tokens(), crate::llm::LlmDef::DEFAULT_MAX_TOKENS);
    assert_eq!(llm.tools.len(), 1);
    assert!(llm.tools[0].idempotent);
    assert_eq!(
        llm.tools[0].parameters["required"],
        serde_json::json!(["q"])
    );
    round_trips(&crew);
}

#[test]
fn bad_llm_agents_are_refused_by_name() {
    #[rustfmt::skip]
    let cases: &[(&str, &str)] = &[
        (&LLM.replace("provider = \"openai\"\n", ""), "needs `provider`"),
        (&LLM.replace("model = \"gpt-4o-mini\"\n", ""), "needs `model`"),
        (&LLM.replace("provider = \"openai\"", "provider = \"scripted\""), "needs `script = \"path\"`"),
        (&LLM.replace("max_turns = 8", "max_turns = 0"), "`max_turns = 0`"),
        (&LLM.replace("command = [\"sh\", \"-c\", \"cat\"]", "command = []"), "tool `search` with an empty `command`"),
        (&LLM.replace("idempotent = true", "idempotent = true\nretries = 2"), "unknown field `retries`"),
        (&LLM.replace("provider = \"openai\"", "provider = \"gemini\""), "unknown variant `gemini`"),
        (&GOOD.replace("template = \"{{ input.topic }}\"", "template = \"x\"\nmodel = \"m\""), "does not take `model`"),
    ];
    for (text, want) in cases {
        refused(text, want);
    }
}

#[test]
fn a_children_step_parses_and_its_rules_are_checked() {
    let crew = parse(FANOUT);
    let AgentKind::Children(c) = &crew.agents[0].kind else {
        panic!("not a children step: {:?}", crew.agents[0].kind);
    };
    assert_eq!(c.crew, "child.toml");
    assert_eq!(c.over.as_deref(), Some("outputs.plan.items"));
    assert_eq!(
        (c.join, c.quorum, c.concurrency),
        (crate::JoinRule::Quorum, Some(2), Some(4))
    );
    assert!(c.crew_def.is_none(), "the file is resolved by the loader");

    let both = FANOUT.replace("concurrency = 4", "children = [{ key = \"a\", input = 1 }]");
    refused(&both, "both `over` and `children`");
    let no_quorum = FANOUT.replace("quorum = 2\n", "");
    refused(&no_quorum, "needs `quorum = N`");
    let bad_rule = FANOUT.replace("\"quorum\"", "\"most\"");
    refused(&bad_rule, "line 9");
    let twice = FANOUT.replace(
        "over = \"outputs.plan.items\"",
        "children = [{ key = \"a\", input = 1 }, { key = \"a\", input = 2 }]",
    );
    refused(&twice, "child key `a` twice");
    let stray = GOOD.replace("command = [", "join = \"all\"\ncommand = [");
    refused(&stray, "does not take `join`");
}

#[test]
fn llm_and_command_agents_may_delegate_and_nothing_else_may() {
    let crew = parse(DELEGATING);
    let AgentKind::Llm(l) = &crew.agents[0].kind else {
        panic!("not an llm agent: {:?}", crew.agents[0].kind);
    };
    assert_eq!(l.delegate, ["research.toml", "write.toml"]);
    assert!(
        l.delegate_defs.is_empty(),
        "the files are resolved by the loader"
    );
    assert!(crew.starts_children(), "a delegating agent starts children");
    let plain = DELEGATING.replace("delegate = [\"research.toml\", \"write.toml\"]\n", "");
    let plain = parse(&plain);
    assert!(!plain.starts_children());

    let command = "kind = \"command\"\ncommand = [\"true\"]\ndelegate = [\"x.toml\"]\n";
    let crew = parse(&one_agent("c", "r", command));
    assert_eq!(
        crew.agents[0].delegates().map(|(files, _)| files.to_vec()),
        Some(vec!["x.toml".to_owned()])
    );
    let template = "kind = \"template\"\ntemplate = \"x\"\ndelegate = [\"x.toml\"]\n";
    refused(&one_agent("c", "r", template), "does not take `delegate`");
    let empty = DELEGATING.replace("\"write.toml\"", "\"\"");
    refused(&empty, "empty crew file in `delegate`");
    let clash =
        format!("{DELEGATING}\n[[agents.tools]]\nname = \"delegate\"\ncommand = [\"true\"]\n");
    refused(&clash, "which `delegate` provides");
}

#[test]
fn limit_key_is_read_for_llm_and_command_agents_and_refused_elsewhere() {
    let command = |key: &str| {
        let body = format!("kind = \"command\"\ncommand = [\"true\"]\nlimit_key = [{key}]\n");
        one_agent("c", "a", &body)
    };
    let crew = parse(&command("\"service=scraper\""));
    assert!(matches!(&crew.agents[0].kind,
        AgentKind::Command { limit_key, .. } if limit_key == &["service=scraper"]));
    for bad in ["\"model\"", "\"scraper\"", "\"a=b,c\""] {
        refused(&command(bad), "limit_key");
    }
    let llm = one_agent(
        "l",
        "a",
        "kind = \"llm\"\nprovider = \"openai\"\nmodel = \"m\"\n\
         base_url = \"http://127.0.0.1:9/v1\"\nlimit_key = [\"model\", \"team=research\"]\n",
    );
    let crew = parse(&llm);
    assert!(matches!(&crew.agents[0].kind,
        AgentKind::Llm(l) if l.limit_key == ["model", "team=research"]));
    only_for_programs_and_models("limit_key = [\"a=b\"]\n", "limit_key");
}

#[test]
fn limits_are_read_for_llm_and_keyed_command_agents_and_refused_saying_why() {
    let llm = |limits: &str| {
        let body = format!(
            "kind = \"llm\"\nprovider = \"openai\"\nmodel = \"m\"\n\
             base_url = \"http://127.0.0.1:9/v1\"\nlimits = {limits}\n"
        );
        one_agent("l", "a", &body)
    };
    let crew = parse(&llm("{ rpm = 60, tpm = 20000 }"));
    let want = crate::KeyLimits {
        in_flight: None,
        rpm: Some(60),
        tpm: Some(20000),
        max_pause_ms: None,
    };
    assert!(matches!(&crew.agents[0].kind, AgentKind::Llm(l) if l.limits == Some(want)));
    #[rustfmt::skip]
    let cases = [
        ("{ rpm = 0 }", "bad `limits`: rpm must be between 1"),
        ("{}", "set none"),
        ("{ rps = 1 }", "rps"),
    ];
    for (bad, says) in cases {
        refused(&llm(bad), says);
    }
    let command = |key: &str| {
        let body = format!(
            "kind = \"command\"\ncommand = [\"true\"]\n{key}limits = {{ in_flight = 2 }}\n"
        );
        one_agent("c", "a", &body)
    };
    let keyed = CrewDef::from_toml(&command("limit_key = [\"service=s\"]\n"));
    assert!(
        matches!(&keyed.unwrap_or_else(|e| panic!("{e}")).agents[0].kind,
        AgentKind::Command { limits: Some(l), .. } if l.in_flight == Some(2))
    );
    refused(&command(""), "no `limit_key`");
    only_for_programs_and_models("limits = { rpm = 1 }\n", "limits");
}

#[test]
fn approvers_parse_are_checked_and_absent_change_no_fingerprint() {
    let pay = |extra: &str| {
        one_agent(
            "pay",
            "pay",
            &format!("kind = \"template\"\ntemplate = \"x\"\n{extra}"),
        )
    };
    let policy = "approval = \"before\"\n[agents.approvers]\nallow = [\"group:finance\", \
                  \"user:cto\"]\nrequired = 2\nself_approval = false\n";
    let crew = parse(&pay(policy));
    let want = crate::Approvers {
        allow: vec!["group:finance".into(), "user:cto".into()],
        required: 2,
        self_approval: false,
        one_reject_decides: true,
    };
    assert_eq!(crew.agents[0].approvers, Some(want));
    #[rustfmt::skip]
    let cases = [
        ("approval = \"before\"\n[agents.approvers]\nallow = [\"finance\"]\n", "neither group:NAME"),
        ("approval = \"before\"\n[agents.approvers]\nrequired = 0\n", "at least 1"),
        ("approval = \"before\"\n[agents.approvers]\nquorum = 2\n", "quorum"),
        ("[agents.approvers]\nrequired = 2\n", "never waits for a person"),
    ];
    for (bad, says) in cases {
        refused(&pay(bad), says);
    }
    unset_is_not_stored(&pay("approval = \"before\"\n"), "approvers");
}

#[test]
fn signal_steps_parse_and_are_checked() {
    let one = CrewDef::from_toml(
        r#"
name = "pay"
version = 1
[[agents]]
role = "paid"
kind = "signal"
signal = "payment"
timeout_ms = 5000
default = { status = "unpaid" }
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let AgentKind::Signal(s) = &one.agents[0].kind else {
        panic!("not a signal step: {:?}", one.agents[0].kind)
    };
    assert_eq!(s.names(), ["payment"]);
    assert_eq!(s.default, Some(serde_json::json!({"status": "unpaid"})));
    let listen = s.listen(one.agents[0].timeout_ms);
    assert_eq!(listen.timeout, Some(std::time::Duration::from_secs(5)));
    let any = CrewDef::from_toml(
        "name = \"c\"\nversion = 1\n[[agents]]\nrole = \"r\"\nkind = \"signal\"\nany_of = [\"a\", \"b\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(any.agents[0].kind.name(), "signal");
    let head = "name = \"c\"\nversion = 1\n[[agents]]\nrole = \"r\"\n";
    #[rustfmt::skip]
    let cases = [
        ("kind = \"signal\"\n", "needs `signal` or `any_of`"),
        ("kind = \"signal\"\nsignal = \"a\"\nany_of = [\"b\"]\n", "not both"),
        ("kind = \"signal\"\nsignal = \"\"\n", "a signal name must be 1 to 256 bytes"),
        ("kind = \"signal\"\nsignal = \"a\"\ncommand = [\"true\"]\n", "does not take `command`"),
        ("kind = \"signal\"\nsignal = \"a\"\nreview = true\n", "takes no `review`"),
        ("kind = \"template\"\ntemplate = \"x\"\nsignal = \"a\"\n", "does not take `signal`"),
    ];
    for (body, says) in cases {
        refused(&format!("{head}{body}"), says);
    }
}
