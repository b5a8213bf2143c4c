//! File system helpers shared by the local object stores (`file://` and `pack://`).

use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::path::Path;

use super::ObjectError;

/// Create `dir` and any missing ancestors, `fsync`ing the parent of each one so that the new
/// directory entries survive a crash. Only for a store's own directories, at open.
pub(super) fn create_dir_durably(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = dir;
    while !cur.is_dir() {
        missing.push(cur);
        match cur.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => cur = parent,
            _ => break,
        }
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            // Created concurrently; we still sync its parent below before relying on it.
            Err(e) if e.kind() == ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e),
        }
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(super) fn io_error(op: &'static str, target: &str, e: io::Error) -> ObjectError {
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::Interrupted | ErrorKind::WouldBlock => {
            ObjectError::unavailable(op, target, e)
        }
        _ => ObjectError::backend(op, target, e),
    }
}

/// Run blocking file system work off the async threads.
pub(super) async fn blocking<T, F>(op: &'static str, target: String, f: F) -> Result<T, ObjectError>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(io_error(op, &target, e)),
        Err(join) => Err(ObjectError::backend(op, target, join)),
    }
}

/// A local store needs a root directory: `scheme://` alone names none.
pub(super) fn require_root(root: &Path, scheme: &str) -> Result<(), ObjectError> {
    if root.as_os_str().is_empty() {
        return Err(ObjectError::InvalidUrl {
            url_redacted: format!("{scheme}://"),
            reason: format!("the {scheme} URL has no directory path"),
        });
    }
    Ok(())
}
