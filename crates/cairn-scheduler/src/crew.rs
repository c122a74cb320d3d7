//! A crew ready to execute: its definition plus one agent per role.

use std::sync::Arc;

use cairn_core::{Agent, AgentDef, CrewDef, CrewError, Fingerprint, StepIdx};

/// A validated crew definition with an agent for every entry.
#[derive(Clone)]
pub struct Crew {
    def: CrewDef,
    fingerprint: Fingerprint,
    agents: Vec<Arc<dyn Agent>>,
}

impl std::fmt::Debug for Crew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crew")
            .field("name", &self.def.name)
            .field("fingerprint", &self.fingerprint)
            .field("agents", &self.agents.len())
            .finish()
    }
}

impl Crew {
    /// Pairs a definition with its agents (same order, same length).
    pub fn new(def: CrewDef, agents: Vec<Arc<dyn Agent>>) -> Result<Crew, CrewError> {
        def.validate()?;
        if def.agents.len() != agents.len() {
            return Err(CrewError::Invalid {
                crew: def.name.clone(),
                detail: format!(
                    "{} agents defined but {} executors given",
                    def.agents.len(),
                    agents.len()
                ),
            });
        }
        let fingerprint = def.fingerprint();
        Ok(Crew {
            def,
            fingerprint,
            agents,
        })
    }

    pub fn def(&self) -> &CrewDef {
        &self.def
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    pub fn agent(&self, idx: StepIdx) -> Option<(&AgentDef, &Arc<dyn Agent>)> {
        let i = idx.as_usize();
        Some((self.def.agents.get(i)?, self.agents.get(i)?))
    }
}
