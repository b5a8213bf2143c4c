//! docs/scopes.md documents every REST route the gateway declares: each protected route
//! in its REST table next to the RPCs it calls (whose scopes the RPC table states, as
//! libs/proto/tests/scopes_doc.rs checks), each public route among the public ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn docs_scopes_lists_every_rest_route_with_its_rpcs() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/scopes.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let rest_rows: Vec<&str> = doc
        .split("## REST routes")
        .nth(1)
        .expect("docs/scopes.md has a REST routes section")
        .lines()
        .filter(|line| line.starts_with("| `"))
        .collect();
    let public = doc
        .split("\n\n")
        .find(|paragraph| paragraph.starts_with("Public without a token"))
        .expect("docs/scopes.md says what is public");
    let mut checked = 0;
    for route in noema_gateway::route_table() {
        let name = format!("`{} {}`", route.verb.as_str(), route.path);
        if route.access == noema_gateway::route::Access::Public {
            assert!(
                public.contains(&format!("`{}`", route.path)),
                "docs/scopes.md does not list {name} as public"
            );
            continue;
        }
        let scope = route
            .scope()
            .unwrap_or_else(|| panic!("{name} calls {:?}, which no contract has", route.rpcs()));
        let row = rest_rows
            .iter()
            .find(|row| {
                row.split('|')
                    .nth(1)
                    .is_some_and(|cell| cell.contains(&name))
            })
            .unwrap_or_else(|| panic!("docs/scopes.md's REST table lacks {name}"));
        let rpc_cell = row.split('|').nth(2).unwrap_or_default();
        for rpc in route.rpcs() {
            let method = rpc.rsplit('/').next().unwrap();
            assert!(
                rpc_cell.contains(&format!("`{method}`"))
                    || rpc_cell.contains(&format!("/{method}`")),
                "docs/scopes.md's row for {name} does not name {method}: {row}"
            );
            // The RPC table states the scope; the route's is its first RPC's.
            let documented = format!(
                "| `{rpc}` | `{}` |",
                noema_proto::required_scope(rpc)
                    .unwrap()
                    .replace('|', "\\|")
            );
            assert!(
                doc.contains(&documented),
                "docs/scopes.md lacks {documented}"
            );
        }
        assert!(!scope.is_empty());
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} protected routes");
}
