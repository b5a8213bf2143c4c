//! docs/scopes.md documents exactly the scopes the contracts declare.

#[test]
fn docs_scopes_lists_every_rpc_with_its_scope() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/scopes.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let documented: Vec<&str> = doc
        .lines()
        .filter(|line| line.starts_with("| `/noema."))
        .collect();
    for (rpc, scope) in noema_proto::METHOD_SCOPES {
        // Alternatives are separated by `|`, escaped inside a Markdown table cell.
        let row = format!("| `{rpc}` | `{}` |", scope.replace('|', "\\|"));
        assert!(
            documented.contains(&row.as_str()),
            "docs/scopes.md lacks or misstates: {row}"
        );
    }
    assert_eq!(
        documented.len(),
        noema_proto::METHOD_SCOPES.len(),
        "docs/scopes.md lists RPCs that the contracts do not have"
    );
}
