//! [`ScratchDir`]: a fresh directory for one server, removed with it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::process::ServerUser;

/// Directories made by this process so far; part of each new name.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A new directory under the system's temporary directory, owned by the [`ServerUser`] and
/// removed, with everything in it, when dropped.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
    user: ServerUser,
}

impl ScratchDir {
    /// Creates `pgq-<kind>-<pid>-<n>` in the temporary directory.
    pub(crate) fn new(kind: &str) -> Self {
        let user = ServerUser::get();
        let base = std::env::temp_dir();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("pgq-{kind}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                        .unwrap_or_else(|err| panic!("cannot restrict {}: {err}", path.display()));
                    user.own(&path);
                    return Self { path, user };
                }
                // Left behind by an earlier process with the same pid: take the next name.
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(err) => panic!("cannot create a directory in {}: {err}", base.display()),
            }
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The account server programs run as; it owns the directory.
    pub(crate) fn user(&self) -> ServerUser {
        self.user
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
