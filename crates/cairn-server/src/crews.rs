//! The crews a server offers: every `*.toml` file of one directory, loaded
//! once at startup. A file that does not load stops the startup, naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn::Crew;

use crate::Error;

/// Crews by name, each with the file it came from.
#[derive(Debug, Clone, Default)]
pub struct Crews {
    by_name: BTreeMap<String, (Crew, PathBuf)>,
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
        let mut crews = Crews::default();
        for path in files {
            let crew = Crew::from_file(&path).map_err(|source| Error::CrewFile {
                path: path.clone(),
                source: Box::new(source),
            })?;
            crews.insert(crew, path)?;
        }
        Ok(crews)
    }

    /// Adds a crew; refused if another crew already has its name.
    pub fn insert(&mut self, crew: Crew, path: PathBuf) -> Result<(), Error> {
        let name = crew.def().name.clone();
        if let Some((_, first)) = self.by_name.get(&name) {
            return Err(Error::DuplicateCrew {
                name,
                first: first.clone(),
                second: path,
            });
        }
        self.by_name.insert(name, (crew, path));
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Crew> {
        self.by_name.get(name).map(|(crew, _)| crew)
    }

    /// Whether one of these crews has this fingerprint (the definition a
    /// stored run executes with, whatever its name).
    pub fn offers(&self, fingerprint: &cairn::Fingerprint) -> bool {
        self.iter().any(|crew| crew.fingerprint() == fingerprint)
    }

    /// Crews sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Crew> {
        self.by_name.values().map(|(crew, _)| crew)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
