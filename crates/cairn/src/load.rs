//! Crew files: a crew file's definition with its relative paths resolved
//! and the crews its steps start children of loaded and stored inside it
//! (a `children` step's `crew`, a fixed child's own, an agent's
//! `delegate` list), by file relative to it, or by an offered crew's name
//! where a server resolves names.

use cairn_core::{AgentKind, CrewDef};

use crate::{Error, Result};

/// How many crew files deep `children` steps may name one another (a
/// crew file naming itself would otherwise never end).
const MAX_CREW_FILE_NESTING: u32 = 8;

/// Loads crew files; `offered` resolves a crew named instead of a file.
pub(crate) struct Loader<'a> {
    pub offered: &'a dyn Fn(&str) -> Option<CrewDef>,
}

/// Whether a step's `crew` is a name (`review`) rather than a file
/// (`review.toml`, `crews/review.toml`).
fn is_name(crew: &str) -> bool {
    !crew.ends_with(".toml") && !crew.contains('/')
}

impl Loader<'_> {
    /// A crew file's definition, its relative paths resolved against `base`
    /// and the crews its `children` steps name loaded from their files
    /// (stored inside it), `level` files deep.
    pub(crate) fn def_from_file(
        &self,
        text: &str,
        base: &std::path::Path,
        level: u32,
    ) -> Result<CrewDef> {
        let mut def = relative_to(CrewDef::from_toml(text)?, base);
        let name = def.name.clone();
        for a in &mut def.agents {
            match &mut a.kind {
                AgentKind::Children(children) => {
                    let child = self.child_crew(&name, &a.role, &children.crew, base, level)?;
                    children.crew_def = Some(Box::new(child));
                    for file in children.children.iter().filter_map(|c| c.crew.as_ref()) {
                        if !children.child_crews.contains_key(file) {
                            let own = self.child_crew(&name, &a.role, file, base, level)?;
                            children.child_crews.insert(file.clone(), own);
                        }
                    }
                }
                AgentKind::Llm(llm) if !llm.delegate.is_empty() => {
                    llm.delegate_defs =
                        self.delegated(&name, &a.role, &llm.delegate, base, level)?;
                }
                AgentKind::Command {
                    delegate,
                    delegate_defs,
                    ..
                } if !delegate.is_empty() => {
                    *delegate_defs = self.delegated(&name, &a.role, delegate, base, level)?;
                }
                _ => {}
            }
        }
        Ok(def)
    }

    /// The crews of an agent's `delegate` files, loaded.
    fn delegated(
        &self,
        parent: &str,
        role: &cairn_core::Role,
        files: &[String],
        base: &std::path::Path,
        level: u32,
    ) -> Result<Vec<CrewDef>> {
        let defs = files
            .iter()
            .map(|file| self.child_crew(parent, role, file, base, level))
            .collect::<Result<Vec<_>>>()?;
        let mut names = std::collections::HashSet::new();
        if let Some(twice) = defs.iter().find(|c| !names.insert(c.name.clone())) {
            return Err(Error::Crew(cairn_core::CrewError::Invalid {
                crew: parent.to_owned(),
                detail: format!(
                    "agent `{role}` delegates to two crews named `{}`; a child's crew is picked by name",
                    twice.name
                ),
            }));
        }
        Ok(defs)
    }

    /// The crew file `file` an agent of crew `parent` starts children of,
    /// read relative to `base`, `level` files deep.
    fn child_crew(
        &self,
        parent: &str,
        role: &cairn_core::Role,
        file: &str,
        base: &std::path::Path,
        level: u32,
    ) -> Result<CrewDef> {
        if level >= MAX_CREW_FILE_NESTING {
            return Err(Error::Crew(cairn_core::CrewError::Invalid {
                crew: parent.to_owned(),
                detail: format!(
                    "agent `{role}` names crew `{file}` {MAX_CREW_FILE_NESTING} files deep; \
                     crew files that start children nest at most that deep (a cycle?)"
                ),
            }));
        }
        if is_name(file) && !base.join(file).is_file() {
            return (self.offered)(file).ok_or_else(|| {
                Error::Crew(cairn_core::CrewError::Invalid {
                    crew: parent.to_owned(),
                    detail: format!(
                        "agent `{role}` names crew `{file}`, which is not a crew file and \
                         not a crew offered here; name its file (`{file}.toml`), or serve \
                         both crews from one `--crews` directory"
                    ),
                })
            });
        }
        let path = base.join(file);
        let text = std::fs::read_to_string(&path).map_err(|source| Error::ReadFile {
            path: path.clone(),
            source,
        })?;
        let child_base = path
            .parent()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .unwrap_or_else(|| base.to_owned());
        self.def_from_file(&text, &child_base, level + 1)
            .map_err(|e| match e {
                Error::Crew(source) => Error::CrewFile { path, source },
                e => e,
            })
    }
}

/// Makes a crew file's relative paths (an `llm` agent's `script`) relative
/// to the file's directory, so a crew runs the same from any directory.
fn relative_to(mut def: CrewDef, base: &std::path::Path) -> CrewDef {
    def.dir = Some(base.to_string_lossy().into_owned());
    for a in &mut def.agents {
        if let AgentKind::Llm(llm) = &mut a.kind {
            if let Some(script) = &mut llm.script {
                let p = std::path::Path::new(script.as_str());
                if p.is_relative() {
                    let joined = base.join(p);
                    *script = std::fs::canonicalize(&joined)
                        .unwrap_or(joined)
                        .to_string_lossy()
                        .into_owned();
                }
            }
        }
    }
    def
}
