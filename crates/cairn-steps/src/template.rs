//! The `template` agent: renders a minijinja template from the step context.
//! Deterministic; undefined variables are errors, not empty strings, so a
//! typo in a template fails loudly instead of producing a blank step.
//!
//! A template is checked when its crew is loaded (syntax, filters, tests and
//! names it uses), so a typo refuses the crew before earlier steps have run.
//! Rendering happens off the async threads with a fuel limit and an output
//! cap: a template that loops for ever or grows without bound fails its step
//! instead of freezing the server, and the step's `timeout_ms` holds.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use minijinja::machinery::{get_compiled_template, Instruction, Instructions};
use minijinja::value::{Enumerator, Object, ObjectRepr, Value as JValue};
use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use cairn_core::Stop;
use cairn_core::{Agent, ErrorInfo, ErrorKind, StepContext, StepOutput};

/// The names a template sees (see [`TemplateAgent::variables`]).
pub const VARIABLES: &[&str] = &[
    "run_id", "input", "step", "previous", "thread", "feedback", "answers", "outputs", "children",
];

/// Instructions one render may execute (minijinja's fuel). Real templates
/// use thousands; a nested `range(100000)` would use billions.
pub const FUEL: u64 = 10_000_000;

/// The most a render may write, in bytes, before it is stopped.
pub const RENDER_CAP: usize = 16 << 20;

/// Why a template was refused when its crew was loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("does not compile: {0}")]
    Syntax(String),
    #[error("uses the filter `{0}`, which does not exist")]
    UnknownFilter(String),
    #[error("uses the test `{0}`, which does not exist")]
    UnknownTest(String),
    #[error("uses `{name}`, which is neither a variable nor a function (variables: {known})")]
    UnknownName { name: String, known: String },
}

/// Renders a template; the output is the rendered string.
#[derive(Debug, Clone)]
pub struct TemplateAgent {
    source: Arc<str>,
    fuel: u64,
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

/// The filters and tests a compiled template applies, by name.
fn filters_and_tests<'s>(
    code: &Instructions<'s>,
    filters: &mut BTreeSet<&'s str>,
    tests: &mut BTreeSet<&'s str>,
) {
    for i in 0..code.len() {
        match code.get(i as u32) {
            Some(Instruction::ApplyFilter(name, ..)) => {
                filters.insert(name);
            }
            Some(Instruction::PerformTest(name, ..)) => {
                tests.insert(name);
            }
            _ => {}
        }
    }
}

impl TemplateAgent {
    /// Compiles `source` and checks every filter, test and top-level name it
    /// uses, so a typo is refused before anything runs.
    pub fn new(source: String) -> Result<Self, TemplateError> {
        let env = env();
        let tmpl = env
            .template_from_str(&source)
            .map_err(|e| TemplateError::Syntax(describe(&e, &source)))?;
        let (mut filters, mut tests) = (BTreeSet::new(), BTreeSet::new());
        let compiled = get_compiled_template(&tmpl);
        filters_and_tests(&compiled.instructions, &mut filters, &mut tests);
        for block in compiled.blocks.values() {
            filters_and_tests(block, &mut filters, &mut tests);
        }
        // A probe is the only public way to ask minijinja whether it knows a
        // filter or a test.
        let unknown = |probe: String, kind: minijinja::ErrorKind| {
            env.render_str(&probe, ())
                .err()
                .is_some_and(|e| e.kind() == kind)
        };
        if let Some(f) = filters.iter().find(|f| {
            unknown(
                format!("{{{{ none | {f} }}}}"),
                minijinja::ErrorKind::UnknownFilter,
            )
        }) {
            return Err(TemplateError::UnknownFilter((*f).to_owned()));
        }
        if let Some(t) = tests.iter().find(|t| {
            unknown(
                format!("{{{{ none is {t} }}}}"),
                minijinja::ErrorKind::UnknownTest,
            )
        }) {
            return Err(TemplateError::UnknownTest((*t).to_owned()));
        }
        let globals: BTreeSet<&str> = env.globals().map(|(name, _)| name).collect();
        let mut undeclared: Vec<String> = tmpl.undeclared_variables(false).into_iter().collect();
        undeclared.sort();
        if let Some(name) = undeclared
            .into_iter()
            .find(|n| !VARIABLES.contains(&n.as_str()) && !globals.contains(n.as_str()))
        {
            return Err(TemplateError::UnknownName {
                name,
                known: VARIABLES.join(", "),
            });
        }
        Ok(TemplateAgent {
            source: source.into(),
            fuel: FUEL,
        })
    }

    /// Instructions one render may execute (default [`FUEL`]).
    pub fn fuel(mut self, fuel: u64) -> Self {
        self.fuel = fuel;
        self
    }

    /// The variables a template sees, as JSON: the context's JSON
    /// (`run_id`, `input`, `step`, `previous`, `thread`, `feedback`,
    /// `answers`) plus `outputs`, a map from role to output. Rendering uses
    /// the same names through [`Vars`], which converts only what a template
    /// reads.
    pub fn variables(cx: &StepContext) -> Value {
        let mut vars = match serde_json::to_value(cx) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let outputs: Map<String, Value> = cx
            .previous
            .iter()
            .map(|p| (p.role.to_string(), p.output.clone()))
            .collect();
        vars.insert("outputs".into(), Value::Object(outputs));
        // The outcomes alone, as the template sees them (not the join).
        let children = cx.children.as_ref().map_or(Value::Null, |j| {
            serde_json::to_value(&j.children).unwrap_or(Value::Null)
        });
        vars.insert("children".into(), children);
        Value::Object(vars)
    }
}

/// The template's variables, converted to minijinja values only when read.
/// Converting the whole context for every step made a crew's later steps
/// cost more with each earlier step (every output converted again per
/// step); now a step pays for what its template reads.
#[derive(Debug)]
struct Vars(StepContext);

impl Object for Vars {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let cx = &self.0;
        Some(match key.as_str()? {
            "run_id" => JValue::from(cx.run_id.to_string()),
            "input" => JValue::from_serialize(&cx.input),
            "step" => as_json(&cx.step),
            "previous" => JValue::from_object(Previous(Arc::clone(self))),
            "outputs" => JValue::from_object(Outputs(Arc::clone(self))),
            "thread" => as_json(&cx.thread),
            "feedback" => JValue::from_serialize(&cx.feedback),
            "answers" => JValue::from_serialize(&cx.answers),
            // A `children` step's outcomes, once joined (its template's
            // input); none elsewhere.
            "children" => match &cx.children {
                Some(joined) => JValue::from_serialize(&joined.children),
                None => JValue::from(()),
            },
            _ => return None,
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(VARIABLES)
    }
}

/// A struct through its JSON form, so its keys come sorted as the JSON
/// context's do (`{{ step }}` prints the same either way).
fn as_json(v: &impl serde::Serialize) -> JValue {
    JValue::from_serialize(serde_json::to_value(v).unwrap_or(Value::Null))
}

/// `previous`: a sequence whose items are converted when read.
#[derive(Debug)]
struct Previous(Arc<Vars>);

impl Object for Previous {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let i = usize::try_from(key.as_i64()?).ok()?;
        self.0 .0.previous.get(i).map(as_json)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0 .0.previous.len())
    }
}

/// `outputs`: role → output, looked up when read.
#[derive(Debug)]
struct Outputs(Arc<Vars>);

impl Object for Outputs {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &JValue) -> Option<JValue> {
        let role = key.as_str()?;
        let previous = &self.0 .0.previous;
        // The latest step of a role wins, as in the JSON map.
        previous
            .iter()
            .rev()
            .find(|p| p.role.as_str() == role)
            .map(|p| JValue::from_serialize(&p.output))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        // Sorted, as the JSON map's keys are.
        let mut roles: Vec<&str> = self.0 .0.previous.iter().map(|p| p.role.as_str()).collect();
        roles.sort_unstable();
        roles.dedup();
        let roles = roles.into_iter().map(JValue::from).collect();
        Enumerator::Values(roles)
    }
}

/// A writer that refuses to grow past [`RENDER_CAP`].
struct Capped(Vec<u8>);

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > RENDER_CAP {
            return Err(std::io::Error::other("render cap"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A render error in words a crew author can act on: what went wrong, the
/// expression it happened in, and the line.
fn describe(e: &minijinja::Error, source: &str) -> String {
    // minijinja's range may start at the failing attribute (`.nobody`):
    // widen it back over the path it belongs to (`outputs.nobody`).
    let at = e
        .range()
        .map(|r| {
            let head = source.get(..r.start).unwrap_or_default();
            let path =
                head.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "_.[]'\"".contains(c));
            path.len()..r.end
        })
        .and_then(|r| source.get(r))
        .map(|expr| format!(" in `{}`", expr.trim()))
        .unwrap_or_default();
    let line = e.line().map(|l| format!(" (line {l})")).unwrap_or_default();
    let what = match e.kind() {
        minijinja::ErrorKind::UndefinedError => "undefined value".to_owned(),
        minijinja::ErrorKind::OutOfFuel => {
            "the template ran out of fuel (too many instructions) and was stopped: a loop too large?"
                .to_owned()
        }
        minijinja::ErrorKind::WriteFailure => format!(
            "the template wrote more than {} MiB and was stopped",
            RENDER_CAP >> 20
        ),
        _ => e
            .detail()
            .map_or_else(|| e.kind().to_string(), |d| format!("{}: {d}", e.kind())),
    };
    format!("{what}{at}{line}")
}

/// Renders `source` with fuel and the output cap; blocking.
fn render(source: &str, vars: JValue, fuel: u64) -> Result<String, String> {
    let mut env = env();
    env.set_fuel(Some(fuel));
    let tmpl = env
        .template_from_str(source)
        .map_err(|e| describe(&e, source))?;
    let mut out = Capped(Vec::new());
    tmpl.render_captured_to(vars, &mut out)
        .map_err(|e| describe(&e, source))?;
    Ok(String::from_utf8_lossy(&out.0).into_owned())
}

#[async_trait]
impl Agent for TemplateAgent {
    async fn run(&self, cx: &StepContext) -> Result<StepOutput, Stop> {
        let (source, fuel) = (Arc::clone(&self.source), self.fuel);
        let vars = JValue::from_object(Vars(cx.data()));
        // Off the async threads: a heavy render never stalls the server, and
        // the step's timeout can fire while it runs (fuel ends it later).
        let rendered = tokio::task::spawn_blocking(move || render(&source, vars, fuel))
            .await
            .map_err(|e| ErrorInfo::new(ErrorKind::Template, format!("render task: {e}"), false))?
            .map_err(|why| {
                ErrorInfo::new(
                    ErrorKind::Template,
                    format!("template of agent `{}`: {why}", cx.step.role),
                    false,
                )
            })?;
        Ok(StepOutput::new(rendered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{PreviousOutput, Role, StepIdx};
    use serde_json::json;

    fn cx() -> StepContext {
        crate::fixtures::writer_after_researcher(json!({"facts": ["a", "b"]}))
    }

    #[tokio::test]
    async fn renders_input_outputs_and_previous() {
        let t = TemplateAgent::new(
            "{{ input.topic }}: {{ outputs.researcher.facts | join(', ') }} ({{ previous | length }} before step {{ step.idx }})".into(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let out = t.run(&cx()).await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(out.output, json!("rust: a, b (1 before step 1)"));
    }

    #[test]
    fn syntax_errors_are_caught_at_build() {
        assert!(matches!(
            TemplateAgent::new("{{ input.topic ".into()),
            Err(TemplateError::Syntax(_))
        ));
    }

    #[test]
    fn unknown_filters_tests_and_names_are_refused_at_build() {
        let cases = [
            (
                "{{ input.topic | shout }}",
                TemplateError::UnknownFilter("shout".into()),
            ),
            (
                "{% for x in previous %}{{ x.output | upper | nope(1) }}{% endfor %}",
                TemplateError::UnknownFilter("nope".into()),
            ),
            (
                "{% if input is bogus %}x{% endif %}",
                TemplateError::UnknownTest("bogus".into()),
            ),
        ];
        for (source, want) in cases {
            assert_eq!(
                TemplateAgent::new(source.into()).err(),
                Some(want),
                "{source}"
            );
        }
        for source in ["{{ inptu.topic }}", "{{ frobnicate(input) }}"] {
            let e = TemplateAgent::new(source.into()).err();
            assert!(
                matches!(&e, Some(TemplateError::UnknownName { name, .. }) if source.contains(name.as_str())),
                "{source}: {e:?}"
            );
        }
        // Known filters, tests, functions, loop and set variables all pass.
        for source in [
            "{{ input.topic | upper | trim }}{% if input is mapping %}m{% endif %}",
            "{% for p in previous %}{{ loop.index }}{{ p.role }}{% endfor %}",
            "{% set n = previous | length %}{{ n }}{{ range(3) | list }}{{ dict(a=1) }}",
            "{% macro m(x) %}{{ x }}{% endmacro %}{{ m(run_id) }}{{ thread }}{{ feedback }}{{ answers }}",
        ] {
            assert!(TemplateAgent::new(source.into()).is_ok(), "{source}");
        }
    }

    #[test]
    fn lazy_variables_render_as_the_json_context_does() {
        let mut cx = cx();
        cx.feedback = vec!["shorter".into()];
        cx.answers.insert("budget".into(), json!(12));
        std::sync::Arc::make_mut(&mut cx.previous).push(PreviousOutput {
            idx: StepIdx(1),
            role: Role::new("analyst"),
            output: json!(["x", {"k": null}]),
        });
        let lazy = || JValue::from_object(Vars(cx.data()));
        let eager = || JValue::from_serialize(TemplateAgent::variables(&cx));
        for source in [
            "{{ input.topic }} {{ run_id }} {{ step.idx }}/{{ step.role }}/{{ step.attempt }}",
            "{{ outputs.researcher.facts | join(',') }} {{ outputs['researcher'] }}",
            "{% for p in previous %}{{ p.idx }}:{{ p.role }}={{ p.output }};{% endfor %}",
            "{{ previous | length }} {{ previous[0].output.facts[1] }} {{ previous | map(attribute='role') | list }}",
            "{{ feedback }} {{ answers.budget }} {{ thread | length }} {{ outputs | length }}",
            "{% for role in outputs %}{{ role }}{% endfor %} {{ 'researcher' in outputs }}",
            "{{ input }}|{{ step }}",
        ] {
            let a = render(source, lazy(), FUEL);
            let b = render(source, eager(), FUEL);
            assert!(a.is_ok(), "{source}: {a:?}");
            assert_eq!(a, b, "{source}");
        }
        // Undefined stays an error through the lazy form.
        assert!(render("{{ outputs.nobody }}", lazy(), FUEL).is_err());
        assert!(render("{{ previous[5] }}", lazy(), FUEL).is_err());
    }

    #[test]
    fn the_variables_list_is_what_a_template_sees() {
        let vars = TemplateAgent::variables(&cx());
        let mut keys: Vec<&str> = vars
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        keys.sort();
        let mut known = VARIABLES.to_vec();
        known.sort();
        assert_eq!(keys, known);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_heavy_render_leaves_the_async_thread_free_so_a_timeout_fires() {
        let t = TemplateAgent::new(
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
                .into(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .fuel(2_000_000);
        // On the only async thread: were the render there, the timeout could
        // not fire before it finished, and `run` would return its result.
        let cx = cx();
        let r = tokio::time::timeout(std::time::Duration::from_millis(20), t.run(&cx)).await;
        assert!(
            r.is_err(),
            "the timeout should have cut the render off: {r:?}"
        );
    }

    #[tokio::test]
    async fn a_runaway_template_runs_out_of_fuel_instead_of_running_for_ever() {
        let t = TemplateAgent::new(
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
                .into(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .fuel(100_000);
        let err = crate::fixtures::failure(&t, &cx()).await;
        assert_eq!(err.kind, ErrorKind::Template);
        assert!(!err.retryable);
        assert!(err.message.contains("was stopped"), "{}", err.message);
    }

    #[tokio::test]
    async fn undefined_variables_fail_the_step_permanently() {
        let t = TemplateAgent::new("{{ outputs.nobody.text }}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let err = crate::fixtures::failure(&t, &cx()).await;
        assert_eq!(err.kind, ErrorKind::Template);
        assert!(!err.retryable);
        // It names the agent and the expression that was undefined.
        assert!(err.message.contains("agent `writer`"), "{}", err.message);
        assert!(err.message.contains("outputs.nobody"), "{}", err.message);
    }
}
