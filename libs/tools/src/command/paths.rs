//! Which argv elements name paths, and whether a path touches a protected one.
//!
//! A program run without a shell still interprets its own arguments, and we cannot know
//! which of them it reads or writes, so every argument that can name a path is checked,
//! and "touches" means the path is a protected path, lies under one, or contains one (a
//! recursive `chmod -R … /` reaches `/etc`). The rules fail closed: when an element could
//! be read as a path, it is.
//!
//! The lexical check ([`check_lexically`]) needs no file system and is what the risk
//! assessment uses; the runner repeats it on the resolved paths ([`check_resolved`]),
//! following symlinks, so a link in the sandbox cannot smuggle a protected path in.

use std::path::{Component, Path, PathBuf};

/// Why an argument is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    #[error(
        "argument {index} ({element:?}) refers to a parent directory ('..'), which could leave the sandbox"
    )]
    ParentReference { index: usize, element: String },
    #[error("argument {index} ({element:?}) touches protected path {protected}")]
    Protected {
        index: usize,
        element: String,
        protected: String,
    },
}

/// Protected paths and the exceptions a tool's policy grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedPaths {
    protected: Vec<PathBuf>,
    exceptions: Vec<PathBuf>,
}

impl ProtectedPaths {
    /// `protected` and `exceptions` are absolute paths; relative ones are ignored, since
    /// they cannot name a fixed place.
    pub fn new(
        protected: impl IntoIterator<Item = PathBuf>,
        exceptions: impl IntoIterator<Item = PathBuf>,
    ) -> ProtectedPaths {
        let clean = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
            let mut paths: Vec<PathBuf> = paths
                .into_iter()
                .filter(|p| p.is_absolute())
                .map(|p| normalize(&p))
                .collect();
            paths.sort();
            paths.dedup();
            paths
        };
        ProtectedPaths {
            protected: clean(protected.into_iter().collect()),
            exceptions: clean(exceptions.into_iter().collect()),
        }
    }

    /// The same rules with every path resolved through the file system (symlinks followed
    /// where they exist), as the runner compares them with resolved arguments. Both forms
    /// are kept, so a path protected by either name stays protected.
    pub fn resolved(&self) -> ProtectedPaths {
        let with_real = |paths: &[PathBuf]| {
            paths
                .iter()
                .flat_map(|p| [p.clone(), resolve(p)])
                .collect::<Vec<_>>()
        };
        ProtectedPaths::new(with_real(&self.protected), with_real(&self.exceptions))
    }

    pub fn protected(&self) -> &[PathBuf] {
        &self.protected
    }

    /// The protected path that `path` (absolute, normalized) touches, unless an exception
    /// covers it.
    pub fn touched_by(&self, path: &Path) -> Option<&Path> {
        if self.exceptions.iter().any(|e| path.starts_with(e)) {
            return None;
        }
        self.protected
            .iter()
            .find(|p| path.starts_with(p) || p.starts_with(path))
            .map(PathBuf::as_path)
    }
}

/// Absolute paths an argv element may name: the element itself when it starts with '/',
/// the text after the first '=' (`of=/dev/sda`, `--out=/etc/x`), the text from the first
/// '/' of a short option (`-o/etc/x`, `-I/usr/include`), and each '/' that follows a
/// separator (`:`, `,`, `@`, quotes, whitespace). Each candidate ends at the next
/// separator.
pub fn absolute_candidates(element: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = element.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'/' {
            continue;
        }
        let starts = match i.checked_sub(1).and_then(|p| bytes.get(p)) {
            None => true,
            Some(prev) => matches!(
                prev,
                b'=' | b':' | b',' | b'@' | b'\'' | b'"' | b' ' | b'\t' | b'\n'
            ),
        };
        // A short option with its value attached (`-o/etc/x`, `-xvf/etc/x`): letters and
        // digits between the dash and the first '/'. Long options take `=` (above).
        let first_slash_of_option = element.starts_with('-')
            && !element.starts_with("--")
            && element
                .get(1..i)
                .is_some_and(|flags| flags.bytes().all(|b| b.is_ascii_alphanumeric()));
        if starts || first_slash_of_option {
            // A candidate ends at the next list separator: programs split `a:/etc,/tmp`.
            let rest = element.get(i..).unwrap_or("");
            let end = rest.find(SEPARATORS).unwrap_or(rest.len());
            if let Some(candidate) = rest.get(..end) {
                out.push(candidate);
            }
        }
    }
    out.dedup();
    out
}

/// Characters that end a path inside one argv element.
const SEPARATORS: [char; 8] = [',', ':', ';', ' ', '\t', '\n', '\'', '"'];

/// Relative paths an argv element may name (resolved against the working directory):
/// the element unless it is absolute or an option, and the text after the first '='.
pub fn relative_candidates(element: &str) -> Vec<&str> {
    let mut out = Vec::new();
    if !element.is_empty() && !element.starts_with('/') && !element.starts_with('-') {
        out.push(element);
    }
    if let Some((_, value)) = element.split_once('=')
        && !value.is_empty()
        && !value.starts_with('/')
        && !out.contains(&value)
    {
        out.push(value);
    }
    out
}

/// Whether an element refers to a parent directory: `..` as a whole, next to a '/', as
/// an option's attached value (`-o..`) or as a `=`, `,` or `:` separated part. Text such
/// as `main..feature` is not a path step and passes.
pub fn has_parent_reference(element: &str) -> bool {
    let climbs = |part: &str| {
        part == ".." || part.starts_with("../") || part.ends_with("/..") || part.contains("/../")
    };
    (element.starts_with('-') && element.ends_with(".."))
        || element.split(['=', ',', ':']).any(climbs)
}

/// The lexical check of a rendered argv: no parent references, no absolute candidate
/// touching a protected path. Needs no file system.
pub fn check_lexically(argv: &[String], rules: &ProtectedPaths) -> Result<(), PathRefusal> {
    for (index, element) in argv.iter().enumerate() {
        if has_parent_reference(element) {
            return Err(PathRefusal::ParentReference {
                index,
                element: element.clone(),
            });
        }
        for candidate in absolute_candidates(element) {
            let path = normalize(Path::new(candidate));
            if let Some(protected) = rules.touched_by(&path) {
                return Err(PathRefusal::Protected {
                    index,
                    element: element.clone(),
                    protected: protected.display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The runner's check: the lexical one, then every absolute and relative candidate
/// resolved through the file system (relative ones against `working_dir`), so symlinks
/// are followed. `rules` should come from [`ProtectedPaths::resolved`].
pub fn check_resolved(
    argv: &[String],
    working_dir: &Path,
    rules: &ProtectedPaths,
) -> Result<(), PathRefusal> {
    check_lexically(argv, rules)?;
    for (index, element) in argv.iter().enumerate() {
        let absolute = absolute_candidates(element).into_iter().map(PathBuf::from);
        let relative = relative_candidates(element)
            .into_iter()
            .map(|r| working_dir.join(r));
        for path in absolute.chain(relative) {
            let real = resolve(&path);
            if let Some(protected) = rules.touched_by(&real) {
                return Err(PathRefusal::Protected {
                    index,
                    element: element.clone(),
                    protected: protected.display().to_string(),
                });
            }
        }
    }
    Ok(())
}

/// `path` without `.` components, repeated separators or a trailing '/'. `..` is kept
/// (callers refuse it before asking).
pub fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// `path` with symlinks resolved as far as it exists: the longest existing ancestor is
/// canonicalized and the rest appended. A path that does not exist yet (a file a
/// command will create) still resolves to where it would be created.
pub fn resolve(path: &Path) -> PathBuf {
    let normalized = normalize(path);
    let mut existing = normalized.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return normalize_dots(&out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return normalize_dots(&normalized),
        }
    }
}

/// Lexically folds `..` (after canonicalization only the unresolved tail can hold one).
fn normalize_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    fn rules() -> ProtectedPaths {
        ProtectedPaths::new(
            ["/etc", "/dev", "/usr/"].map(PathBuf::from),
            [PathBuf::from("/etc/noema/hosts")],
        )
    }

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn candidates_cover_the_forms_programs_accept() {
        assert_eq!(absolute_candidates("/etc/passwd"), ["/etc/passwd"]);
        assert_eq!(absolute_candidates("of=/dev/sda"), ["/dev/sda"]);
        assert_eq!(absolute_candidates("--out=/etc/x"), ["/etc/x"]);
        assert_eq!(absolute_candidates("-o/etc/x"), ["/etc/x"]);
        assert_eq!(absolute_candidates("-I/usr/include"), ["/usr/include"]);
        assert_eq!(absolute_candidates("a:/etc,/dev"), ["/etc", "/dev"]);
        assert_eq!(absolute_candidates("x=/tmp/a b"), ["/tmp/a"]);
        assert_eq!(absolute_candidates("dir/sub/file"), Vec::<&str>::new());
        assert_eq!(absolute_candidates("/home/u/lib"), ["/home/u/lib"]);
        assert_eq!(absolute_candidates("-xvf/etc/x"), ["/etc/x"]);
        // A long option's relative value is not an absolute path.
        assert_eq!(absolute_candidates("--out=dir/etc/x"), Vec::<&str>::new());
        assert_eq!(absolute_candidates("--dir/etc"), Vec::<&str>::new());
        assert_eq!(relative_candidates("dir/file"), ["dir/file"]);
        assert_eq!(relative_candidates("--out=file"), ["file"]);
        assert_eq!(relative_candidates("-v"), Vec::<&str>::new());
        assert_eq!(relative_candidates("/abs"), Vec::<&str>::new());
    }

    #[test]
    fn parent_references_are_refused_but_ranges_are_not() {
        for bad in [
            "..",
            "../x",
            "a/../b",
            "a/..",
            "--out=../x",
            "-o..",
            "x=..",
            "a,..",
        ] {
            assert!(has_parent_reference(bad), "{bad}");
            assert!(matches!(
                check_lexically(&argv(&["ok", bad]), &rules()),
                Err(PathRefusal::ParentReference { index: 1, .. })
            ));
        }
        for ok in ["main..feature", "a.b", "./x", "...x"] {
            assert!(!has_parent_reference(ok), "{ok}");
        }
    }

    #[test]
    fn protected_paths_their_children_and_their_ancestors_are_refused() {
        for bad in [
            "/etc",
            "/etc/",
            "/etc/passwd",
            "//etc//./shadow",
            "of=/dev/sda",
            "-o/usr/bin/x",
            "/",
        ] {
            let err = check_lexically(&argv(&[bad]), &rules()).unwrap_err();
            assert!(
                matches!(err, PathRefusal::Protected { index: 0, .. }),
                "{bad}"
            );
        }
        let err = check_lexically(&argv(&["-v", "/etc/hostname"]), &rules()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "argument 1 (\"/etc/hostname\") touches protected path /etc"
        );
        for ok in [
            "/etcetera",
            "/tmp/x",
            "relative/etc/passwd",
            "/etc/noema/hosts",
        ] {
            assert_eq!(check_lexically(&argv(&[ok]), &rules()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn resolution_follows_symlinks_out_of_the_working_dir() {
        let dir = tempfile::tempdir().unwrap();
        let protected_dir = tempfile::tempdir().unwrap();
        std::fs::write(protected_dir.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(protected_dir.path(), dir.path().join("link")).unwrap();
        let rules =
            ProtectedPaths::new([protected_dir.path().to_path_buf()], Vec::new()).resolved();

        // Lexically "link/secret" is a harmless relative path…
        assert_eq!(check_lexically(&argv(&["link/secret"]), &rules), Ok(()));
        // …but it resolves into the protected directory.
        let err = check_resolved(&argv(&["link/secret"]), dir.path(), &rules).unwrap_err();
        assert!(matches!(err, PathRefusal::Protected { index: 0, .. }));
        let err = check_resolved(&argv(&["--in=link"]), dir.path(), &rules).unwrap_err();
        assert!(matches!(err, PathRefusal::Protected { index: 0, .. }));
        // A file that does not exist yet resolves to where it would be created.
        assert_eq!(
            check_resolved(&argv(&["new/file.txt"]), dir.path(), &rules),
            Ok(())
        );
        assert!(check_resolved(&argv(&["link/new-file"]), dir.path(), &rules).is_err());
    }

    #[test]
    fn resolve_keeps_the_missing_tail() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(resolve(&dir.path().join("a/b")), real.join("a/b"));
        assert_eq!(resolve(&dir.path().join("./a")), real.join("a"));
    }
}
