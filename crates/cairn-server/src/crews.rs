//! The crews a server offers: every `*.toml` file of one directory, loaded
//! once at startup. A file that does not load stops the startup, naming it.
//! Several versions of one crew may be offered at once (a deploy keeps the
//! old file beside the new one): a submit takes the newest
//! (`cairn::upgrade::version_order`) unless it names one, and runs of
//! every loaded version can be acted on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn::upgrade::version_order;
use cairn::Crew;

use crate::Error;

/// Crews by name, each version with the file it came from, oldest
/// version first.
#[derive(Debug, Clone, Default)]
pub struct Crews {
    by_name: BTreeMap<String, Vec<(Crew, PathBuf)>>,
}

impl Crews {
    /// Loads every `*.toml` file directly inside `dir` (sorted by file
    /// name; other files and subdirectories are ignored).
    pub fn load_dir(dir: &Path) -> Result<Crews, Error> {
        let dir_error = |source| Error::CrewsDir {
            path: dir.to_owned(),
            source,
        };
        let mut files = vec![];
        for entry in std::fs::read_dir(dir).map_err(dir_error)? {
            let path = entry.map_err(dir_error)?.path();
            if path.is_file() && path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
        files.sort();
        // A step may start children of an offered crew by name: files are
        // loaded in passes, each resolving names against the crews loaded
        // so far, until a pass loads nothing more; a file that still does
        // not load then stops the startup with its own error.
        let mut crews = Crews::default();
        let mut left = files;
        loop {
            let mut failed = vec![];
            let before = left.len();
            for path in left {
                let offered = |name: &str| crews.get(name).map(|c| c.def().clone());
                match Crew::from_file_offering(&path, &offered) {
                    Ok(crew) => crews.insert(crew, path)?,
                    Err(source) => failed.push((path, source)),
                }
            }
            if failed.is_empty() {
                return Ok(crews);
            }
            if failed.len() == before {
                let (path, source) = failed.swap_remove(0);
                if !names_a_crew(&path) {
                    return Err(Error::NotACrew { path });
                }
                return Err(Error::CrewFile {
                    path,
                    source: Box::new(source),
                });
            }
            left = failed.into_iter().map(|(path, _)| path).collect();
        }
    }

    /// Adds a crew; refused if another file has its name and version.
    pub fn insert(&mut self, crew: Crew, path: PathBuf) -> Result<(), Error> {
        let name = crew.def().name.clone();
        let versions = self.by_name.entry(name.clone()).or_default();
        if let Some((_, first)) = versions
            .iter()
            .find(|(c, _)| c.def().version == crew.def().version)
        {
            return Err(Error::DuplicateCrew {
                name,
                version: crew.def().version.clone(),
                first: first.clone(),
                second: path,
            });
        }
        versions.push((crew, path));
        versions.sort_by(|(a, _), (b, _)| version_order(&a.def().version, &b.def().version));
        Ok(())
    }

    /// The newest version of crew `name`.
    pub fn get(&self, name: &str) -> Option<&Crew> {
        self.by_name
            .get(name)
            .and_then(|v| v.last())
            .map(|(crew, _)| crew)
    }

    /// Version `version` of crew `name`.
    pub fn get_version(&self, name: &str, version: &str) -> Option<&Crew> {
        self.by_name
            .get(name)?
            .iter()
            .map(|(crew, _)| crew)
            .find(|crew| crew.def().version == version)
    }

    /// Whether one of these crews has this fingerprint (the definition a
    /// stored run executes with, whatever its name).
    pub fn offers(&self, fingerprint: &cairn::Fingerprint) -> bool {
        self.iter().any(|crew| crew.fingerprint() == fingerprint)
    }

    /// Crews sorted by name, then version (oldest first).
    pub fn iter(&self) -> impl Iterator<Item = &Crew> {
        self.by_name.values().flatten().map(|(crew, _)| crew)
    }

    /// How many crew versions are loaded.
    pub fn len(&self) -> usize {
        self.by_name.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// Whether a file of the crews directory sets a crew's `name` at its top
/// (a line `name = …` before any table): a price table or a limits file
/// does not.
fn names_a_crew(path: &std::path::Path) -> bool {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with('['))
        .any(|l| l.split('=').next().is_some_and(|k| k.trim() == "name"))
}
