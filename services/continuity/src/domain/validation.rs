pub fn upgrade_legacy(v: &serde_json::Value) -> serde_json::Value {
    v.clone()
}
