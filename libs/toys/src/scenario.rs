//! The seed's park scenario as components, for the demo (`noema world demo park`), the
//! end-to-end tests and the benchmark: the toy sources' definitions and result schemas, the
//! seed's own cognition workflow, a simple LLM-only workflow, a cognition profile and the
//! scenario. Documents refer to each other by `"<name>"` placeholders, replaced by hashes as
//! the components are stored in [`PARK`]'s order (`world-patch-schema-hash` is the kernel's
//! built-in WorldPatch schema).
//!
//! The seed's verbatim examples (its source definitions and workflow) are kept once, with the
//! world kernel's tests (`services/world/tests/fixtures/seed`); the park's own pieces are in
//! `libs/toys/park`.

use std::collections::BTreeMap;

use serde_json::Value;

/// One component of the park, in storing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkComponent {
    /// The placeholder that names it (`<name>` in later documents).
    pub name: &'static str,
    /// `json_schema`, `response_source`, `cognition_workflow`, `cognition_profile` or
    /// `scenario`.
    pub kind: &'static str,
    /// The document, with placeholders.
    pub text: &'static str,
}

macro_rules! seed {
    ($file:literal) => {
        include_str!(concat!(
            "../../../services/world/tests/fixtures/seed/",
            $file
        ))
    };
}

macro_rules! park {
    ($file:literal) => {
        include_str!(concat!("../park/", $file))
    };
}

/// The placeholder of the kernel's built-in WorldPatch schema.
pub const WORLD_PATCH_SCHEMA: &str = "world-patch-schema-hash";

/// Every component of the park, each after the components it names.
pub const PARK: [ParkComponent; 20] = [
    ParkComponent {
        name: "weather-result-schema-hash",
        kind: "json_schema",
        text: park!("weather_result.schema.json"),
    },
    ParkComponent {
        name: "pa-result-schema-hash",
        kind: "json_schema",
        text: park!("pa_result.schema.json"),
    },
    ParkComponent {
        name: "phone-inbox-result-schema-hash",
        kind: "json_schema",
        text: park!("phone_inbox_result.schema.json"),
    },
    ParkComponent {
        name: "buy-candy-arguments-schema-hash",
        kind: "json_schema",
        text: park!("buy_candy_arguments.schema.json"),
    },
    ParkComponent {
        name: "vending-result-schema-hash",
        kind: "json_schema",
        text: park!("vending_result.schema.json"),
    },
    ParkComponent {
        name: "drinking-fountain-arguments-schema-hash",
        kind: "json_schema",
        text: park!("drinking_fountain_arguments.schema.json"),
    },
    ParkComponent {
        name: "drinking-fountain-result-schema-hash",
        kind: "json_schema",
        text: park!("drinking_fountain_result.schema.json"),
    },
    ParkComponent {
        name: "send-text-arguments-schema-hash",
        kind: "json_schema",
        text: park!("send_text_arguments.schema.json"),
    },
    ParkComponent {
        name: "send-text-result-schema-hash",
        kind: "json_schema",
        text: park!("send_text_result.schema.json"),
    },
    ParkComponent {
        name: "toy-weather-source-hash",
        kind: "response_source",
        text: seed!("source_toy_park_weather.json"),
    },
    ParkComponent {
        name: "toy-pa-source-hash",
        kind: "response_source",
        text: seed!("source_toy_park_pa.json"),
    },
    ParkComponent {
        name: "toy-phone-inbox-source-hash",
        kind: "response_source",
        text: seed!("source_toy_phone_inbox.json"),
    },
    ParkComponent {
        name: "llm-source-hash",
        kind: "response_source",
        text: seed!("source_llm_chat_router.json"),
    },
    ParkComponent {
        name: "http-vending-source-hash",
        kind: "response_source",
        text: seed!("source_toy_vending_machine.json"),
    },
    ParkComponent {
        name: "http-drinking-fountain-source-hash",
        kind: "response_source",
        text: park!("source_toy_drinking_fountain.json"),
    },
    ParkComponent {
        name: "dummy-send-text-source-hash",
        kind: "response_source",
        text: seed!("source_dummy_send_text.json"),
    },
    ParkComponent {
        name: "park-workflow-hash",
        kind: "cognition_workflow",
        text: seed!("cognition_workflow.json"),
    },
    ParkComponent {
        name: "simple-workflow-hash",
        kind: "cognition_workflow",
        text: park!("simple_workflow.json"),
    },
    ParkComponent {
        name: "park-profile-hash",
        kind: "cognition_profile",
        text: park!("cognition_profile.json"),
    },
    ParkComponent {
        name: "park-scenario-hash",
        kind: "scenario",
        text: park!("scenario.json"),
    },
];

/// The environment variables the park's `http_json` sources name (`url_env`); every toy is
/// served on one base URL, so all of them hold it.
pub const PARK_URL_ENVS: [&str; 5] = [
    "CHUKWA_TOY_WEATHER_URL",
    "CHUKWA_TOY_PA_URL",
    "CHUKWA_TOY_PHONE_URL",
    "CHUKWA_TOY_VENDING_URL",
    "CHUKWA_TOY_FOUNTAIN_URL",
];

/// The model alias the park's LLM source names.
pub const PARK_MODEL_ALIAS: &str = "@chat";

/// The scripted LLM's answers for three turns of the park (`libs/toys/scripts/park.json`).
pub const PARK_SCRIPT: &str = include_str!("../scripts/park.json");

impl ParkComponent {
    /// The document, placeholders left in.
    pub fn document(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(self.text)
    }
}

/// `value` with every string `"<name>"` whose name is in `names` replaced by its hash.
pub fn substitute(value: &Value, names: &BTreeMap<String, String>) -> Value {
    match value {
        Value::String(s) => match s.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            Some(name) if names.contains_key(name) => Value::from(names[name].as_str()),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|i| substitute(i, names)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, names)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_component_parses_and_names_only_earlier_ones() {
        let mut known = vec![WORLD_PATCH_SCHEMA.to_owned()];
        for component in PARK {
            let document = component.document().unwrap();
            let mut named = Vec::new();
            collect_placeholders(&document, &mut named);
            for name in named {
                assert!(
                    known.contains(&name),
                    "{} names <{name}> before it exists",
                    component.name
                );
            }
            known.push(component.name.to_owned());
        }
    }

    fn collect_placeholders(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => {
                if let Some(name) = s.strip_prefix('<').and_then(|s| s.strip_suffix("-hash>")) {
                    out.push(format!("{name}-hash"));
                }
            }
            Value::Array(items) => items.iter().for_each(|i| collect_placeholders(i, out)),
            Value::Object(map) => map.values().for_each(|v| collect_placeholders(v, out)),
            _ => {}
        }
    }
}
