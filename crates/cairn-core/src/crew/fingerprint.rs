//! A crew's fingerprint: what identifies one version of a crew wherever its
//! files lie. It covers the stored JSON form of the definition with every
//! directory left out (the crew's own and those of the crews its steps
//! start), so a crew file loaded from two places is one version.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{AgentKind, CrewDef};

/// A crew's fingerprint: `sha256:` and the first 16 hex digits of the SHA-256
/// of its stored JSON form without directories ([`CrewDef::without_dirs`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn from_stored(s: impl Into<String>) -> Self {
        Fingerprint(s.into())
    }
}

crate::ids::text_id!(Fingerprint);

impl CrewDef {
    /// The fingerprint: the SHA-256 of [`CrewDef::without_dirs`]'s JSON.
    /// A crew that starts no child crews has the fingerprint it had before
    /// nested directories were left out (only its own `dir` was), byte for
    /// byte.
    pub fn fingerprint(&self) -> Fingerprint {
        let canonical = self.without_dirs().to_json().to_string();
        let digest = Sha256::digest(canonical.as_bytes());
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Fingerprint(format!("sha256:{hex}"))
    }

    /// The definition with every `dir` cleared: its own, and those of the
    /// crews its steps start (a `children` step's, a delegation's), at any
    /// depth. What a fingerprint and a diff compare.
    pub fn without_dirs(&self) -> CrewDef {
        let mut def = self.clone();
        def.clear_dirs();
        def
    }

    fn clear_dirs(&mut self) {
        self.dir = None;
        for agent in &mut self.agents {
            let nested: Vec<&mut CrewDef> = match &mut agent.kind {
                AgentKind::Children(c) => c
                    .crew_def
                    .iter_mut()
                    .map(|d| d.as_mut())
                    .chain(c.child_crews.values_mut())
                    .collect(),
                AgentKind::Llm(llm) => llm.delegate_defs.iter_mut().collect(),
                AgentKind::Command { delegate_defs, .. } => delegate_defs.iter_mut().collect(),
                _ => Vec::new(),
            };
            nested.into_iter().for_each(CrewDef::clear_dirs);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The fingerprint as it was computed before nested directories were
    /// left out: the stored JSON without the top-level `dir` only.
    fn before(def: &CrewDef) -> String {
        let mut json = def.to_json();
        json.as_object_mut().unwrap().remove("dir");
        let digest = Sha256::digest(json.to_string().as_bytes());
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    fn crew(name: &str, dir: &str, agents: &str) -> CrewDef {
        let mut def = CrewDef::from_toml(&format!(
            "name = \"{name}\"\nversion = \"2\"\nupgrade = \"compatible\"\n\
             [budget]\nmodel_calls = 3\n{agents}"
        ))
        .unwrap();
        def.dir = Some(dir.into());
        def
    }

    const PLAIN: &str = "[[agents]]\nrole = \"plan\"\nkind = \"template\"\ntemplate = \"p\"\n\
        review = true\n\n[[agents]]\nrole = \"run\"\nkind = \"command\"\n\
        command = [\"./go.sh\"]\ntimeout_ms = 5\nenv = [\"X\"]\n";

    const FANOUT: &str = "[[agents]]\nrole = \"each\"\nkind = \"children\"\n\
        crew = \"topic.toml\"\nchildren = [{ key = \"a\", input = 1, crew = \"other.toml\" }]\n";

    /// `crew` with its `children` step's crews loaded from `dir`.
    fn fanout(dir: &str) -> CrewDef {
        let mut def = crew("topics", dir, FANOUT);
        let AgentKind::Children(c) = &mut def.agents[0].kind else {
            panic!("not a children step")
        };
        let mut topic = crew("topic", dir, PLAIN);
        topic.agents.truncate(1);
        c.crew_def = Some(Box::new(topic));
        c.child_crews
            .insert("other.toml".into(), crew("other", dir, PLAIN));
        def
    }

    #[test]
    fn a_crew_starting_no_child_crew_keeps_its_fingerprint_byte_for_byte() {
        for dir in ["/a", "/b/c"] {
            let def = crew("plain", dir, PLAIN);
            assert_eq!(def.fingerprint().as_str(), before(&def));
        }
        let mut built = crew("plain", "/a", PLAIN);
        built.dir = None;
        assert_eq!(built.fingerprint().as_str(), before(&built));
        // What `cairn submit` of this crew file stored before the change.
        assert_eq!(built.fingerprint().as_str(), "sha256:c5b22f1f48bc4453");
    }

    #[test]
    fn no_directory_at_any_depth_counts_but_everything_else_does() {
        let (here, there) = (fanout("/srv/crews"), fanout("/home/me/copy"));
        assert_ne!(here, there);
        assert_eq!(here.fingerprint(), there.fingerprint());
        assert_ne!(before(&here), before(&there), "what issue 46 saw");
        assert_eq!(here.without_dirs(), there.without_dirs());
        let mut changed = fanout("/srv/crews");
        let AgentKind::Children(c) = &mut changed.agents[0].kind else {
            panic!("not a children step")
        };
        c.crew_def.as_mut().unwrap().agents[0].review = false;
        assert_ne!(changed.fingerprint(), here.fingerprint());
    }
}
