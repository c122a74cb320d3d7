//! `SmallDisk`: a tmpfs of a few megabytes mounted on a temporary
//! directory, which a test fills on cue (a full disk) and frees again, for
//! the fault campaign's SQLite file and PostgreSQL write-ahead log.
//! Mounting needs root; where it is refused, [`SmallDisk::mount`] says why
//! and the test logs a skip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pg_cluster::{run, ClusterError};

/// A mounted tmpfs; dropping it unmounts it (lazily: a process still
/// holding a file there lets go when it exits) and removes the directory.
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

/// The file that fills the disk.
const FILLER: &str = "filler";

impl SmallDisk {
    /// A tmpfs of `megabytes` on a fresh temporary directory.
    pub fn mount(megabytes: u64) -> Result<SmallDisk, ClusterError> {
        let dir = tempfile::Builder::new()
            .prefix("cairn-small-disk-")
            .tempdir()
            .map_err(|e| ClusterError(format!("cannot create a temp dir: {e}")))?;
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={megabytes}m,mode=0777"))
            .arg("tmpfs")
            .arg(dir.path()))?;
        Ok(SmallDisk { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A directory on the disk that the `postgres` user owns (for a
    /// cluster's write-ahead log); not yet created, as `initdb` wants.
    pub(crate) fn dir_for_postgres(&self, name: &str) -> Result<PathBuf, ClusterError> {
        run(Command::new("chown")
            .arg("postgres:postgres")
            .arg(self.path()))?;
        Ok(self.path().join(name))
    }

    /// Fills what is left of the disk with one file (written until the
    /// disk refuses more); returns how many bytes it took.
    pub fn fill(&self) -> u64 {
        let Ok(mut file) = std::fs::File::create(self.path().join(FILLER)) else {
            return 0;
        };
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        while let Ok(n) = file.write(&chunk) {
            if n == 0 {
                break;
            }
            written += n as u64;
        }
        written
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.path().join(FILLER));
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        // The TempDir removes the (now empty) directory after this.
    }
}
