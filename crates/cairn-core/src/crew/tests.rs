//! The crew file format: what parses, what is refused and how it says so.
use super::*;

const GOOD: &str = r#"
name = "research"
version = "1"
[[agents]]
role = "researcher"
kind = "command"
command = ["sh", "-c", "echo hi"]
[[agents]]
role = "writer"
kind = "template"
template = "{{ input.topic }}"
"#;

fn err(text: &str) -> String {
    match CrewDef::from_toml(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parses_minimum_shape() {
    let crew = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(crew.name, "research");
    assert_eq!(crew.step_count(), 2);
    assert_eq!(crew.agents[1].role.as_str(), "writer");
    assert!(matches!(crew.agents[0].kind, AgentKind::Command { .. }));
}

#[test]
fn env_and_inherit_env_parse_and_are_checked() {
    let before = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    let text = GOOD.replace(
        "command = [\"sh\", \"-c\", \"echo hi\"]",
        "command = [\"sh\", \"-c\", \"echo hi\"]\nenv = [\"GITHUB_TOKEN\", \"_X1\"]\ninherit_env = true",
    );
    let crew = CrewDef::from_toml(&text).unwrap_or_else(|e| panic!("{e}"));
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
    assert!(err(&bad).contains("`env` entry \"A=B\""), "{}", err(&bad));
    let on_template = GOOD.replace(
        "template = \"{{ input.topic }}\"",
        "template = \"{{ input.topic }}\"\nenv = [\"HOME\"]",
    );
    assert!(
        err(&on_template).contains("takes no `env`"),
        "{}",
        err(&on_template)
    );
}

#[test]
fn retry_policy_and_permanent_exit_codes_parse() {
    let text = GOOD.replace(
        "command = [\"sh\", \"-c\", \"echo hi\"]",
        "command = [\"sh\", \"-c\", \"echo hi\"]\npermanent_exit_codes = [2, 64]\ntimeout_ms = 30000\n\
         retry = { max_attempts = 5, initial_delay_ms = 100, multiplier = 3.0, max_delay_ms = 900, jitter = 0.1 }",
    );
    let crew = CrewDef::from_toml(&text).unwrap_or_else(|e| panic!("{e}"));
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
    let crew = CrewDef::from_toml(&partial).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(crew.agents[1].retry_policy().max_attempts, 1);
    assert_eq!(crew.agents[1].retry_policy().initial_delay_ms, 200);
    assert_eq!(crew.agents[0].retry_policy(), RetryPolicy::default());
}

#[test]
fn fingerprint_is_stable_and_sensitive() {
    let a = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    let b = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.fingerprint(), b.fingerprint());
    assert!(a.fingerprint().as_str().starts_with("sha256:"));
    let changed =
        CrewDef::from_toml(&GOOD.replace("echo hi", "echo bye")).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(a.fingerprint(), changed.fingerprint());
}

#[test]
fn stored_json_round_trips() {
    let a = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    let back: CrewDef = serde_json::from_value(a.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, back);
    assert_eq!(a.fingerprint(), back.fingerprint());
}

#[test]
fn bad_crews_are_refused_with_a_reason() {
    let cases: &[(&str, &str)] = &[
        ("name = ", "crew file is not valid: line 1, column 8"),
        ("name = \"x\"\nversion = \"1\"\n[[agents]\n", "line 3"),
        (
            &GOOD.replace("role = \"writer\"", "role = \"researcher\""),
            "role `researcher` appears more than once",
        ),
        (
            &GOOD.replace("kind = \"template\"", "kind = \"llmx\""),
            "unknown kind `llmx`",
        ),
        (
            &GOOD.replace("template = ", "tmpl = "),
            "unknown field `tmpl`",
        ),
        (
            &GOOD.replace("[\"sh\", \"-c\", \"echo hi\"]", "[]"),
            "empty `command`",
        ),
        ("name = \"x\"\nversion = \"1\"\n", "has no agents"),
        (
            &GOOD.replace(
                "kind = \"template\"",
                "kind = \"template\"\nretry = { max_attempts = 0 }",
            ),
            "bad `retry`: `max_attempts` must be at least 1",
        ),
        (
            &GOOD.replace(
                "kind = \"template\"",
                "kind = \"template\"\nretry = { tries = 2 }",
            ),
            "unknown field `tries`",
        ),
        (
            "name = \"x\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\n",
            "needs `template`",
        ),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert!(!got.contains('\n'), "one line: {got}");
        assert!(got.contains(want), "want `{want}` in `{got}`");
    }
}

const LLM: &str = r#"
name = "agents"
version = "1"
[[agents]]
role = "researcher"
kind = "llm"
provider = "openai"
model = "gpt-4o-mini"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_KEY"
instructions = "Find facts."
max_turns = 8
window_items = 40
[[agents.tools]]
name = "search"
description = "Search the web"
parameters = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
command = ["sh", "-c", "cat"]
idempotent = true
"#;

#[test]
fn llm_agents_parse_with_their_tools() {
    let crew = CrewDef::from_toml(LLM).unwrap_or_else(|e| panic!("{e}"));
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
    // The stored form round-trips, so a resume rebuilds the same agent.
    let stored = crew.to_json();
    let back: CrewDef = serde_json::from_value(stored).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, crew);
    assert_eq!(back.fingerprint(), crew.fingerprint());
}

#[test]
fn bad_llm_agents_are_refused_by_name() {
    let cases: &[(&str, &str)] = &[
        (
            &LLM.replace("provider = \"openai\"\n", ""),
            "needs `provider`",
        ),
        (
            &LLM.replace("model = \"gpt-4o-mini\"\n", ""),
            "needs `model`",
        ),
        (
            &LLM.replace("provider = \"openai\"", "provider = \"scripted\""),
            "needs `script = \"path\"`",
        ),
        (
            &LLM.replace("max_turns = 8", "max_turns = 0"),
            "`max_turns = 0`",
        ),
        (
            &LLM.replace("command = [\"sh\", \"-c\", \"cat\"]", "command = []"),
            "tool `search` with an empty `command`",
        ),
        (
            &LLM.replace("idempotent = true", "idempotent = true\nretries = 2"),
            "unknown field `retries`",
        ),
        (
            &LLM.replace("provider = \"openai\"", "provider = \"gemini\""),
            "unknown variant `gemini`",
        ),
        (
            &GOOD.replace(
                "template = \"{{ input.topic }}\"",
                "template = \"x\"\nmodel = \"m\"",
            ),
            "does not take `model`",
        ),
    ];
    for (text, want) in cases {
        let got = err(text);
        assert!(got.contains(want), "want `{want}` in `{got}`");
    }
}

const FANOUT: &str = r#"
name = "fan"
version = "1"
[[agents]]
role = "fan"
kind = "children"
crew = "child.toml"
over = "outputs.plan.items"
join = "quorum"
quorum = 2
concurrency = 4
"#;

#[test]
fn a_children_step_parses_and_its_rules_are_checked() {
    let crew = CrewDef::from_toml(FANOUT).unwrap_or_else(|e| panic!("{e}"));
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
    assert!(
        err(&both).contains("both `over` and `children`"),
        "{}",
        err(&both)
    );
    let no_quorum = FANOUT.replace("quorum = 2\n", "");
    assert!(
        err(&no_quorum).contains("needs `quorum = N`"),
        "{}",
        err(&no_quorum)
    );
    let bad_rule = FANOUT.replace("\"quorum\"", "\"most\"");
    assert!(err(&bad_rule).contains("line 9"), "{}", err(&bad_rule));
    let twice = FANOUT.replace(
        "over = \"outputs.plan.items\"",
        "children = [{ key = \"a\", input = 1 }, { key = \"a\", input = 2 }]",
    );
    assert!(
        err(&twice).contains("child key `a` twice"),
        "{}",
        err(&twice)
    );
    let stray = GOOD.replace("command = [", "join = \"all\"\ncommand = [");
    assert!(
        err(&stray).contains("does not take `join`"),
        "{}",
        err(&stray)
    );
}

const DELEGATING: &str = r#"
name = "lead"
version = "1"
[[agents]]
role = "lead"
kind = "llm"
provider = "openai"
model = "m"
delegate = ["research.toml", "write.toml"]
"#;

#[test]
fn llm_and_command_agents_may_delegate_and_nothing_else_may() {
    let crew = CrewDef::from_toml(DELEGATING).unwrap_or_else(|e| panic!("{e}"));
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
    let plain = CrewDef::from_toml(&plain).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plain.starts_children());

    let command = "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"r\"\nkind = \"command\"\n\
                   command = [\"true\"]\ndelegate = [\"x.toml\"]\n";
    let crew = CrewDef::from_toml(command).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        crew.agents[0].delegates().map(|(files, _)| files.to_vec()),
        Some(vec!["x.toml".to_owned()])
    );
    let template = "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"r\"\nkind = \"template\"\n\
                    template = \"x\"\ndelegate = [\"x.toml\"]\n";
    assert!(
        err(template).contains("does not take `delegate`"),
        "{}",
        err(template)
    );
    let empty = DELEGATING.replace("\"write.toml\"", "\"\"");
    assert!(
        err(&empty).contains("empty crew file in `delegate`"),
        "{}",
        err(&empty)
    );
    let clash =
        format!("{DELEGATING}\n[[agents.tools]]\nname = \"delegate\"\ncommand = [\"true\"]\n");
    assert!(
        err(&clash).contains("which `delegate` provides"),
        "{}",
        err(&clash)
    );
}

#[test]
fn limit_key_is_read_for_llm_and_command_agents_and_refused_elsewhere() {
    let command = |key: &str| {
        format!(
            "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"command\"\n\
             command = [\"true\"]\nlimit_key = [{key}]\n"
        )
    };
    let crew =
        CrewDef::from_toml(&command("\"service=scraper\"")).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(&crew.agents[0].kind,
        AgentKind::Command { limit_key, .. } if limit_key == &["service=scraper"]));
    for bad in ["\"model\"", "\"scraper\"", "\"a=b,c\""] {
        let e = err(&command(bad));
        assert!(e.contains("limit_key"), "{bad}: {e}");
    }
    let llm = "name = \"l\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"llm\"\n\
               provider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
               limit_key = [\"model\", \"team=research\"]\n";
    let crew = CrewDef::from_toml(llm).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(&crew.agents[0].kind,
        AgentKind::Llm(l) if l.limit_key == ["model", "team=research"]));
    let template = "name = \"t\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\n\
                    template = \"x\"\nlimit_key = [\"a=b\"]\n";
    assert!(err(template).contains("does not take `limit_key`"));
    // Unset, a crew's fingerprint is what it was.
    let plain = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plain.to_json().to_string().contains("limit_key"));
}

#[test]
fn limits_are_read_for_llm_and_keyed_command_agents_and_refused_saying_why() {
    let llm = |limits: &str| {
        format!(
            "name = \"l\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"llm\"\n\
             provider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\
             limits = {limits}\n"
        )
    };
    let crew =
        CrewDef::from_toml(&llm("{ rpm = 60, tpm = 20000 }")).unwrap_or_else(|e| panic!("{e}"));
    let want = crate::KeyLimits {
        in_flight: None,
        rpm: Some(60),
        tpm: Some(20000),
        max_pause_ms: None,
    };
    assert!(matches!(&crew.agents[0].kind, AgentKind::Llm(l) if l.limits == Some(want)));
    for (bad, says) in [
        ("{ rpm = 0 }", "bad `limits`: rpm must be between 1"),
        ("{}", "set none"),
        ("{ rps = 1 }", "rps"),
    ] {
        let e = err(&llm(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
    let command = |key: &str| {
        format!(
            "name = \"c\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"command\"\n\
             command = [\"true\"]\n{key}limits = {{ in_flight = 2 }}\n"
        )
    };
    let keyed = CrewDef::from_toml(&command("limit_key = [\"service=s\"]\n"));
    assert!(
        matches!(&keyed.unwrap_or_else(|e| panic!("{e}")).agents[0].kind,
        AgentKind::Command { limits: Some(l), .. } if l.in_flight == Some(2))
    );
    assert!(err(&command("")).contains("no `limit_key`"));
    let template = "name = \"t\"\nversion = \"1\"\n[[agents]]\nrole = \"a\"\nkind = \"template\"\n\
                    template = \"x\"\nlimits = { rpm = 1 }\n";
    assert!(err(template).contains("does not take `limits`"));
    let plain = CrewDef::from_toml(GOOD).unwrap_or_else(|e| panic!("{e}"));
    assert!(!plain.to_json().to_string().contains("limits"));
}

#[test]
fn approvers_parse_are_checked_and_absent_change_no_fingerprint() {
    let pay = |extra: &str| {
        format!(
            "name = \"pay\"\nversion = \"1\"\n[[agents]]\nrole = \"pay\"\nkind = \"template\"\n\
             template = \"x\"\n{extra}"
        )
    };
    let policy = "approval = \"before\"\n[agents.approvers]\nallow = [\"group:finance\", \
                  \"user:cto\"]\nrequired = 2\nself_approval = false\n";
    let crew = CrewDef::from_toml(&pay(policy)).unwrap_or_else(|e| panic!("{e}"));
    let want = crate::Approvers {
        allow: vec!["group:finance".into(), "user:cto".into()],
        required: 2,
        self_approval: false,
        one_reject_decides: true,
    };
    assert_eq!(crew.agents[0].approvers, Some(want));
    for (bad, says) in [
        (
            "approval = \"before\"\n[agents.approvers]\nallow = [\"finance\"]\n",
            "neither group:NAME",
        ),
        (
            "approval = \"before\"\n[agents.approvers]\nrequired = 0\n",
            "at least 1",
        ),
        (
            "approval = \"before\"\n[agents.approvers]\nquorum = 2\n",
            "quorum",
        ),
        (
            "[agents.approvers]\nrequired = 2\n",
            "never waits for a person",
        ),
    ] {
        let e = err(&pay(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
    let plain =
        CrewDef::from_toml(&pay("approval = \"before\"\n")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !plain.to_json().to_string().contains("approvers"),
        "absent: not stored"
    );
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
    for (body, says) in [
        ("kind = \"signal\"\n", "needs `signal` or `any_of`"),
        (
            "kind = \"signal\"\nsignal = \"a\"\nany_of = [\"b\"]\n",
            "not both",
        ),
        (
            "kind = \"signal\"\nsignal = \"\"\n",
            "a signal name must be 1 to 256 bytes",
        ),
        (
            "kind = \"signal\"\nsignal = \"a\"\ncommand = [\"true\"]\n",
            "does not take `command`",
        ),
        (
            "kind = \"signal\"\nsignal = \"a\"\nreview = true\n",
            "takes no `review`",
        ),
        (
            "kind = \"template\"\ntemplate = \"x\"\nsignal = \"a\"\n",
            "does not take `signal`",
        ),
    ] {
        let e = err(&format!("{head}{body}"));
        assert!(e.contains(says), "{body}: {e}");
    }
}
