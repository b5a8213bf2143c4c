//! Prompt templates: chat messages whose text may hold `{{placeholder}}`s filled in by the
//! kernel from the turn. The set of placeholders is closed, so a misspelt one is refused when
//! the workflow is stored rather than sent to a model as literal braces.

use crate::domain::chat::ChatMessage;
use crate::domain::problem::Problem;

use super::PromptTemplate;

/// Every placeholder a prompt may use.
pub const PLACEHOLDERS: [&str; 8] = [
    // The world as subjects see it: environments and entities (no other agent's memory).
    "world.projection",
    // The acting subject: id, kind, environment, state, memory.
    "subject.rendered",
    // The ambient context visible to the subject (JSON; `{}` when there is none).
    "ambient.visible",
    // The node's available tools: name, description and arguments schema of each.
    "tools.available",
    "world.slug",
    "world.attempted_turn",
    "world.simulation_time",
    "subject.entity_id",
];

/// The values of the placeholders for one generation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptValues {
    pub world_projection: String,
    pub subject_rendered: String,
    pub ambient_visible: String,
    pub tools_available: String,
    pub world_slug: String,
    pub world_attempted_turn: String,
    pub world_simulation_time: String,
    pub subject_entity_id: String,
}

impl PromptValues {
    fn get(&self, name: &str) -> Option<&str> {
        Some(match name {
            "world.projection" => &self.world_projection,
            "subject.rendered" => &self.subject_rendered,
            "ambient.visible" => &self.ambient_visible,
            "tools.available" => &self.tools_available,
            "world.slug" => &self.world_slug,
            "world.attempted_turn" => &self.world_attempted_turn,
            "world.simulation_time" => &self.world_simulation_time,
            "subject.entity_id" => &self.subject_entity_id,
            _ => return None,
        })
    }
}

/// A piece of template text: literal, or a placeholder name.
enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// Splits `text` into literal text and `{{ name }}` placeholders.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push(Piece::Text(&rest[..open]));
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or_else(|| "a \"{{\" is never closed by \"}}\"".to_owned())?;
        out.push(Piece::Placeholder(after[..close].trim()));
        rest = &after[close + 2..];
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// Problems of one message text (pointer `""`: the caller knows where the text is).
pub fn check_prompt_text(text: &str) -> Vec<Problem> {
    match pieces(text) {
        Err(message) => vec![Problem::new("", message)],
        Ok(pieces) => pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Placeholder(name) if !PLACEHOLDERS.contains(name) => Some(Problem::new(
                    "",
                    format!(
                        "unknown placeholder {{{{{name}}}}} (known: {})",
                        PLACEHOLDERS.join(", ")
                    ),
                )),
                _ => None,
            })
            .collect(),
    }
}

/// Whether any message of `template` uses the placeholder `name`: a value no message uses
/// need not be computed (the world projection is as large as the world, per subject).
pub fn uses_placeholder(template: &PromptTemplate, name: &str) -> bool {
    template.messages.iter().any(|message| {
        pieces(&message.content).is_ok_and(|pieces| {
            pieces
                .iter()
                .any(|piece| matches!(piece, Piece::Placeholder(used) if *used == name))
        })
    })
}

/// The messages of `template` with every placeholder filled in.
pub fn render_prompt(
    template: &PromptTemplate,
    values: &PromptValues,
) -> Result<Vec<ChatMessage>, Problem> {
    template
        .messages
        .iter()
        .enumerate()
        .map(|(i, message)| {
            let at = format!("/messages/{i}/content");
            let pieces = pieces(&message.content).map_err(|m| Problem::new(&at, m))?;
            let mut content = String::with_capacity(message.content.len());
            for piece in pieces {
                match piece {
                    Piece::Text(text) => content.push_str(text),
                    Piece::Placeholder(name) => {
                        content.push_str(values.get(name).ok_or_else(|| {
                            Problem::new(&at, format!("unknown placeholder {{{{{name}}}}}"))
                        })?)
                    }
                }
            }
            Ok(ChatMessage {
                role: message.role,
                content,
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::chat::ChatRole;

    #[test]
    fn a_placeholder_is_used_only_when_a_message_names_it() {
        let template = PromptTemplate {
            messages: vec![
                ChatMessage::system("Act."),
                ChatMessage::user("You: {{ subject.rendered }}; {{ambient.visible}}"),
            ],
        };
        assert!(uses_placeholder(&template, "subject.rendered"));
        assert!(uses_placeholder(&template, "ambient.visible"));
        assert!(!uses_placeholder(&template, "world.projection"));
        let with_world = PromptTemplate {
            messages: vec![ChatMessage::user("World:\n{{world.projection}}")],
        };
        assert!(uses_placeholder(&with_world, "world.projection"));
    }

    #[test]
    fn placeholders_are_filled_in() {
        let template = PromptTemplate {
            messages: vec![
                ChatMessage::system("Plain {braces} stay."),
                ChatMessage::user(
                    "World:\n{{world.projection}}\n\nYou: {{ subject.entity_id }} at {{world.attempted_turn}}",
                ),
            ],
        };
        let values = PromptValues {
            world_projection: "{\"entities\":{}}".into(),
            subject_entity_id: "bob".into(),
            world_attempted_turn: "3".into(),
            ..PromptValues::default()
        };
        let messages = render_prompt(&template, &values).unwrap();
        assert_eq!(messages[0].content, "Plain {braces} stay.");
        assert_eq!(messages[1].role, ChatRole::User);
        assert_eq!(
            messages[1].content,
            "World:\n{\"entities\":{}}\n\nYou: bob at 3"
        );
    }

    #[test]
    fn unknown_and_unclosed_placeholders_are_refused() {
        assert!(check_prompt_text("{{world.projection}} {{tools.available}}").is_empty());
        let unknown = check_prompt_text("{{world.projecton}}");
        assert!(
            unknown[0]
                .message
                .contains("unknown placeholder {{world.projecton}}")
        );
        let open = check_prompt_text("{{world.projection");
        assert!(open[0].message.contains("never closed"));
        let template = PromptTemplate {
            messages: vec![ChatMessage::user("ok"), ChatMessage::user("{{nope}}")],
        };
        let err = render_prompt(&template, &PromptValues::default()).unwrap_err();
        assert_eq!(err.pointer, "/messages/1/content");
    }
}
