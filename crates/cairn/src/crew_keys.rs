//! Which provider key each agent of a crew calls under (`cairn limits keys
//! CREW`), and whether a key an operator names is one a stored crew builds
//! (`limits set` and `limits list` mark one that none does: a trailing `/`
//! in a URL, a wrong variable name). The key itself is built where it is
//! used: `cairn_agent::limit_key_for` for an `llm` agent, a `command`
//! agent's `limit_key` labels.

use serde::Serialize;

use cairn_core::{AgentKind, CrewDef, KeyVars};

/// What a run fills in for a key narrowed by `"tenant"` or `"thread"`, as
/// the key is shown (`tenant=<tenant>`); a run without one leaves the part
/// out.
const PER_RUN: [(&str, &str); 2] = [("tenant", "<tenant>"), ("thread", "<thread>")];

/// The provider key one agent of a crew calls under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentKey {
    pub role: String,
    /// `llm` (its model calls) or `command` (its `limit_key`).
    pub kind: &'static str,
    /// The key; a part each run fills in is shown as `tenant=<tenant>` or
    /// `thread=<thread>`.
    pub key: String,
    /// The parts each run fills in, left out of the key of a run without
    /// one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_run: Vec<&'static str>,
}

/// The keys of `def`'s agents that call under one, in crew order.
pub fn agent_keys(def: &CrewDef) -> Vec<AgentKey> {
    def.agents
        .iter()
        .filter_map(|a| {
            let (kind, key, per_run) = match &a.kind {
                AgentKind::Llm(llm) => {
                    let vars = KeyVars {
                        tenant: Some(PER_RUN[0].1),
                        thread: Some(PER_RUN[1].1),
                        crew: Some(&def.name),
                    };
                    let per_run = PER_RUN
                        .iter()
                        .map(|(part, _)| *part)
                        .filter(|p| llm.limit_key.iter().any(|k| k == p))
                        .collect();
                    ("llm", cairn_agent::limit_key_for(llm, vars), per_run)
                }
                AgentKind::Command { limit_key, .. } if !limit_key.is_empty() => {
                    ("command", limit_key.join(","), vec![])
                }
                _ => return None,
            };
            Some(AgentKey {
                role: a.role.as_str().to_owned(),
                kind,
                key,
                per_run,
            })
        })
        .collect()
}

impl AgentKey {
    /// Whether a run of this agent may call under `key`: the same parts,
    /// with any value (or none) where a run fills one in.
    pub fn builds(&self, key: &str) -> bool {
        let mut given = key.split(',').peekable();
        for part in self.key.split(',') {
            match PER_RUN.iter().find(|(_, shown)| part.ends_with(shown)) {
                Some((name, _)) => {
                    let filled = given
                        .peek()
                        .and_then(|p| p.strip_prefix(name)?.strip_prefix('='));
                    if filled.is_some_and(|v| !v.is_empty()) {
                        given.next();
                    }
                }
                None if given.next() != Some(part) => return false,
                None => {}
            }
        }
        given.next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crew(toml: &str) -> CrewDef {
        CrewDef::from_toml(toml).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_llm_and_limited_command_agent_names_its_key() {
        let def = crew(
            "name = \"c\"\nversion = \"1\"\n\
             [[agents]]\nrole = \"a\"\nkind = \"llm\"\nprovider = \"openai\"\nmodel = \"m\"\n\
             base_url = \"https://x.test/v1/\"\n\
             [[agents]]\nrole = \"b\"\nkind = \"llm\"\nprovider = \"anthropic\"\nmodel = \"m\"\n\
             api_key_env = \"TEAM_KEY\"\nlimit_key = [\"model\", \"tenant\"]\n\
             [[agents]]\nrole = \"t\"\nkind = \"template\"\ntemplate = \"x\"\n\
             [[agents]]\nrole = \"s\"\nkind = \"command\"\ncommand = [\"true\"]\n\
             limit_key = [\"service=search\"]\n",
        );
        let keys = agent_keys(&def);
        let shown: Vec<(&str, &str, &str)> = keys
            .iter()
            .map(|k| (k.role.as_str(), k.kind, k.key.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (
                    "a",
                    "llm",
                    "provider=openai,url=https://x.test/v1,key=OPENAI_API_KEY"
                ),
                (
                    "b",
                    "llm",
                    "provider=anthropic,url=https://api.anthropic.com,key=TEAM_KEY,\
                     model=m,tenant=<tenant>"
                ),
                ("s", "command", "service=search"),
            ]
        );
        assert_eq!(keys[1].per_run, ["tenant"]);
    }

    #[test]
    fn a_key_is_built_with_any_runs_values_and_nothing_else() {
        let agent = AgentKey {
            role: "b".into(),
            kind: "llm",
            key: "provider=openai,url=https://x.test/v1,key=K,tenant=<tenant>".into(),
            per_run: vec!["tenant"],
        };
        for (key, built) in [
            ("provider=openai,url=https://x.test/v1,key=K", true),
            (
                "provider=openai,url=https://x.test/v1,key=K,tenant=acme",
                true,
            ),
            ("provider=openai,url=https://x.test/v1/,key=K", false),
            ("provider=openai,url=https://x.test/v1,key=K2", false),
            ("provider=openai,url=https://x.test/v1,key=K,tenant=", false),
            (
                "provider=openai,url=https://x.test/v1,key=K,thread=t",
                false,
            ),
        ] {
            assert_eq!(agent.builds(key), built, "{key}");
        }
    }
}
