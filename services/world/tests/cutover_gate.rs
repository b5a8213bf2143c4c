//! The seed's final source-search gate, run over this repository: no name of the old
//! perceive → intend → adjudicate path, its phase-shaped LLM traces or its silent
//! structured-output fallback may appear anywhere in our tree (A2, A3, A19). The names are
//! assembled from pieces so this file does not match itself.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};

fn forbidden() -> Vec<String> {
    let adjudicat = "adjudicat";
    let mut names: Vec<String> = vec![
        format!("JsonCompletion<{}ion>", "Adjudicat"),
        format!("apply_{adjudicat}ion("),
        format!("struct {}ion", "Adjudicat"),
        format!("validate_{adjudicat}ion"),
        format!("{}ionOutcome", "Adjudicat"),
        format!("{}_system", "perceive"),
        format!("{}_system", "intend"),
        format!("{adjudicat}e_system"),
        format!("{adjudicat}ion_schema"),
        format!("Llm{}", "Phase"),
        format!("llm_{}", "phase"),
        format!("LlmCognition{}", "Context"),
        format!("execute_with_{}", "fallback"),
        format!("fallback_of_{}", "call_id"),
        format!("/{}-systems", "perceive"),
        format!("/{}-systems", "intend"),
        format!("/{adjudicat}e-systems"),
        format!("/{adjudicat}ion-schemas"),
    ];
    names.sort();
    names
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | ".git" | "node_modules")
                && !name.starts_with('.')
            {
                files(&path, out);
            }
        } else if [
            "rs", "sql", "md", "toml", "json", "yaml", "yml", "proto", "sh",
        ]
        .iter()
        .any(|ext| name.ends_with(&format!(".{ext}")))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_old_cognition_surface_exists_in_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut all = Vec::new();
    files(&root, &mut all);
    assert!(all.len() > 50, "the walk found only {} files", all.len());
    let forbidden = forbidden();
    let mut hits = Vec::new();
    for path in &all {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for name in &forbidden {
            if text.contains(name.as_str()) {
                hits.push(format!(
                    "{}: {name}",
                    path.strip_prefix(&root).unwrap_or(path).display()
                ));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "the seed's cutover gate matched:\n{}",
        hits.join("\n")
    );
}

#[test]
fn no_world_migration_uses_label_text() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/world");
    let mut all = Vec::new();
    files(&dir, &mut all);
    for path in all {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&format!("label_{}", "text")),
            "{}",
            path.display()
        );
    }
}

#[test]
fn the_gate_would_see_an_old_name() {
    // The gate is only as good as its list: each name is what the seed greps for.
    let forbidden = forbidden();
    assert_eq!(forbidden.len(), 18);
    let sample = format!("fn x() {{ let p = Llm{}::Intend; }}", "Phase");
    assert!(forbidden.iter().any(|name| sample.contains(name.as_str())));
}
